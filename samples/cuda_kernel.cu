// Lesson: writing your own CUDA kernel and making it a differentiable op.
//
// The tutorial's "CUDA Kernel Structure" writes a kernel that multiplies by two, wraps
// it in a function taking torch::Tensor, and registers that with PyTorch through pybind11.
// minigrad has no Python, so the three layers are all in this file, and each is what the
// library's own ops do (cuda/ holds their kernels, ops/ their Functions):
//
//   1. the kernel        takes raw pointers, a size, and nothing else it does not need;
//   2. the launcher      turns tensors into those (checks, a contiguous copy if needed,
//                        the output from the caching allocator, the grid, the current
//                        stream) and checks the launch;
//   3. the Function      TimesTwo : Function<TimesTwo> picks the CPU reference or the
//                        kernel by device, and gives autograd its backward.
//
// Then it checks itself: the CUDA result against the CPU reference, and gradcheck
// (float64, finite differences) on both devices. On a machine without a GPU the CPU half
// runs and the program says the CUDA half was skipped (exit 0).
//
//   cuda_kernel
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include <fmt/core.h>

#include <minigrad/cuda/runtime.h>
#include <minigrad/minigrad.h>

using namespace minigrad;

namespace {

// ---- 1. the kernel ----
// The tutorial's kernel with two changes, both about size:
//   - the index is int64: `int idx` overflows past 2^31 elements (4 GiB of floats fits on
//     one GPU today), and the bug shows up only on the big tensors nobody tests;
//   - a grid-stride loop: each thread handles elements idx, idx + stride, ... so a grid of
//     any size covers any n, and the launcher can cap the grid instead of trusting that
//     n / 256 blocks fits in gridDim.x.
template <typename T>
__global__ void times_two_kernel(const T* __restrict__ input, T* __restrict__ output, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    output[i] = input[i] * T(2);
}

// ---- 2. the launcher: tensors in, pointers and sizes to the kernel ----
Tensor times_two_cuda(const Tensor& x) {
  // The kernel indexes memory linearly, so it needs a contiguous input. A transposed or
  // sliced view is copied once here (contiguous() returns x itself when it already is).
  const Tensor input = x.contiguous();
  // Run on the tensor's GPU, whatever device is current (cuda:1 works like cuda:0).
  cuda::DeviceGuard device_guard(input.device().index);
  Tensor output = empty_like(input);  // from the caching allocator: no cudaMalloc per call
  const int64_t n = input.numel();
  // A launch with zero blocks is an error ("invalid configuration"), not a no-op.
  if (n == 0) return output;
  // 256 threads a block: a multiple of the 32-thread warp, and enough blocks per SM to hide
  // memory latency. The grid is capped at 65536 blocks x 256 threads = 16 M threads, which
  // fills the 132 SMs of an H200 many times over; larger tensors take more loop turns.
  constexpr int threads = 256;
  const int64_t blocks = std::min<int64_t>((n + threads - 1) / threads, 65536);
  // Every kernel runs on the current stream, so it is ordered after the ops that made its
  // input and before those that use its output, without the host waiting for anything.
  const cudaStream_t stream = cuda::current_stream();
  if (input.dtype() == kFloat64) {
    times_two_kernel<double><<<static_cast<unsigned>(blocks), threads, 0, stream>>>(
        input.data_ptr<double>(), output.data_ptr<double>(), n);
  } else {
    times_two_kernel<float><<<static_cast<unsigned>(blocks), threads, 0, stream>>>(
        input.data_ptr<float>(), output.data_ptr<float>(), n);
  }
  // A bad launch (too many threads, no kernel image for this GPU) is reported here, naming
  // the op; without the check it would surface later, at some unrelated synchronization.
  MG_CUDA_CHECK_LAUNCH("times_two");
  return output;
}

// The CPU reference: the same arithmetic, written to be read, and the truth the CUDA
// kernel is compared with.
Tensor times_two_cpu(const Tensor& x) {
  const Tensor input = x.contiguous();
  Tensor output = empty_like(input);
  const int64_t n = input.numel();
  if (input.dtype() == kFloat64) {
    const double* in = input.data_ptr<double>();
    double* out = output.data_ptr<double>();
    for (int64_t i = 0; i < n; ++i) out[i] = in[i] * 2.0;
  } else {
    const float* in = input.data_ptr<float>();
    float* out = output.data_ptr<float>();
    for (int64_t i = 0; i < n; ++i) out[i] = in[i] * 2.0f;
  }
  return output;
}

Tensor times_two_impl(const Tensor& x) {
  MG_CHECK(x.defined(), "times_two: argument 'input' is an undefined tensor");
  MG_CHECK(x.dtype() == kFloat32 || x.dtype() == kFloat64,
           "times_two: argument 'input' has dtype {}; this kernel handles float32 and float64", x.dtype());
  return x.device().is_cuda() ? times_two_cuda(x) : times_two_cpu(x);
}

// ---- 3. the Function: the op autograd can differentiate ----
// d(2x)/dx = 2, whatever x is, so backward needs nothing from forward: no
// save_for_backward, and the gradient is the same kernel applied to the incoming gradient.
struct TimesTwo : Function<TimesTwo> {
  static Tensor forward(Context& /*ctx*/, const Tensor& x) { return times_two_impl(x); }
  static tensor_list backward(Context& /*ctx*/, tensor_list grad_outputs) {
    return {times_two_impl(grad_outputs[0])};
  }
};

// Multiplying by two is exact in floating point, so the devices must agree bit for bit.
bool same_values(const Tensor& a, const Tensor& b) { return a.to_vector<double>() == b.to_vector<double>(); }

bool report(const char* what, bool ok) {
  fmt::print("  {:<68} {}\n", what, ok ? "ok" : "FAILED");
  return ok;
}

}  // namespace

