// Experiment: where linear_gelu's forward + backward spends its time over the bare GEMMs, at
// bench_gpu's shape ([8192, 4096] -> 16384, bf16, GELU's tanh form). Each step of the
// op's full pass (ops/linear.cpp) is timed alone, side by side in one run with the bare GEMM
// it stands for, and the two full passes through the tape are timed too, so that the steps'
// sums can be held against them:
//
//   forward    GEMM x W^T                      | GEMM + GELU_AUX_BIAS (writes y and pre)
//   gelu'      -                               | d_pre = dy * gelu'(pre), one elementwise pass
//   dx         GEMM dy W                       | GEMM d_pre W
//   dW (, db)  GEMM dy^T x                     | GEMM d_pre^T x + BGRADA (db in the epilogue)
//
// Not part of the build: the measurement behind docs/perf-notes.md's account of linear_gelu's
// full pass. Build (after a CUDA build in build-gpu), or through scripts/gpu-check with
// EXPERIMENTS=linear_gelu_steps:
//   nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -I build-gpu/include \
//     -I .deps/root/usr/include -DMINIGRAD_WITH_CUDA=1 bench/experiments/linear_gelu_steps.cu \
//     build-gpu/libminigrad.a -L .deps/root/usr/lib/x86_64-linux-gnu -lfmt -lcublas -lcublasLt \
//     -o build-gpu/linear_gelu_steps
#include <cstdio>
#include <functional>

#include <minigrad/cuda/blaslt.h>
#include <minigrad/minigrad.h>

#include "event_timing.h"

using namespace minigrad;
using cuda::GemmEpilogue;

namespace {

constexpr int kRuns = 15;

double time_ms(const std::function<void()>& f) { return experiments::median_ms(f, kRuns); }

}  // namespace

int main() {
  manual_seed(7);
  const TensorOptions bf16_gpu = TensorOptions(kBFloat16).device(Device::cuda());
  const int64_t m = 8192, k = 4096, n = 16384;
  const Tensor x = randn({m, k}, bf16_gpu), w = randn({n, k}, bf16_gpu) * (1.0 / 64.0), b = randn({n}, bf16_gpu);
  const Tensor dy = randn({m, n}, bf16_gpu);
  const double tflop = 2.0 * m * k * n * 1e-12;
  const auto tanh = GeluApproximation::Tanh;

  // The op's intermediate tensors, made once by the steps themselves (and checked to be fused).
  const Tensor y = empty({m, n}, bf16_gpu), pre = empty({m, n}, bf16_gpu);
  const Tensor dw = empty({n, k}, bf16_gpu), db = empty({n}, bf16_gpu);
  const int64_t fallbacks_before = cuda::gemm_with_epilogue_fallbacks();
  bool fused = cuda::gemm_with_epilogue(x, w.t(), y, GemmEpilogue::GeluBias, b, pre);
  const Tensor d_pre = gelu_backward(dy, pre, tanh);
  fused = fused && cuda::gemm_with_epilogue(d_pre.t(), x, dw, GemmEpilogue::BiasGradOfA, db);
  if (!fused || cuda::gemm_with_epilogue_fallbacks() != fallbacks_before) {
    std::printf("linear_gelu_steps: an epilogue fell back; nothing to compare\n");
    return 1;
  }

  struct Step {
    const char* name;
    double bare_ms, fused_ms;
  };
  const Step steps[] = {
      {"forward", time_ms([&] { (void)matmul(x, w.t()); }),
       time_ms([&] { cuda::gemm_with_epilogue(x, w.t(), y, GemmEpilogue::GeluBias, b, pre); })},
      {"forward, no aux", time_ms([&] { (void)matmul(x, w.t()); }),
       time_ms([&] { cuda::gemm_with_epilogue(x, w.t(), y, GemmEpilogue::GeluBias, b); })},
      {"gelu'", 0.0, time_ms([&] { (void)gelu_backward(dy, pre, tanh); })},
      {"dx", time_ms([&] { (void)matmul(dy, w); }), time_ms([&] { (void)matmul(d_pre, w); })},
      {"dW (and db)", time_ms([&] { (void)matmul(dy.t(), x); }),
       time_ms([&] { cuda::gemm_with_epilogue(d_pre.t(), x, dw, GemmEpilogue::BiasGradOfA, db); })},
      {"dW of d_pre, no db", 0.0, time_ms([&] { (void)matmul(d_pre.t(), x); })},
  };

  // The two full passes through the tape, as bench_gpu times them.
  auto full_pass = [&](bool gelu_layer) {
    tensor_list leaves = {x.detach().requires_grad_(), w.detach().requires_grad_(), b.detach().requires_grad_()};
    return time_ms([&] {
      for (Tensor& leaf : leaves) leaf.mutable_grad() = Tensor();
      const Tensor out = gelu_layer ? linear_gelu(leaves[0], leaves[1], leaves[2], tanh) : linear(leaves[0], leaves[1]);
      out.backward(dy);
    });
  };
  const double bare_full = full_pass(false), gelu_full = full_pass(true);

  std::printf("linear_gelu [%lld, %lld] -> %lld bf16 (tanh), each step alone, median of %d, ms:\n",
              static_cast<long long>(m), static_cast<long long>(k), static_cast<long long>(n), kRuns);
  std::printf("  %-20s %10s %10s %8s\n", "step", "bare GEMM", "the op's", "ratio");
  for (const Step& s : steps) {
    if (s.bare_ms > 0)
      std::printf("  %-20s %10.4f %10.4f %8.3f   (%.0f / %.0f TFLOP/s)\n", s.name, s.bare_ms, s.fused_ms,
                  s.fused_ms / s.bare_ms, tflop / s.bare_ms * 1e3, tflop / s.fused_ms * 1e3);
    else
      std::printf("  %-20s %10s %10.4f\n", s.name, "-", s.fused_ms);
  }
  const double bare_sum = steps[0].bare_ms + steps[3].bare_ms + steps[4].bare_ms;
  const double op_sum = steps[0].fused_ms + steps[2].fused_ms + steps[3].fused_ms + steps[4].fused_ms;
  std::printf("  steps summed:        %10.4f %10.4f %8.3f\n", bare_sum, op_sum, op_sum / bare_sum);
  std::printf("  full pass, the tape: %10.4f %10.4f %8.3f   (linear_no_bias / linear_gelu)\n", bare_full, gelu_full,
              gelu_full / bare_full);
  return 0;
}
