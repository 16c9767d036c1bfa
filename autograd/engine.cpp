// The backward engine. Three steps, all iterative:
//   1. walk the graph from the roots and count, for every node, how many edges point at it;
//   2. start from the roots' gradients, and always run the ready node with the largest
//      sequence number: the tape in reverse, skipping what the roots don't reach;
//   3. after a node runs, add its gradients into its inputs' buffers (a tensor used twice
//      gets the sum), and a node whose count drops to zero becomes ready.
// autograd::grad runs the same loop, but captures the gradients of its inputs instead of
// accumulating into leaves, and runs only the nodes that lead to those inputs.
#include <minigrad/autograd/engine.h>

#include <queue>
#include <unordered_map>

#include <minigrad/autograd/anomaly_mode.h>
#include <minigrad/autograd/grad_mode.h>
#include <minigrad/autograd/node.h>
#include <minigrad/core/shape.h>
#include <minigrad/ops/ops.h>

namespace minigrad {
namespace autograd {
namespace {

struct NodeState {
  int pending = 0;        // edges from nodes not yet run
  bool needed = true;     // leads to something the caller wants (autograd::grad prunes)
  tensor_list gradients;  // one per forward output, summed over uses
};

struct LaterFirst {
  bool operator()(const Node* a, const Node* b) const { return a->sequence_nr() < b->sequence_nr(); }
};

// One run of backward or grad: what queue_callback appends to.
struct GraphTask {
  std::vector<std::function<void()>> callbacks;
};
thread_local GraphTask* current_task = nullptr;

// Makes `task` the one queue_callback sees for this thread, and restores the outer one
// (a hook may itself call backward).
class CurrentTaskScope {
 public:
  explicit CurrentTaskScope(GraphTask* task) : prev_(current_task) { current_task = task; }
  ~CurrentTaskScope() { current_task = prev_; }
  CurrentTaskScope(const CurrentTaskScope&) = delete;
  CurrentTaskScope& operator=(const CurrentTaskScope&) = delete;

 private:
  GraphTask* prev_;
};

Tensor root_gradient(const char* op, const Tensor& root, const Tensor& given, size_t i) {
  if (!given.defined()) {
    MG_CHECK(root.numel() == 1,
             "{}: a gradient can be implied only for a one-element output; output {} has shape {}, so pass "
             "a gradient of that shape",
             op, i, shape_str(root.sizes()));
    return ones_like(root);
  }
  MG_CHECK(given.sizes() == root.sizes(), "{}: gradient {} has shape {}, the output has shape {}", op, i,
           shape_str(given.sizes()), shape_str(root.sizes()));
  MG_CHECK(given.dtype() == root.dtype(), "{}: gradient {} is {}, the output is {}", op, i, given.dtype(),
           root.dtype());
  MG_CHECK(given.device() == root.device(), "{}: gradient {} is on {}, the output is on {}", op, i, given.device(),
           root.device());
  return given;
}

// Where autograd::grad wants a gradient: input `input_nr` of `fn`, for the caller's input `index`.
struct Capture {
  Node* fn;
  uint32_t input_nr;
  size_t index;
};

// The loop shared by backward and grad. `captures` empty: backward (every reachable node
// runs, leaves accumulate). Otherwise grad: the gradients arriving at the captures are
// returned, and only nodes on a path to one of them run.
tensor_list run_backward(const char* op, const tensor_list& roots, const tensor_list& grad_roots, bool retain_graph,
                         bool create_graph, const tensor_list& inputs, bool allow_unused) {
  MG_CHECK(grad_roots.empty() || grad_roots.size() == roots.size(), "{}: got {} gradients for {} outputs", op,
           grad_roots.size(), roots.size());
  std::unordered_map<Node*, NodeState> state;
  std::vector<std::pair<Edge, Tensor>> starts;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& root = roots[i];
    MG_CHECK(root.defined(), "{}: output {} is undefined", op, i);
    MG_CHECK(root.requires_grad(),
             "{}: output {} does not require grad and has no grad_fn: nothing recorded it on the tape "
             "(was it computed under NoGradGuard, or from inputs that don't require grad?)",
             op, i);
    starts.emplace_back(gradient_edge(root),
                        root_gradient(op, root, i < grad_roots.size() ? grad_roots[i] : Tensor(), i));
  }

  std::vector<Capture> captures;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    MG_CHECK(x.defined(), "{}: input {} is undefined", op, i);
    MG_CHECK(x.requires_grad(), "{}: input {} does not require grad, so it has no gradient", op, i);
    const Edge e = gradient_edge(x);
    captures.push_back(Capture{e.fn.get(), e.input_nr, i});
  }
  const bool capturing = !inputs.empty();
  auto is_capture_node = [&](Node* n) {
    for (const Capture& c : captures)
      if (c.fn == n) return true;
    return false;
  };