int main() {
  bool ok = true;
  manual_seed(0);
  auto times_two = [](const tensor_list& in) { return TimesTwo::apply(in[0]); };

  fmt::print("TimesTwo on the CPU (the reference):\n");
  const Tensor x = randn({4, 5}, kFloat64);
  ok &= report("forward equals x * 2", same_values(TimesTwo::apply(x), x * 2.0));
  Tensor leaf = x.detach().requires_grad_();
  TimesTwo::apply(leaf).sum().backward();
  ok &= report("backward of sum(times_two(x)) is 2 everywhere", same_values(leaf.grad(), full({4, 5}, 2.0, kFloat64)));
  const GradcheckReport cpu_check = gradcheck(times_two, {x.detach().requires_grad_()});
  ok &= report("gradcheck, float64", cpu_check.passed);

  if (!cuda_is_available()) {
    fmt::print("No GPU here (or this build has no CUDA backend): the CUDA half of the lesson was skipped.\n");
    return ok ? 0 : 1;
  }

  fmt::print("TimesTwo on {} (the kernel above):\n", Device::cuda(0));
  const Tensor xc = x.cuda();
  ok &= report("forward on the GPU equals the CPU reference", same_values(TimesTwo::apply(xc).cpu(), x * 2.0));
  // Sizes the launcher must get right: one element, an odd size that leaves a partial
  // block, and a size just past the capped grid (65536 blocks x 256 threads), so the
  // grid-stride loop takes a second turn for some threads.
  for (int64_t n : {int64_t{1}, int64_t{1000003}, int64_t{65536} * 256 + 4097}) {
    const Tensor big = randn({n});
    ok &= report(fmt::format("float32, {} elements: GPU equals CPU", n).c_str(),
                 same_values(TimesTwo::apply(big.cuda()).cpu(), times_two_cpu(big)));
  }
  const Tensor empty_input = empty({0, 3}, TensorOptions(kFloat32).device(Device::cuda(0)));
  ok &= report("an empty tensor launches nothing and returns an empty tensor",
               TimesTwo::apply(empty_input).numel() == 0);
  // A transposed view: not contiguous, so the launcher copies it before the kernel runs.
  const Tensor transposed = randn({64, 48}).cuda().t();
  ok &= report("a transposed (non-contiguous) input", same_values(TimesTwo::apply(transposed).cpu(),
                                                                  transposed.cpu() * 2.0));
  const GradcheckReport gpu_check = gradcheck(times_two, {xc.detach().requires_grad_()});
  ok &= report("gradcheck, float64, inputs and gradients on the GPU", gpu_check.passed);
  try {
    TimesTwo::apply(arange(4).cuda());
    ok &= report("an int64 input is refused", false);
  } catch (const Error& e) {
    ok &= report("an int64 input is refused with an error naming the op and argument",
                 std::string(e.what()).find("times_two: argument 'input'") != std::string::npos);
  }
  fmt::print("  {}\n", gpu_check.summary());

  fmt::print(
      "What this teaches: a kernel sees pointers and a size; the launcher owns everything about\n"
      "tensors (dtype, contiguity, device, the output's memory, the stream) and checks the launch;\n"
      "the Function joins the tape, and here its backward is the same kernel, since d(2x)/dx = 2.\n");
  fmt::print(ok ? "all checks passed\n" : "SOME CHECKS FAILED\n");
  return ok ? 0 : 1;
}
