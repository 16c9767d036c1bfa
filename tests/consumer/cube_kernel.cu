// A user's own CUDA kernel as a minigrad op: the kernel, its launcher (tensors in, pointers
// out, the current stream, a launch check), and a Function whose backward is another
// launch of a kernel. samples/cuda_kernel.cu is the same pattern, explained step by step.
#include <cstdint>

#include <minigrad/cuda/runtime.h>
#include <minigrad/minigrad.h>

using namespace minigrad;

namespace {

// out = scale * x^power for power 3 (forward) or 2 (backward's 3 x^2), float64 only: this
// is a check of the build, not a fast kernel.
__global__ void scaled_power_kernel(const double* x, const double* grad, double* out, int power, double scale,
                                    int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    double value = scale;
    for (int k = 0; k < power; ++k) value *= x[i];
    out[i] = grad ? value * grad[i] : value;
  }
}

Tensor scaled_power(const Tensor& x, const Tensor& grad, int power, double scale) {
  MG_CHECK(x.device().is_cuda() && x.dtype() == kFloat64, "cube_with_kernel: expected a float64 CUDA tensor");
  const Tensor input = x.contiguous();
  const Tensor grad_in = grad.defined() ? grad.contiguous() : Tensor();
  cuda::DeviceGuard guard(input.device().index);
  Tensor out = empty_like(input);
  const int64_t n = input.numel();
  if (n == 0) return out;
  const int threads = 256;
  const auto blocks = static_cast<unsigned>((n + threads - 1) / threads < 4096 ? (n + threads - 1) / threads : 4096);
  scaled_power_kernel<<<blocks, threads, 0, cuda::current_stream()>>>(
      input.data_ptr<double>(), grad_in.defined() ? grad_in.data_ptr<double>() : nullptr, out.data_ptr<double>(),
      power, scale, n);
  MG_CUDA_CHECK_LAUNCH("cube_with_kernel");
  return out;
}

struct CubeKernel : Function<CubeKernel> {
  static Tensor forward(Context& ctx, const Tensor& x) {
    ctx.save_for_backward({x});
    return scaled_power(x, Tensor(), 3, 1.0);
  }
  static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
    return {scaled_power(ctx.saved_tensors()[0], grad_outputs[0], 2, 3.0)};
  }
};

}  // namespace

Tensor cube_with_kernel(const Tensor& x) { return CubeKernel::apply(x); }