  // 1. Count the edges into every reachable node (and, for grad, list them in DFS order).
  std::vector<Node*> stack;
  std::vector<Node*> discovered;
  for (auto& [edge, grad] : starts)
    if (state.emplace(edge.fn.get(), NodeState{}).second) stack.push_back(edge.fn.get());
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    discovered.push_back(node);
    for (const Edge& e : node->next_edges()) {
      if (!e.valid()) continue;
      auto [it, inserted] = state.try_emplace(e.fn.get());
      ++it->second.pending;
      if (inserted) stack.push_back(e.fn.get());
    }
  }
  if (capturing) {
    // A node is needed if it is a capture or leads to one. Fixed point over the reachable
    // nodes, visited children-first by repeating the pass in reverse discovery order until
    // nothing changes (each pass is linear; graphs converge in a few).
    for (auto& [node, s] : state) s.needed = is_capture_node(node);
    for (bool changed = true; changed;) {
      changed = false;
      for (auto it = discovered.rbegin(); it != discovered.rend(); ++it) {
        NodeState& s = state[*it];
        if (s.needed) continue;
        for (const Edge& e : (*it)->next_edges())
          if (e.valid() && state[e.fn.get()].needed) {
            s.needed = true;
            changed = true;
            break;
          }
      }
    }
  }

  auto add_gradient = [&](const Edge& e, Tensor grad) {
    tensor_list& buffer = state[e.fn.get()].gradients;
    if (buffer.empty()) buffer.resize(e.fn->num_outputs());
    Tensor& slot = buffer[e.input_nr];
    if (!slot.defined()) {
      slot = std::move(grad);
    } else if (!create_graph && sole_owner(slot) && slot.is_contiguous() && slot.sizes() == grad.sizes()) {
      slot.add_(grad);  // the buffer is the engine's own: sum in place, no new tensor
    } else {
      slot = slot + grad;
    }
  };

  GraphTask task;
  CurrentTaskScope task_scope(&task);
  AutoGradMode grad_mode(create_graph);  // record the backward itself only for create_graph
  const bool anomaly = AnomalyMode::is_enabled();
  tensor_list captured(inputs.size());

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
    NodeState& s = state[node];
    tensor_list grads = std::move(s.gradients);
    grads.resize(node->num_outputs());
    if (node->has_tensor_pre_hooks())
      for (size_t i = 0; i < grads.size(); ++i)
        grads[i] = node->run_tensor_pre_hooks(static_cast<uint32_t>(i), std::move(grads[i]));
    const bool is_accumulator = capturing && dynamic_cast<AccumulateGrad*>(node) != nullptr;
    for (const Capture& c : captures) {
      if (c.fn != node) continue;
      Tensor g = grads[c.input_nr];
      if (is_accumulator && g.defined()) g = run_leaf_hooks(*static_cast<AccumulateGrad*>(node)->leaf(), g);
      captured[c.index] = g;
    }
    // grad() never writes leaves' .grad, and skips nodes that lead to no input it wants.
    const bool run = s.needed && !is_accumulator;
    tensor_list grad_inputs;
    bool any = false;
    for (const Tensor& g : grads) any = any || g.defined();
    if (run && any) {
      grad_inputs = node->apply(std::move(grads));
      if (anomaly) check_backward_anomaly(*node, grad_inputs);
    }
    if (run && !retain_graph) node->release_variables();
    const auto& edges = node->next_edges();
    for (size_t i = 0; i < edges.size(); ++i) {
      const Edge& e = edges[i];
      if (!e.valid()) continue;
      if (i < grad_inputs.size() && grad_inputs[i].defined()) add_gradient(e, std::move(grad_inputs[i]));
      NodeState& next = state[e.fn.get()];
      if (--next.pending == 0) ready.push(e.fn.get());
    }
  }

  for (size_t i = 0; i < captured.size(); ++i)
    MG_CHECK(captured[i].defined() || allow_unused,
             "{}: input {} was not used to compute the outputs, so it has no gradient; pass allow_unused=true to "
             "get Tensor() for it",
             op, i);
  // Callbacks run once everything is accumulated, in the order they were queued, and may
  // queue more.
  for (size_t i = 0; i < task.callbacks.size(); ++i) {
    std::function<void()> callback = std::move(task.callbacks[i]);
    callback();
  }
  return captured;
}

}  // namespace

void backward(const tensor_list& roots, const tensor_list& grad_roots, std::optional<bool> retain_graph,
              bool create_graph) {
  run_backward("backward", roots, grad_roots, retain_graph.value_or(create_graph), create_graph, {}, false);
}

tensor_list grad(const tensor_list& outputs, const tensor_list& inputs, const tensor_list& grad_outputs,
                 std::optional<bool> retain_graph, bool create_graph, bool allow_unused) {
  MG_CHECK(!inputs.empty(), "grad: no inputs given: name the tensors whose gradients you want");
  return run_backward("grad", outputs, grad_outputs, retain_graph.value_or(create_graph), create_graph, inputs,
                      allow_unused);
}

void queue_callback(std::function<void()> callback) {
  MG_CHECK(current_task != nullptr,
           "queue_callback: no backward is running on this thread; call it from a hook or a Function's backward");
  current_task->callbacks.push_back(std::move(callback));
}

}  // namespace autograd

void Tensor::backward(const Tensor& gradient, std::optional<bool> retain_graph, bool create_graph) const {
  autograd::backward({*this}, {gradient}, retain_graph, create_graph);
}

}  // namespace minigrad
