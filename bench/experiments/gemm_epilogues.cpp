// Experiment: what each cuBLASLt epilogue costs against the plain cuBLAS GEMM it replaces and
// the separate op it saves, GEMM by GEMM, at bench_gpu's mlp shape ([8192, 768] -> 3072 -> 768)
// and linear_gelu shape ([8192, 4096] -> 16384), bf16. Each line is one GEMM of the layer's
// forward or backward: the bare GEMM (matmul), the GEMM with its epilogue (gemm_with_epilogue),
// and the GEMM followed by the ops the epilogue stands for. Not part of the build:
// docs/perf-notes.md's table of the epilogues came from it. On the GPU machine, after a CUDA
// build in build-gpu:
//
//   g++ -std=c++17 -O2 -Ibuild-gpu/include -I.deps/root/usr/include -I/usr/local/cuda/include \
//     bench/experiments/gemm_epilogues.cpp build-gpu/libminigrad.a -L.deps/root/usr/lib/x86_64-linux-gnu \
//     -lfmt -L/usr/local/cuda/lib64 -lcublasLt -lcublas -lcudart -lpthread -o build-gpu/gemm_epilogues
//
// Times are the median of 20 runs between CUDA events on the current stream, after 3 warm-up
// runs (which fill the caching allocator and cuBLASLt's plan cache).
#include <algorithm>
#include <functional>
#include <vector>

#include <cuda_runtime.h>
#include <fmt/core.h>
#include <minigrad/cuda/blaslt.h>
#include <minigrad/cuda/runtime.h>
#include <minigrad/minigrad.h>

#include "event_timing.h"

using namespace minigrad;
using cuda::GemmEpilogue;

namespace {

double median_ms(const std::function<void()>& run) { return experiments::median_ms(run, 20); }

void line(const char* gemm, double bare, double epilogue, double separate) {
  fmt::print("{:<44} {:>8.4f} {:>10.4f} {:>10.4f} {:>8.3f} {:>8.3f}\n", gemm, bare, epilogue, separate, epilogue / bare,
             separate / bare);
}

// A GEMM with no epilogue to compare: its bare time alone.
void bare_line(const char* gemm, double bare) { fmt::print("{:<44} {:>8.4f} {:>10} {:>10}\n", gemm, bare, "-", "-"); }

// One layer: x [rows, in], w1 [hidden, in], w2 [out, hidden] (out = 0: linear_gelu, one GEMM).
void layer(int64_t rows, int64_t in, int64_t hidden, int64_t out) {
  const TensorOptions bf16 = TensorOptions(kBFloat16).device(Device::cuda());
  const Tensor x = randn({rows, in}, bf16), w1 = randn({hidden, in}, bf16) * 0.03, b1 = randn({hidden}, bf16);
  const Tensor pre = empty({rows, hidden}, bf16), h = empty({rows, hidden}, bf16);
  fmt::print("\n[{}, {}] -> {}{}\n", rows, in, hidden, out ? fmt::format(" -> {}", out) : "");
  fmt::print("{:<44} {:>8} {:>10} {:>10} {:>8} {:>8}\n", "GEMM (ms)", "bare", "epilogue", "separate", "epi/bare",
             "sep/bare");
  auto fused_ok = [](bool ok) {
    if (!ok) fmt::print("  (cuBLASLt fell back)\n");
  };
  NoGradGuard no_grad;
  // Forward: x w1^T with bias + GELU.
  line(
      "fwd x w1^T, GELU_AUX_BIAS", median_ms([&] { (void)matmul(x, w1.t()); }),
      median_ms([&] { fused_ok(cuda::gemm_with_epilogue(x, w1.t(), h, GemmEpilogue::GeluBias, b1, pre)); }),
      median_ms([&] { (void)gelu(matmul(x, w1.t()) + b1, GeluApproximation::Tanh); }));
  line("fwd x w1^T, BIAS", median_ms([&] { (void)matmul(x, w1.t()); }),
       median_ms([&] { fused_ok(cuda::gemm_with_epilogue(x, w1.t(), pre, GemmEpilogue::Bias, b1)); }),
       median_ms([&] { (void)(matmul(x, w1.t()) + b1); }));
  // Backward of the first layer: d_pre = dh * gelu'(pre) (the dh of mlp comes from a GEMM).
  const Tensor dh = randn({rows, hidden}, bf16);
  const Tensor dw1 = empty({hidden, in}, bf16), db1 = empty({hidden}, bf16);
  line("bwd dW1 = d^T x, BGRADB", median_ms([&] { (void)matmul(dh.t(), x); }),
       median_ms([&] { fused_ok(cuda::gemm_with_epilogue(dh.t(), x, dw1, GemmEpilogue::BiasGradOfA, db1)); }),
       median_ms([&] { (void)matmul(dh.t(), x), (void)sum(dh, {0}); }));
  bare_line("bwd dx = d w1", median_ms([&] { (void)matmul(dh, w1); }));
  if (out == 0) return;
  const Tensor w2 = randn({out, hidden}, bf16) * 0.02, b2 = randn({out}, bf16);
  const Tensor y = empty({rows, out}, bf16), g = randn({rows, out}, bf16);
  line("fwd h w2^T, BIAS", median_ms([&] { (void)matmul(h, w2.t()); }),
       median_ms([&] { fused_ok(cuda::gemm_with_epilogue(h, w2.t(), y, GemmEpilogue::Bias, b2)); }),
       median_ms([&] { (void)(matmul(h, w2.t()) + b2); }));
  const Tensor dw2 = empty({out, hidden}, bf16), db2 = empty({out}, bf16);
  line("bwd dW2 = g^T h, BGRADB", median_ms([&] { (void)matmul(g.t(), h); }),
       median_ms([&] { fused_ok(cuda::gemm_with_epilogue(g.t(), h, dw2, GemmEpilogue::BiasGradOfA, db2)); }),
       median_ms([&] { (void)matmul(g.t(), h), (void)sum(g, {0}); }));
  const Tensor d_pre = empty({rows, hidden}, bf16);
  line("bwd d_pre = (g w2) gelu'(pre), DGELU_BGRAD", median_ms([&] { (void)matmul(g, w2); }),
       median_ms([&] { fused_ok(cuda::gemm_with_epilogue(g, w2, d_pre, GemmEpilogue::DGeluBiasGrad, db1, pre)); }),
       median_ms([&] {
         const Tensor d = gelu_backward(matmul(g, w2), pre, GeluApproximation::Tanh);
         (void)sum(d, {0});
       }));
  line("bwd d_pre = (g w2) gelu'(pre), DGELU", median_ms([&] { (void)matmul(g, w2); }),
       median_ms([&] { fused_ok(cuda::gemm_with_epilogue(g, w2, d_pre, GemmEpilogue::DGelu, Tensor(), pre)); }),
       median_ms([&] { (void)gelu_backward(matmul(g, w2), pre, GeluApproximation::Tanh); }));
}

}  // namespace

int main() {
  manual_seed(5);
  layer(8192, 768, 3072, 768);
  layer(8192, 4096, 16384, 0);
  cuda::synchronize();
  return 0;
}
