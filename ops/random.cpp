// rand and randn (and their *_like forms), drawn on the tensor's device: the CPU loop here,
// or the CUDA kernel (cuda/random.cu), both computing element i from the op's Philox stream
// with the formulas of kernels/random.h, so a seeded program draws the same numbers on
// either device. Each call reserves one stream of the default generator (core/generator.h),
// after the checks: a call that fails draws nothing. randint scales rand's float64 values.
#include <minigrad/core/dispatch.h>
#include <minigrad/core/generator.h>
#include <minigrad/core/shape.h>
#include <minigrad/core/tensor.h>
#include <minigrad/cuda/random.h>
#include <minigrad/kernels/random.h>
#include <minigrad/ops/ops.h>

namespace minigrad {
namespace {

enum class Distribution { Uniform, Normal };

Tensor draw(const char* op, Distribution distribution, const Shape& sizes, const TensorOptions& options) {
  MG_CHECK(is_floating(options.dtype_), "{}: needs a floating-point dtype, got {}", op, options.dtype_);
  // The size checks name the op, before empty() would name itself.
  (void)checked_nbytes(checked_numel(sizes, op), element_size(options.dtype_), op);
  Tensor out = empty(sizes, TensorOptions(options.dtype_).device(options.device_));
  const Generator::Stream stream = default_generator().reserve();
  if (out.device().is_cuda()) {
    if (distribution == Distribution::Uniform)
      cuda::fill_uniform(out, stream.seed, stream.offset);
    else
      cuda::fill_normal(out, stream.seed, stream.offset);
    if (options.requires_grad_) out.requires_grad_(true);
    return out;
  }
  MG_CHECK(out.device().is_cpu(), "{}: no random kernel for device {}", op, out.device());
  dispatch_floating(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* p = static_cast<T*>(out.raw_data());
    const int64_t n = out.numel();
    for (int64_t i = 0; i < n; ++i) {
      const uint64_t index = static_cast<uint64_t>(i);
      const double value = distribution == Distribution::Uniform
                               ? random_values::uniform<T>(stream.seed, stream.offset, index)
                               : random_values::normal<T>(stream.seed, stream.offset, index);
      p[i] = random_values::to_element<T>(value);
    }
  });
  if (options.requires_grad_) out.requires_grad_(true);
  return out;
}

}  // namespace

Tensor rand(const Shape& sizes, TensorOptions options) { return draw("rand", Distribution::Uniform, sizes, options); }
Tensor randn(const Shape& sizes, TensorOptions options) { return draw("randn", Distribution::Normal, sizes, options); }

// randint is rand in float64 scaled to the range: floor(u * (high - low)) + low. u < 1
// keeps u * r below r after rounding too: for the largest u, 1 - 2^-53, u * r = r - r * 2^-53
// is exact when r is a power of two and otherwise more than half an ulp of r below r, so it
// rounds down; smaller u round no higher. Every value lies in [low, high).
// The truncation to int64 is the floor for these non-negative products, and both devices
// do the same float64 multiply and conversion, so they give the same integers. u is k / 2^53
// for 53 random bits k, so each integer of a range r gets floor(2^53 / r) or one more of the
// k: even to one part in 2^53 / r. Ranges past 2^53 would leave integers out; they are
// refused, and so are bounds a double does not hold exactly.
Tensor randint(int64_t low, int64_t high, const Shape& sizes, TensorOptions options) {
  constexpr int64_t kExact = int64_t(1) << 53;  // integers a double holds exactly
  MG_CHECK(low < high, "randint: expects low < high, got low = {} and high = {}", low, high);
  MG_CHECK(low >= -kExact && high <= kExact && high - low <= kExact,
           "randint: low = {} and high = {} must lie within +-2^53, and high - low be at most 2^53", low, high);
  const DType dtype = options.dtype_or(kInt64);
  MG_CHECK(dtype == kInt64 || is_floating(dtype), "randint: needs an int64 or floating-point dtype, got {}", dtype);
  (void)checked_nbytes(checked_numel(sizes, "randint"), element_size(kFloat64), "randint");
  Tensor u = rand(sizes, TensorOptions(kFloat64).device(options.device_));
  u.mul_(static_cast<double>(high - low));
  Tensor out = u.to(kInt64);
  out.add_(static_cast<double>(low));
  if (dtype != kInt64) out = out.to(dtype);
  if (options.requires_grad_) out.requires_grad_(true);
  return out;
}

Tensor randint(int64_t high, const Shape& sizes, TensorOptions options) { return randint(0, high, sizes, options); }

Tensor rand_like(const Tensor& t) {
  MG_CHECK(t.defined(), "rand_like: argument 'self' is an undefined tensor");
  return draw("rand_like", Distribution::Uniform, t.sizes(), t.options());
}

Tensor randn_like(const Tensor& t) {
  MG_CHECK(t.defined(), "randn_like: argument 'self' is an undefined tensor");
  return draw("randn_like", Distribution::Normal, t.sizes(), t.options());
}

}  // namespace minigrad
