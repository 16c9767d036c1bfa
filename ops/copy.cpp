// Copies and conversions: to(dtype), to(device), clone(), contiguous(). All are one
// Function, CopyAs, whose forward is copy_as and whose backward converts the gradient back
// to the input's dtype and device. Converting to what a tensor already is returns the
// tensor itself, no copy, as in PyTorch.
#include <cstdint>

#include "autograd/function.h"
#include "ops/cpu_loops.h"
#include "ops/ops.h"

namespace minigrad {
namespace {

struct CopyAs : Function<CopyAs> {
  static Tensor forward(Context& ctx, const Tensor& x, DType dtype, Device device) {
    ctx.saved_data["input_dtype"] = static_cast<int64_t>(x.dtype());
    ctx.saved_data["input_device_type"] = static_cast<int64_t>(x.device().type);
    ctx.saved_data["input_device_index"] = static_cast<int64_t>(x.device().index);
    return copy_as(x, dtype, device);
  }
  static tensor_list backward(Context& ctx, tensor_list grads) {
    const DType dtype = static_cast<DType>(ctx.saved_data["input_dtype"].toInt());
    const Device device(static_cast<DeviceType>(ctx.saved_data["input_device_type"].toInt()),
                        static_cast<int>(ctx.saved_data["input_device_index"].toInt()));
    const Tensor& grad = grads[0];
    // clone() and contiguous() copy without converting: their gradient passes through.
    const bool converted = grad.dtype() != dtype || grad.device() != device;
    return {converted ? copy_as(grad, dtype, device) : grad, Tensor(), Tensor()};
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
