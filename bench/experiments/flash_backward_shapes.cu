// Experiment: the flash-attention backward (cuda/flash_attention.cu) in its two forms, timed
// side by side in one run in bfloat16: two passes (grad_kv, then grad_q) with grad_kv blocks of
// 4 warps (64 keys, the library's GradKvShape) and of 8 warps (128 keys), and the one pass
// (grad_kvq, dQ by atomic adds). Each is checked against the two passes of the library's shape
// on the same inputs. Not part of the build: the measurement behind GradKvShape's choice and the
// default form in docs/perf-notes.md. The kernels are the library's own, included from the source.
//
// What 128-key blocks change: a step's Q and dO tiles (and the queries' L and D) are copied
// once for 8 warps instead of 4. What they cost: one block an SM (8 warps) where two 4-warp
// blocks fit, so a barrier stalls every warp of the SM, and causal blocks compute more
// masked-out tiles. (This experiment also timed FlashAttention-2's atomic dQ, for which larger
// blocks halve the adds; the library dropped it when the separate grad_q pass beat it.)
//
// Build (after a CUDA build in build-gpu; about two minutes):
//   nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -I build-gpu/include \
//     -I .deps/root/usr/include -DMINIGRAD_WITH_CUDA=1 bench/experiments/flash_backward_shapes.cu \
//     build-gpu/libminigrad.a -L .deps/root/usr/lib/x86_64-linux-gnu -lfmt -lcublas -lcublasLt \
//     -o build-gpu/flash_backward_shapes
// Run: build-gpu/flash_backward_shapes (one line per shape and block size).

#include "flash_attention_source.h"  // the kernels' source, its entry points renamed

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include <minigrad/minigrad.h>

#include "event_timing.h"

using namespace minigrad;

namespace {

bool all_ok = true;  // every variant agreed with the library (the exit status)

struct Problem {
  int64_t batch, heads, len, dim;
  bool is_causal;
};

struct Inputs {
  Tensor q, k, v, grad, out, lse;
  cuda::AttentionSpec spec;
};

struct Grads {
  Tensor q, k, v;
  double ms = 0;
};

// One backward on the inputs: in one pass, or in two with grad_kv blocks of kKeyWarps warps
// (0: the library's).
template <int kKeyWarps>
Grads run_backward(const Inputs& in, bool one_pass = false) {
  const TensorOptions like = TensorOptions(in.q.dtype()).device(in.q.device());
  Grads g{full(in.q.sizes(), std::nan(""), like), full(in.k.sizes(), std::nan(""), like),
          full(in.v.sizes(), std::nan(""), like)};
  g.ms = experiments::median_ms([&] {
    cuda::backward_with_shape<kKeyWarps>(in.grad, in.q, in.k, in.v, in.out, in.lse, in.spec, g.q, g.k, g.v, one_pass);
  }, 15);
  return g;
}

double max_error(const Tensor& got, const Tensor& want) {
  return max(abs(got.to(kFloat32) - want.to(kFloat32))).item<double>();
}
double max_magnitude(const Tensor& t) { return max(abs(t.to(kFloat32))).item<double>(); }

template <int kD, int kKeyWarps, bool kOnePass = false>
void report(const Problem& pr, const Inputs& in, const Grads& reference) {
  const Grads g = run_backward<kKeyWarps>(in, kOnePass);
  // TFLOP/s of the backward alone: 2.5 times the forward's 4 B H S^2 D, halved when causal.
  const double flops =
      2.5 * 4.0 * pr.batch * pr.heads * pr.len * pr.len * pr.dim / (pr.is_causal ? 2.0 : 1.0);
  bool ok = true;
  double worst = 0;
  for (auto [got, want] : {std::pair{g.q, reference.q}, std::pair{g.k, reference.k}, std::pair{g.v, reference.v}}) {
    const double relative = max_error(got, want) / std::max(1.0, max_magnitude(want));
    worst = std::max(worst, relative);
    ok = ok && relative <= 2e-2;  // bf16 rounding of sums in another order
  }
  all_ok = all_ok && ok;
  const int regs = [&] {
    cudaFuncAttributes a{};
    if constexpr (kOnePass)
      cudaFuncGetAttributes(&a, cuda::attention_grad_kvq_kernel<BFloat16, kD>);
    else
      cudaFuncGetAttributes(&a, cuda::attention_grad_kv_kernel<BFloat16, kD, kKeyWarps>);
    return a.numRegs;
  }();
  if (kOnePass)
    std::printf("  one pass, dQ atomic     : %8.3f ms %6.1f TFLOP/s  (grad_kvq %3d registers) vs two passes: %.2e %s\n",
                g.ms, flops / g.ms * 1e-9, regs, worst, ok ? "ok" : "MISMATCH");
  else
    std::printf("  grad_kv %d warps (%3d keys): %8.3f ms %6.1f TFLOP/s  (grad_kv %3d registers)  vs library: %.2e %s\n",
                kKeyWarps, kKeyWarps * 16, g.ms, flops / g.ms * 1e-9, regs, worst, ok ? "ok" : "MISMATCH");
}

template <int kD>
void run_problem(const Problem& pr) {
  const TensorOptions bf16_gpu = TensorOptions(kBFloat16).device(Device::cuda());
  const Shape shape = {pr.batch, pr.heads, pr.len, pr.dim};
  Inputs in;
  in.q = randn(shape, bf16_gpu);
  in.k = randn(shape, bf16_gpu);
  in.v = randn(shape, bf16_gpu);
  in.grad = randn(shape, bf16_gpu);
  in.spec.scale = 1.0 / std::sqrt(static_cast<double>(pr.dim));
  in.spec.is_causal = pr.is_causal;
  in.out = empty(shape, bf16_gpu);
  in.lse = empty({pr.batch, pr.heads, pr.len}, bf16_gpu.dtype(kFloat32));
  cuda::experiment_flash_attention_forward(in.q, in.k, in.v, in.spec, in.out, in.lse);
  std::printf("(%lld, %lld, %lld, %lld)%s, bf16, backward:\n", static_cast<long long>(pr.batch),
              static_cast<long long>(pr.heads), static_cast<long long>(pr.len), static_cast<long long>(pr.dim),
              pr.is_causal ? " causal" : "");
  const Grads reference = run_backward<0>(in);
  report<kD, 4>(pr, in, reference);
  report<kD, 8>(pr, in, reference);
  report<kD, 4, true>(pr, in, reference);
}

}  // namespace

int main() {
  manual_seed(7);
  run_problem<128>({4, 16, 4096, 128, false});
  run_problem<128>({4, 16, 4096, 128, true});
  run_problem<64>({16, 16, 1024, 64, false});
  run_problem<64>({8, 12, 1024, 64, true});
  run_problem<128>({4, 16, 1024, 128, false});
  return all_ok ? 0 : 1;
}
