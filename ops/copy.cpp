// Copies and conversions: to(dtype), to(device), clone(), contiguous(). All are one
// Function, CopyAs, whose forward is copy_as and whose backward converts the gradient back
// to the input's dtype and device with CopyAs again (so it is twice differentiable).
// Converting to what a tensor already is returns the tensor itself, no copy, as in PyTorch.
#include <cstdint>

#include <minigrad/autograd/function.h>
#include <minigrad/ops/cpu_loops.h>
#include <minigrad/ops/ops.h>

namespace minigrad {
namespace {

struct CopyAs : Function<CopyAs> {
  struct State {
    DType input_dtype = kFloat32;
    Device input_device;
  };
  static Tensor forward(Context& ctx, const Tensor& x, DType dtype, Device device) {
    ctx.state<State>() = {x.dtype(), x.device()};
    return copy_as(x, dtype, device);
  }
  static tensor_list backward(Context& ctx, tensor_list grads) {
    const auto& s = ctx.state<State>();
    const Tensor& grad = grads[0];
    // clone() and contiguous() copy without converting: their gradient passes through.
    // A conversion's gradient converts back through CopyAs again, so that a backward with
    // create_graph records it (and the double backward converts forward once more).
    const bool converted = grad.dtype() != s.input_dtype || grad.device() != s.input_device;
    return {converted ? CopyAs::apply(grad, s.input_dtype, s.input_device) : grad, Tensor(), Tensor()};
  }
};

}  // namespace

// A conversion to an integer or bool dtype is recorded too; the tape gives such outputs no
// gradient (autograd/function.cpp), as PyTorch does.
Tensor to_dtype(const Tensor& x, DType dtype) {
  check_defined("to", "self", x);
  if (x.dtype() == dtype) return x;
  return CopyAs::apply(x, dtype, x.device());
}

Tensor to_device(const Tensor& x, Device device) {
  check_defined("to", "self", x);
  if (x.device() == device) return x;
  return CopyAs::apply(x, x.dtype(), device);
}

Tensor Tensor::to(DType dtype) const { return to_dtype(*this, dtype); }

Tensor Tensor::to(Device device) const { return to_device(*this, device); }

Tensor Tensor::clone() const {
  check_defined("clone", "self", *this);
  return CopyAs::apply(*this, dtype(), device());
}

Tensor Tensor::contiguous() const {
  check_defined("contiguous", "self", *this);
  if (is_contiguous()) return *this;
  return CopyAs::apply(*this, dtype(), device());
}

}  // namespace minigrad
