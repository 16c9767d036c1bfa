#include "autograd/node.h"

#include "autograd/grad_mode.h"
#include "ops/ops.h"

namespace minigrad {
namespace autograd {

uint64_t next_sequence_nr() {
  thread_local uint64_t counter = 0;
  return counter++;
}

Node::~Node() {
  // Take over the edges of every node that is about to die with us, so each destructor
  // runs with no edges left: the chain is freed by this loop, not by recursion.
  std::vector<std::shared_ptr<Node>> dying;
  for (Edge& e : next_edges_)
    if (e.fn) dying.push_back(std::move(e.fn));
  while (!dying.empty()) {
    std::shared_ptr<Node> node = std::move(dying.back());
    dying.pop_back();
    if (node.use_count() == 1) {
      for (Edge& e : node->next_edges_)
        if (e.fn) dying.push_back(std::move(e.fn));
    }
  }
}

// The accumulator runs at the earliest moment it is ready: its sequence number is the largest.
AccumulateGrad::AccumulateGrad(std::shared_ptr<TensorImpl> leaf)
    : Node(std::numeric_limits<uint64_t>::max()), leaf_(std::move(leaf)) {
  add_output_meta(TensorMeta::of(Tensor(leaf_)));
}

tensor_list AccumulateGrad::apply(tensor_list&& grad_outputs) {
  Tensor& grad = grad_outputs[0];
  Tensor& stored = leaf_->grad;
  if (!stored.defined()) {
    // Keep the engine's buffer when nothing else can see its memory; otherwise copy, so
    // that .grad never aliases another tensor (a later zero_() would change that one too).
    const bool sole_owner = grad.impl_ptr().use_count() == 1 && grad.storage().use_count() == 1;
    stored = sole_owner && grad.is_contiguous() ? grad.detach() : grad.clone();
  } else {
    stored = stored + grad;  // out of place: a retained earlier .grad stays as it was
  }
  return {};
}

Edge gradient_edge(const Tensor& t) {
  TensorImpl* impl = t.impl();
  if (impl->grad_fn) return Edge{impl->grad_fn, impl->output_nr};
  if (!impl->requires_grad) return Edge{};
  std::shared_ptr<Node> acc = impl->grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t.impl_ptr());
    impl->grad_accumulator = acc;
  }
  return Edge{std::move(acc), 0};
}

}  // namespace autograd
}  // namespace minigrad
