// rand and randn on the GPU: one thread an element, each computing its value from
// (seed, offset, index) alone (kernels/random.h), so the launch shape does not change the
// numbers. Each element computes its whole Philox block (ten rounds of two 32-bit
// multiplies), recomputed by the neighbours that share it, as in the CPU loop: the GPU has
// the arithmetic to spare, and the code stays the formula.
#include <algorithm>

#include <minigrad/core/dispatch.h>
#include <minigrad/cuda/random.h>
#include <minigrad/cuda/runtime.h>
#include <minigrad/kernels/random.h>

namespace minigrad {
namespace cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = int64_t{1} << 20;  // a grid-stride loop beyond that

template <typename T, bool kNormal>
__global__ void __launch_bounds__(kThreads) random_kernel(T* out, int64_t n, uint64_t seed, uint64_t offset) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * kThreads) {
    const uint64_t index = static_cast<uint64_t>(i);
    const double value = kNormal ? random_values::normal<T>(seed, offset, index)
                                 : random_values::uniform<T>(seed, offset, index);
    out[i] = random_values::to_element<T>(value);
  }
}

template <bool kNormal>
void fill_random(const char* op, const Tensor& out, uint64_t seed, uint64_t offset) {
  MG_CHECK(out.is_contiguous(), "{}: the output must be contiguous", op);
  const int64_t n = out.numel();
  if (n == 0) return;
  DeviceGuard guard(out.device().index);
  const cudaStream_t stream = current_stream();
  const auto blocks = static_cast<unsigned int>(std::min((n + kThreads - 1) / kThreads, kMaxBlocks));
  dispatch_floating(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    random_kernel<T, kNormal><<<blocks, kThreads, 0, stream>>>(static_cast<T*>(out.raw_data()), n, seed, offset);
    MG_CUDA_CHECK_LAUNCH(op);
  });
}

}  // namespace

void fill_uniform(const Tensor& out, uint64_t seed, uint64_t offset) { fill_random<false>("rand", out, seed, offset); }
void fill_normal(const Tensor& out, uint64_t seed, uint64_t offset) { fill_random<true>("randn", out, seed, offset); }

}  // namespace cuda
}  // namespace minigrad
