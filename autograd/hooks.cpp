// Tensor hooks: register_hook, retain_grad, post-accumulate-grad hooks, and the checked
// assignment of .grad. A leaf keeps its hooks itself (its accumulator may be recreated);
// a non-leaf's hooks live on its grad_fn, keyed by which output the tensor is, so they
// run even after the tensor itself is gone, as in PyTorch.
#include <minigrad/autograd/grad_mode.h>
#include <minigrad/autograd/node.h>
#include <minigrad/core/shape.h>

namespace minigrad {
namespace autograd {
namespace {

LeafHooks& leaf_hooks_of(const Tensor& t) {
  auto& hooks = t.impl()->leaf_hooks;
  if (!hooks) hooks = std::make_shared<LeafHooks>();
  return *hooks;
}

}  // namespace

size_t register_tensor_hook(const Tensor& t, std::function<Tensor(const Tensor&)> hook) {
  MG_CHECK(t.defined(), "register_hook: undefined tensor");
  MG_CHECK(t.requires_grad(), "register_hook: the tensor does not require grad, so no gradient will reach the hook");
  if (t.grad_fn()) return t.grad_fn()->add_tensor_pre_hook(t.output_nr(), std::move(hook));
  LeafHooks& hooks = leaf_hooks_of(t);
  hooks.pre.push_back(std::move(hook));
  return hooks.pre.size() - 1;
}

}  // namespace autograd

void Tensor::remove_hook(size_t handle) const {
  MG_CHECK(defined(), "remove_hook: undefined tensor");
  if (grad_fn()) {
    grad_fn()->remove_tensor_pre_hook(handle);
    return;
  }
  const auto& hooks = impl_->leaf_hooks;
  MG_CHECK(hooks && handle < hooks->pre.size(), "remove_hook: no hook with handle {} on this tensor", handle);
  hooks->pre[handle] = nullptr;
}

void Tensor::retain_grad() const {
  MG_CHECK(defined(), "retain_grad: undefined tensor");
  MG_CHECK(requires_grad(), "retain_grad: the tensor does not require grad, so it will get no gradient");
  if (is_leaf()) return;  // a leaf keeps its gradient anyway
  grad_fn()->set_retains_grad(output_nr(), impl_);
}

bool Tensor::retains_grad() const {
  MG_CHECK(defined(), "retains_grad: undefined tensor");
  return grad_fn() && grad_fn()->retains_grad(output_nr(), impl());
}

size_t Tensor::register_post_accumulate_grad_hook(std::function<void(const Tensor&)> hook) const {
  MG_CHECK(defined(), "register_post_accumulate_grad_hook: undefined tensor");
  MG_CHECK(is_leaf() && requires_grad(),
           "register_post_accumulate_grad_hook: only a leaf that requires grad accumulates a gradient");
  autograd::LeafHooks& hooks = autograd::leaf_hooks_of(*this);
  hooks.post_accumulate.push_back(std::move(hook));
  return hooks.post_accumulate.size() - 1;
}

Tensor::GradSlot::GradSlot(TensorImpl* owner) : owner_(owner), grad_(&owner->grad) {}

Tensor::GradSlot Tensor::mutable_grad() {
  if (!defined()) detail::throw_undefined_tensor("mutable_grad()");
  return GradSlot(impl_.get());
}

Tensor::GradSlot& Tensor::GradSlot::operator=(const Tensor& g) {
  if (g.defined()) {
    MG_CHECK(!g.requires_grad(),
             "mutable_grad: the gradient assigned has history (it requires grad): the tensor would hold its own "
             "graph through .grad, a reference cycle that is never freed. Assign g.detach(), or compute g under "
             "NoGradGuard.");
    MG_CHECK(g.sizes() == owner_->sizes, "mutable_grad: assigned a gradient of shape {} to a tensor of shape {}",
             shape_str(g.sizes()), shape_str(owner_->sizes));
    MG_CHECK(g.dtype() == owner_->dtype && g.device() == owner_->storage->device(),
             "mutable_grad: assigned a {} gradient on {} to a {} tensor on {}", g.dtype(), g.device(), owner_->dtype,
             owner_->storage->device());
  }
  *grad_ = g;
  return *this;
}

}  // namespace minigrad
