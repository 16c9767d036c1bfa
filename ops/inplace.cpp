// In-place updates: Tensor::add_, sub_, mul_, div_, clamp_, relu_, zero_, fill_, masked_fill_,
// copy_.
//
// They write into the tensor's own memory, through its own strides (so they work on views
// and write through to the base), and bump the version counter shared by the storage and
// its views: a tensor saved for backward and changed afterwards is then caught when
// backward reads it (AutogradContext::saved_tensors).
//
// They are not recorded on the tape. While grad mode is on, a tensor that requires grad is
// refused, as self or as the other operand: the tape would otherwise hold a history that no
// longer matches the data. Optimizers update parameters under NoGradGuard, where it is allowed.
#include <cmath>
#include <limits>
#include <optional>
#include <type_traits>

#include <minigrad/autograd/grad_mode.h>
#include <minigrad/core/dispatch.h>
#include <minigrad/core/shape.h>
#include <minigrad/ops/cpu_loops.h>
#include <minigrad/ops/ops.h>
#include <minigrad/cuda/copy.h>

namespace minigrad {
namespace {

// ---- checks: each names the op and the argument ----

// `out_of_place` is the recorded alternative the message suggests, e.g. "add()".
void check_not_recording(const char* op, const char* out_of_place, const char* arg, const Tensor& t) {
  MG_CHECK(!(GradMode::is_enabled() && t.requires_grad()),
           "{}: in-place ops on a tensor that requires grad are not recorded by autograd (argument '{}' "
           "requires grad); use {}, or update under NoGradGuard",
           op, arg, out_of_place);
}

// The tensor being written. An expanded view (stride 0 over a size > 1) maps several
// elements to one memory location, and an in-place write would update it several times.
void check_writable(const char* op, const char* out_of_place, const Tensor& self) {
  check_defined(op, "self", self);
  check_not_recording(op, out_of_place, "self", self);
  for (int64_t d = 0; d < self.dim(); ++d)
    MG_CHECK(self.stride(d) != 0 || self.size(d) <= 1,
             "{}: argument 'self' is an expanded view (stride 0 in dim {}): several of its elements share "
             "memory, so an in-place write is ambiguous; write into a contiguous() copy",
             op, d);
}

// `other` must broadcast to exactly self's shape: self's shape cannot change in place.
void check_broadcasts_to_self(const char* op, const char* arg, const Tensor& other, const Tensor& self) {
  MG_CHECK(broadcasts_to(other.sizes(), self.sizes()), "{}: argument '{}' of shape {} does not broadcast to the shape {} of 'self'", op, arg,
           shape_str(other.sizes()), shape_str(self.sizes()));
}

// A tensor the op reads while writing self, checked, and safe to read: if it shares
// memory with self (x.add_(x.t())), elements would be read after they were overwritten,
// so the op reads a copy instead.
Tensor checked_operand(const char* op, const char* out_of_place, const char* arg, const Tensor& other,
                       const Tensor& self) {
  check_defined(op, arg, other);
  check_not_recording(op, out_of_place, arg, other);
  check_broadcasts_to_self(op, arg, other, self);
  return other.storage() == self.storage() ? copy_as(other, other.dtype(), other.device()) : other;
}

// A double scalar written into (or combined with) an int64 tensor must be a whole number
// in int64's range (core/dtype.h).
void check_scalar_fits(const char* op, const char* arg, double value, const Tensor& self) {
  MG_CHECK(self.dtype() != kInt64 || fits_int64(value), "{}: argument '{}' is {}, which an int64 tensor cannot hold",
           op, arg, value);
}

// True division and clamp have no int64 kernels: an int64 tensor cannot hold 7 / 2 in place.
void check_floating(const char* op, const Tensor& self) {
  MG_CHECK(is_floating(self.dtype()), "{}: argument 'self' has dtype {}; {} needs a floating-point tensor", op,
           self.dtype(), op);
}

// ---- kernels ----

// Calls f(T{}) for the types arithmetic makes sense on: floating types and int64, not bool.
template <typename F>
void dispatch_arithmetic(const char* op, const Tensor& self, F&& f) {
  dispatch_all(self.dtype(), [&](auto tag) {
    if constexpr (std::is_same_v<decltype(tag), bool>)
      MG_CHECK(false, "{}: argument 'self' has dtype bool; {} needs a floating-point or int64 tensor", op, op);
    else
      f(tag);
  });
}

// Calls f(T{}) for self's dtype: the arithmetic types, or with kFloatingOnly the floating
// ones, for the updates that have no int64 kernel (true division, clamp, relu; their callers
// have refused int64 with check_floating, naming the op).
template <bool kFloatingOnly, typename F>
void dispatch_update(const char* op, const Tensor& self, F&& f) {
  if constexpr (kFloatingOnly)
    dispatch_floating(self.dtype(), f);
  else
    dispatch_arithmetic(op, self, f);
}

// self[i] = f(self[i]), on self's device.
template <bool kFloatingOnly = false, typename F>
void update_each(const char* op, const Tensor& self, const F& f) {
  dispatch_update<kFloatingOnly>(op, self, [&](auto tag) {
    using scalar_t = decltype(tag);
    elementwise_map<scalar_t, scalar_t>(op, self, self, f);
  });
}

// self[i] = f(self[i], other[i]) with other broadcast to self's shape. Reading and
// writing self at the same element in one step is safe: each element is read once, first.
template <bool kFloatingOnly = false, typename F>
void update_each_with(const char* op, const Tensor& self, const Tensor& other, const F& f) {
  check_same_device(op, "self", self, "other", other);
  check_same_dtype(op, "self", self, "other", other);
  dispatch_update<kFloatingOnly>(op, self, [&](auto tag) {
    using scalar_t = decltype(tag);
    elementwise_map<scalar_t, scalar_t, scalar_t>(op, self, self, other, f);
  });
}

// self[i] = value, for every dtype. On a GPU, the CUDA backend's fill kernel, which writes
// without reading self first.
void fill_all(const Tensor& self, double value) {
  if (self.device().is_cuda()) return cuda::fill(self, value);
  dispatch_all(self.dtype(), [&](auto tag) {
    using scalar_t = decltype(tag);
    cpu_map<scalar_t, scalar_t>(self, self, elementwise::Fill{value});
  });
}

// self[i] = value where mask[i], for every dtype.
void fill_masked(const Tensor& self, const Tensor& mask, double value) {
  dispatch_all(self.dtype(), [&](auto tag) {
    using scalar_t = decltype(tag);
    elementwise_map<scalar_t, scalar_t, bool>("masked_fill_", self, self, mask, elementwise::MaskedFill{value});
  });
}

}  // namespace

Tensor& Tensor::add_(const Tensor& other, double alpha) {
  check_writable("add_", "add()", *this);
  const Tensor operand = checked_operand("add_", "add()", "other", other, *this);
  check_scalar_fits("add_", "alpha", alpha, *this);
  update_each_with("add_", *this, operand, elementwise::AddScaled{alpha});
  bump_version(*this);
  return *this;
}

Tensor& Tensor::add_(double other) {
  check_writable("add_", "add()", *this);
  check_scalar_fits("add_", "other", other, *this);
  update_each("add_", *this, elementwise::AddScalar{other});
  bump_version(*this);
  return *this;
}

Tensor& Tensor::sub_(const Tensor& other, double alpha) {
  check_writable("sub_", "sub()", *this);
  const Tensor operand = checked_operand("sub_", "sub()", "other", other, *this);
  check_scalar_fits("sub_", "alpha", alpha, *this);
  update_each_with("sub_", *this, operand, elementwise::AddScaled{-alpha});
  bump_version(*this);
  return *this;
}

Tensor& Tensor::sub_(double other) {
  check_writable("sub_", "sub()", *this);
  check_scalar_fits("sub_", "other", other, *this);
  update_each("sub_", *this, elementwise::AddScalar{-other});
  bump_version(*this);
  return *this;
}

Tensor& Tensor::mul_(const Tensor& other) {
  check_writable("mul_", "mul()", *this);
  const Tensor operand = checked_operand("mul_", "mul()", "other", other, *this);
  update_each_with("mul_", *this, operand, elementwise::Mul{});
  bump_version(*this);
  return *this;
}

Tensor& Tensor::mul_(double other) {
  check_writable("mul_", "mul()", *this);
  check_scalar_fits("mul_", "other", other, *this);
  update_each("mul_", *this, elementwise::MulScalar{other});
  bump_version(*this);
  return *this;
}

Tensor& Tensor::div_(const Tensor& other) {
  check_writable("div_", "div()", *this);
  check_floating("div_", *this);
  const Tensor operand = checked_operand("div_", "div()", "other", other, *this);
  update_each_with</*kFloatingOnly=*/true>("div_", *this, operand, elementwise::Div{});
  bump_version(*this);
  return *this;
}

Tensor& Tensor::div_(double other) {
  check_writable("div_", "div()", *this);
  check_floating("div_", *this);
  update_each</*kFloatingOnly=*/true>("div_", *this, elementwise::DivScalar{other});
  bump_version(*this);
  return *this;
}

// A missing bound is no bound: clamp_(std::nullopt, 1.0) only caps at 1. NaN stays NaN, as
// in the out-of-place clamp.
Tensor& Tensor::clamp_(std::optional<double> min, std::optional<double> max) {
  check_writable("clamp_", "clamp()", *this);
  check_floating("clamp_", *this);
  MG_CHECK(min || max, "clamp_: at least one of 'min' and 'max' must be given");
  const double inf = std::numeric_limits<double>::infinity();
  update_each</*kFloatingOnly=*/true>("clamp_", *this,
                                      elementwise::Clamp{min.value_or(-inf), max.value_or(inf)});
  bump_version(*this);
  return *this;
}

Tensor& Tensor::clamp_min_(double min) { return clamp_(min, std::nullopt); }
Tensor& Tensor::clamp_max_(double max) { return clamp_(std::nullopt, max); }

Tensor& Tensor::relu_() {
  check_writable("relu_", "relu()", *this);
  check_floating("relu_", *this);
  update_each</*kFloatingOnly=*/true>("relu_", *this, elementwise::Relu{});
  bump_version(*this);
  return *this;
}

Tensor& Tensor::zero_() {
  check_writable("zero_", "zeros_like()", *this);
  fill_all(*this, 0.0);
  bump_version(*this);
  return *this;
}

Tensor& Tensor::fill_(double value) {
  check_writable("fill_", "full_like()", *this);
  check_scalar_fits("fill_", "value", value, *this);
  fill_all(*this, value);
  bump_version(*this);
  return *this;
}

Tensor& Tensor::masked_fill_(const Tensor& mask, double value) {
  check_writable("masked_fill_", "where()", *this);
  const Tensor checked_mask = checked_operand("masked_fill_", "where()", "mask", mask, *this);
  MG_CHECK(checked_mask.dtype() == kBool, "masked_fill_: expected argument 'mask' to have dtype bool, got {}",
           checked_mask.dtype());
  check_same_device("masked_fill_", "self", *this, "mask", checked_mask);
  check_scalar_fits("masked_fill_", "value", value, *this);
  fill_masked(*this, checked_mask, value);
  bump_version(*this);
  return *this;
}

// Any dtype to any dtype, any device to any device: copy_into does the conversion and the
// transfer, and bumps the version itself (so this does not bump it a second time).
Tensor& Tensor::copy_(const Tensor& src) {
  check_writable("copy_", "clone() or to()", *this);
  const Tensor source = checked_operand("copy_", "clone() or to()", "src", src, *this);
  copy_into(*this, source);
  return *this;
}

}  // namespace minigrad
