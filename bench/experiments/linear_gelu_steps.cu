// Experiment: where linear_gelu's forward + backward spends its time over the bare GEMMs, at
// bench_gpu's shape ([8192, 4096] -> 16384, bf16, GELU's tanh form). Each step of the
// op's full pass (ops/linear.cpp) is timed alone, its runs taking turns with those of the bare
// GEMM it stands for (and of the same GEMM on the op's data, which tells the data's part from
// the epilogue's), and the two full passes through the tape are timed too, so that the steps'
// sums can be held against them:
//
//   forward    GEMM x W^T                      | GEMM + GELU_AUX_BIAS (writes y and pre)
//   gelu', db  -                               | d_pre = dy * gelu'(pre) and db = d_pre's column
//                                              | sums, one pass (cuda/gelu_bias_backward.h)
//   dx         GEMM dy W                       | GEMM d_pre W
//   dW         GEMM dy^T x                     | GEMM d_pre^T x
//
// Also timed, for the choice between them: gelu' alone (the elementwise gelu_backward) and dW's
// GEMM with db in cuBLASLt's BGRADA epilogue, the op's path before the one-pass kernel.
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
#include <minigrad/cuda/gelu_bias_backward.h>
#include <minigrad/minigrad.h>

#include "event_timing.h"

using namespace minigrad;
using cuda::GemmEpilogue;

namespace {

constexpr int kRuns = 15;

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
  const Tensor d_pre = empty({m, n}, bf16_gpu);
  fused = fused && cuda::gelu_backward_and_bias_grad(dy, pre, tanh, d_pre, db);
  fused = fused && cuda::gemm_with_epilogue(d_pre.t(), x, dw, GemmEpilogue::BiasGradOfA, db);
  if (!fused || cuda::gemm_with_epilogue_fallbacks() != fallbacks_before) {
    std::printf("linear_gelu_steps: an epilogue or the one-pass kernel fell back; nothing to compare\n");
    return 1;
  }

  // Each line's functions take turns (interleaved_median_ms): the GEMMs' clocks drift by 5% and
  // more over seconds, and timed one after the other two equal GEMMs differed by that much.
  struct Line {
    const char* name;
    std::vector<const char*> labels;
    std::vector<std::function<void()>> fs;
  };
  const std::vector<Line> lines = {
      {"forward",
       {"x W^T", "+ GELU_AUX_BIAS", "+ GELU_BIAS (no aux)"},
       {[&] { (void)matmul(x, w.t()); },
        [&] { cuda::gemm_with_epilogue(x, w.t(), y, GemmEpilogue::GeluBias, b, pre); },
        [&] { cuda::gemm_with_epilogue(x, w.t(), y, GemmEpilogue::GeluBias, b); }}},
      {"gelu'",
       {"dy * gelu'(pre)", "+ db in the same pass"},
       {[&] { (void)gelu_backward(dy, pre, tanh); },
        [&] { cuda::gelu_backward_and_bias_grad(dy, pre, tanh, d_pre, db); }}},
      {"dx", {"dy W", "d_pre W"}, {[&] { (void)matmul(dy, w); }, [&] { (void)matmul(d_pre, w); }}},
      {"dW",
       {"dy^T x", "d_pre^T x", "d_pre^T x + BGRADA"},
       {[&] { (void)matmul(dy.t(), x); }, [&] { (void)matmul(d_pre.t(), x); },
        [&] { cuda::gemm_with_epilogue(d_pre.t(), x, dw, GemmEpilogue::BiasGradOfA, db); }}},
  };

  // The two full passes through the tape, as bench_gpu times them.
  tensor_list leaves = {x.detach().requires_grad_(), w.detach().requires_grad_(), b.detach().requires_grad_()};
  auto full_pass = [&](bool gelu_layer) {
    return [&, gelu_layer] {
      for (Tensor& leaf : leaves) leaf.mutable_grad() = Tensor();
      const Tensor out = gelu_layer ? linear_gelu(leaves[0], leaves[1], leaves[2], tanh) : linear(leaves[0], leaves[1]);
      out.backward(dy);
    };
  };

  std::printf("linear_gelu [%lld, %lld] -> %lld bf16 (tanh), each line's runs taking turns, median of %d, ms "
              "(TFLOP/s):\n",
              static_cast<long long>(m), static_cast<long long>(k), static_cast<long long>(n), kRuns);
  std::vector<std::vector<double>> medians;
  for (const Line& line : lines) {
    medians.push_back(experiments::interleaved_median_ms(line.fs, kRuns));
    std::printf("  %-8s", line.name);
    for (size_t i = 0; i < line.fs.size(); ++i) {
      const double ms = medians.back()[i];
      std::printf("  %s %.4f (%.0f)", line.labels[i], ms, tflop / ms * 1e3);
      if (i > 0) std::printf(" %.3fx", ms / medians.back()[0]);
    }
    std::printf("\n");
  }
  const double bare_sum = medians[0][0] + medians[2][0] + medians[3][0];
  // linear_gelu's steps: the forward writing aux, gelu' with db, dx and dW on d_pre.
  const double op_sum = medians[0][1] + medians[1][1] + medians[2][1] + medians[3][1];
  std::printf("  steps summed: the bare GEMMs %.4f, linear_gelu's %.4f: %.3fx\n", bare_sum, op_sum, op_sum / bare_sum);
  const std::vector<double> full = experiments::interleaved_median_ms({full_pass(false), full_pass(true)}, kRuns);
  std::printf("  full pass through the tape: linear_no_bias %.4f, linear_gelu %.4f: %.3fx\n", full[0], full[1],
              full[1] / full[0]);
  return 0;
}
