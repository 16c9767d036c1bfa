// to_dot: the reachable tape in Graphviz DOT (autograd/graph_export.h).
#include <minigrad/autograd/graph_export.h>

#include <algorithm>
#include <deque>
#include <limits>
#include <unordered_map>

#include <minigrad/autograd/node.h>
#include <minigrad/core/shape.h>

namespace minigrad {
namespace autograd {
namespace {

constexpr uint64_t kNoSequenceNr = std::numeric_limits<uint64_t>::max();  // AccumulateGrad's

std::string meta_str(const TensorMeta& m) {
  std::string s = fmt::format("{} {}", shape_str(m.sizes), m.dtype);
  if (!m.device.is_cpu()) s += fmt::format(" {}", m.device);
  return s;
}

// A DOT string literal holding `text`; newlines become DOT's \n line breaks.
std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

}  // namespace

std::string to_dot(const tensor_list& roots, const DotOptions& options) {
  // Breadth-first from the roots, with a queue rather than recursion: a graph of a million
  // chained ops is as easy as a small one. ids gives each node its number, in visit order.
  std::vector<const Node*> order;
  std::unordered_map<const Node*, size_t> ids;
  std::deque<const Node*> queue;
  auto visit = [&](const Node* n) {
    if (ids.emplace(n, order.size()).second) {
      order.push_back(n);
      queue.push_back(n);
    }
  };
  for (size_t i = 0; i < roots.size(); ++i) {
    MG_CHECK(roots[i].defined(), "to_dot: root {} is an undefined tensor", i);
    if (roots[i].grad_fn()) visit(roots[i].grad_fn().get());
  }
  while (!queue.empty()) {
    const Node* n = queue.front();
    queue.pop_front();
    for (const Edge& e : n->next_edges())
      if (e.valid()) visit(e.fn.get());
  }

  uint64_t first_nr = 0;
  if (options.relative_sequence_numbers) {
    first_nr = kNoSequenceNr;
    for (const Node* n : order)
      if (n->sequence_nr() != kNoSequenceNr) first_nr = std::min(first_nr, n->sequence_nr());
  }

  std::string dot = "digraph autograd {\n  node [shape=box];\n";
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& r = roots[i];
    std::string label = fmt::format("output {}\n{}", i, meta_str(TensorMeta::of(r)));
    if (!r.grad_fn()) label += r.requires_grad() ? "\n(a leaf)" : "\n(no gradient)";
    dot += fmt::format("  out{} [shape=oval, label={}];\n", i, quoted(label));
  }
  for (size_t id = 0; id < order.size(); ++id) {
    const Node* n = order[id];
    std::string label = n->name();
    if (n->sequence_nr() != kNoSequenceNr) label += fmt::format(" #{}", n->sequence_nr() - first_nr);
    if (const auto* acc = dynamic_cast<const AccumulateGrad*>(n)) {
      label += "\nleaf " + meta_str(TensorMeta::of(Tensor(acc->leaf())));
    }
    const std::vector<TensorMeta> saved = n->saved_tensor_metas();
    for (size_t k = 0; k < saved.size(); ++k) label += (k == 0 ? "\nsaved: " : ", ") + meta_str(saved[k]);
    dot += fmt::format("  n{} [label={}];\n", id, quoted(label));
  }
  // Edge labels only where they tell something apart: which argument of the op the edge
  // stands for, and which output of an op with several it leads to.
  auto edge = [&](const std::string& from, const Edge& e, int64_t input) {
    std::string label;
    if (input >= 0) label = fmt::format("input {}", input);
    if (e.fn->num_outputs() > 1) label += fmt::format("{}output {}", label.empty() ? "" : ", ", e.input_nr);
    dot += fmt::format("  {} -> n{}{};\n", from, ids.at(e.fn.get()),
                       label.empty() ? "" : fmt::format(" [label={}]", quoted(label)));
  };
  for (size_t i = 0; i < roots.size(); ++i)
    if (roots[i].grad_fn()) edge(fmt::format("out{}", i), Edge{roots[i].grad_fn(), roots[i].output_nr()}, -1);
  for (size_t id = 0; id < order.size(); ++id) {
    const std::vector<Edge>& edges = order[id]->next_edges();
    size_t valid = 0;
    for (const Edge& e : edges) valid += e.valid() ? 1 : 0;
    // An op's only edge, from its first argument, needs no label (sum(x), relu(x), x * 2.0).
    for (size_t k = 0; k < edges.size(); ++k)
      if (edges[k].valid())
        edge(fmt::format("n{}", id), edges[k], valid > 1 || k > 0 ? static_cast<int64_t>(k) : -1);
  }
  return dot + "}\n";
}

}  // namespace autograd
}  // namespace minigrad
