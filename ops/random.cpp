// rand and randn, drawn on the tensor's device: the CPU loop here, or the CUDA kernel
// (cuda/random.cu), both computing element i from the op's Philox stream with the formulas
// of kernels/random.h, so a seeded program draws the same numbers on either device. Each
// call reserves one stream of the default generator (core/generator.h), after the checks:
// a call that fails draws nothing.
#include <minigrad/core/dispatch.h>
#include <minigrad/core/generator.h>
#include <minigrad/core/shape.h>
#include <minigrad/core/tensor.h>
#include <minigrad/cuda/random.h>
#include <minigrad/kernels/random.h>

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

}  // namespace minigrad
