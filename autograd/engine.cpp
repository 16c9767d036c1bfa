// The backward engine. Three steps, all iterative:
//   1. walk the graph from the roots and count, for every node, how many edges point at it;
//   2. start from the roots' gradients, and always run the ready node with the largest
//      sequence number: the tape in reverse, skipping what the roots don't reach;
//   3. after a node runs, add its gradients into its inputs' buffers (a tensor used twice
//      gets the sum), and a node whose count drops to zero becomes ready.
#include "autograd/engine.h"

#include <queue>
#include <unordered_map>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "core/shape.h"
#include "ops/ops.h"

namespace minigrad {
namespace autograd {
namespace {

struct NodeState {
  int pending = 0;         // edges from nodes not yet run
  tensor_list gradients;   // one per forward output, summed over uses
};

struct LaterFirst {
  bool operator()(const Node* a, const Node* b) const { return a->sequence_nr() < b->sequence_nr(); }
};

Tensor root_gradient(const Tensor& root, const Tensor& given, size_t i) {
  if (!given.defined()) {
    MG_CHECK(root.numel() == 1,
             "backward: a gradient can be implied only for a one-element output; output {} has shape {}, so pass "
             "a gradient of that shape",
             i, shape_str(root.sizes()));
    return ones_like(root);
  }
  MG_CHECK(given.sizes() == root.sizes(), "backward: gradient {} has shape {}, the output has shape {}", i,
           shape_str(given.sizes()), shape_str(root.sizes()));
  MG_CHECK(given.dtype() == root.dtype(), "backward: gradient {} is {}, the output is {}", i, given.dtype(),
           root.dtype());
  MG_CHECK(given.device() == root.device(), "backward: gradient {} is on {}, the output is on {}", i,
           given.device(), root.device());
  return given;
}

}  // namespace

void backward(const tensor_list& roots, const tensor_list& grad_roots, bool retain_graph) {
  MG_CHECK(grad_roots.empty() || grad_roots.size() == roots.size(),
           "backward: got {} gradients for {} outputs", grad_roots.size(), roots.size());
  std::unordered_map<Node*, NodeState> state;
  std::vector<std::pair<Edge, Tensor>> starts;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& root = roots[i];
    MG_CHECK(root.defined(), "backward: output {} is undefined", i);
    MG_CHECK(root.requires_grad(),
             "backward: output {} does not require grad and has no grad_fn: nothing recorded it on the tape "
             "(was it computed under NoGradGuard, or from inputs that don't require grad?)",
             i);
    starts.emplace_back(gradient_edge(root), root_gradient(root, i < grad_roots.size() ? grad_roots[i] : Tensor(), i));
  }

  // 1. Count the edges into every reachable node.
  std::vector<Node*> stack;
  for (auto& [edge, grad] : starts)
    if (state.emplace(edge.fn.get(), NodeState{}).second) stack.push_back(edge.fn.get());
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    for (const Edge& e : node->next_edges()) {
      if (!e.valid()) continue;
      auto [it, inserted] = state.try_emplace(e.fn.get());
      ++it->second.pending;
      if (inserted) stack.push_back(e.fn.get());
    }
  }

  auto add_gradient = [&](const Edge& e, Tensor grad) {
    tensor_list& buffer = state[e.fn.get()].gradients;
    if (buffer.empty()) buffer.resize(e.fn->num_outputs());
    Tensor& slot = buffer[e.input_nr];
    slot = slot.defined() ? slot + grad : std::move(grad);
  };

  NoGradGuard no_grad;  // backward formulas are not recorded
  std::priority_queue<Node*, std::vector<Node*>, LaterFirst> ready;
  for (auto& [edge, grad] : starts) add_gradient(edge, std::move(grad));
  for (auto& [edge, grad] : starts) {
    NodeState& s = state[edge.fn.get()];
    if (s.pending == 0) {
      s.pending = -1;  // queued once even when two roots share a node
      ready.push(edge.fn.get());
    }
  }

  // 2. and 3. Run the tape backwards.
  while (!ready.empty()) {
    Node* node = ready.top();
    ready.pop();
    tensor_list grads = std::move(state[node].gradients);
    tensor_list grad_inputs;
    bool any = false;
    for (const Tensor& g : grads) any = any || g.defined();
    if (any) {
      grads.resize(node->num_outputs());
      grad_inputs = node->apply(std::move(grads));
    }
    if (!retain_graph) node->release_variables();
    const auto& edges = node->next_edges();
    for (size_t i = 0; i < edges.size(); ++i) {
      const Edge& e = edges[i];
      if (!e.valid()) continue;
      if (i < grad_inputs.size() && grad_inputs[i].defined()) add_gradient(e, std::move(grad_inputs[i]));
      NodeState& next = state[e.fn.get()];
      if (--next.pending == 0) ready.push(e.fn.get());
    }
  }
}

}  // namespace autograd

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  autograd::backward({*this}, {gradient}, retain_graph);
}

}  // namespace minigrad
