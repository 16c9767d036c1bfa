#include <minigrad/autograd/node.h>

#include <mutex>

#include <minigrad/autograd/grad_mode.h>
#include <minigrad/ops/ops.h>

namespace minigrad {
namespace autograd {
namespace {

// Guards what two threads backpropagating into one shared leaf both touch: the leaf's
// .grad and its lazily created accumulator. One lock for all leaves: accumulating is
// short, and a mutex in every TensorImpl would cost 40 bytes per tensor.
std::mutex& leaf_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace

uint64_t next_sequence_nr() {
  thread_local uint64_t counter = 0;
  return counter++;
}

namespace {
// The nodes waiting to be freed by the loop in release_nodes, while it runs on this thread.
thread_local std::vector<std::shared_ptr<Node>>* nodes_to_release = nullptr;
}  // namespace

void release_nodes(std::vector<std::shared_ptr<Node>>&& nodes) {
  if (nodes_to_release) {  // a loop further up this thread's stack frees them
    for (auto& n : nodes) nodes_to_release->push_back(std::move(n));
    return;
  }
  std::vector<std::shared_ptr<Node>> queue = std::move(nodes);
  nodes_to_release = &queue;
  while (!queue.empty()) {
    std::shared_ptr<Node> node = std::move(queue.back());
    queue.pop_back();
    node.reset();  // if this was the last reference, its destructor queues what it held
  }
  nodes_to_release = nullptr;
}

Node::~Node() {
  // The edges go to the loop in release_nodes, not to nested destructor calls.
  std::vector<std::shared_ptr<Node>> held;
  for (Edge& e : next_edges_)
    if (e.fn) held.push_back(std::move(e.fn));
  if (!held.empty()) release_nodes(std::move(held));
}

size_t Node::add_tensor_pre_hook(uint32_t output_nr, GradHook hook) {
  pre_hooks_.push_back(PreHook{output_nr, std::move(hook)});
  return pre_hooks_.size() - 1;
}

void Node::remove_tensor_pre_hook(size_t handle) {
  MG_CHECK(handle < pre_hooks_.size(), "remove_hook: no hook with handle {} on this tensor", handle);
  pre_hooks_[handle].hook = nullptr;
}

void Node::set_retains_grad(uint32_t output_nr, std::weak_ptr<TensorImpl> tensor) {
  for (auto& [nr, weak] : retains_grad_)
    if (nr == output_nr) {
      weak = std::move(tensor);
      return;
    }
  retains_grad_.emplace_back(output_nr, std::move(tensor));
}

bool Node::retains_grad(uint32_t output_nr, const TensorImpl* tensor) const {
  for (const auto& [nr, weak] : retains_grad_)
    if (nr == output_nr && weak.lock().get() == tensor) return true;
  return false;
}

Tensor Node::run_tensor_pre_hooks(uint32_t output_nr, Tensor grad) const {
  if (!grad.defined()) return grad;
  for (const PreHook& h : pre_hooks_) {
    if (h.output_nr != output_nr || !h.hook) continue;
    Tensor replaced = h.hook(grad);
    if (replaced.defined()) grad = std::move(replaced);
  }
  for (const auto& [nr, weak] : retains_grad_) {
    if (nr != output_nr) continue;
    std::shared_ptr<TensorImpl> impl = weak.lock();
    if (!impl) continue;
    // Accumulated across backward calls, as a leaf's .grad is; a copy, so a later in-place
    // update of the engine's buffer cannot reach it. Without history even under
    // create_graph: the graph may hold this very tensor (saved for backward), and a .grad
    // with history would close a reference cycle through it.
    const Tensor fresh = grad.detach();
    impl->grad = impl->grad.defined() ? impl->grad.detach() + fresh : fresh.clone();
  }
  return grad;
}

Tensor run_leaf_hooks(const TensorImpl& leaf, Tensor grad) {
  if (!leaf.leaf_hooks) return grad;
  for (const GradHook& hook : leaf.leaf_hooks->pre) {
    if (!hook) continue;
    Tensor replaced = hook(grad);
    if (replaced.defined()) grad = std::move(replaced);
  }
  return grad;
}

// The accumulator runs at the earliest moment it is ready: its sequence number is the largest.
AccumulateGrad::AccumulateGrad(std::shared_ptr<TensorImpl> leaf)
    : Node(std::numeric_limits<uint64_t>::max()), leaf_(std::move(leaf)) {
  add_output_meta(TensorMeta::of(Tensor(leaf_)));
}

tensor_list AccumulateGrad::apply(tensor_list&& grad_outputs) {
  Tensor grad = run_leaf_hooks(*leaf_, std::move(grad_outputs[0]));
  const bool create_graph = GradMode::is_enabled();  // the engine turns it on for create_graph
  {
    std::lock_guard<std::mutex> lock(leaf_mutex());
    Tensor& stored = leaf_->grad;
    if (!stored.defined()) {
      if (create_graph) {
        // Keeps its history, so the gradient can be differentiated again; a differentiable
        // copy when another tensor shares it (a root gradient, a gradient sent to two leaves).
        stored = sole_owner(grad) ? grad : grad.clone();
      } else {
        // Keep the engine's buffer when nothing else can see its memory; otherwise copy,
        // so that .grad never aliases another tensor (a later zero_() would change it too).
        stored = sole_owner(grad) && grad.is_contiguous() ? grad.detach() : grad.detach().clone();
      }
    } else if (!create_graph && sole_owner(stored) && stored.is_contiguous()) {
      stored.add_(grad);  // nobody else holds this .grad: no new tensor per step
    } else {
      stored = stored + grad;  // out of place: a .grad someone holds stays as it was
    }
  }
  if (leaf_->leaf_hooks) {
    const Tensor leaf(leaf_);
    for (const auto& hook : leaf_->leaf_hooks->post_accumulate)
      if (hook) hook(leaf);
  }
  return {};
}

tensor_list OnceDifferentiableError::apply(tensor_list&&) {
  MG_CHECK(false,
           "{}.backward is once differentiable: its backward is a kernel the tape cannot differentiate, and a "
           "second backward (create_graph=true) reached it",
           function_name_);
  return {};
}

Edge gradient_edge(const Tensor& t) {
  TensorImpl* impl = t.impl();
  if (impl->grad_fn) return Edge{impl->grad_fn, impl->output_nr};
  if (!impl->requires_grad) return Edge{};
  std::lock_guard<std::mutex> lock(leaf_mutex());
  std::shared_ptr<Node> acc = impl->grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t.impl_ptr());
    impl->grad_accumulator = acc;
  }
  return Edge{std::move(acc), 0};
}

}  // namespace autograd
}  // namespace minigrad
