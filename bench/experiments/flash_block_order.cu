// Experiment: the order of the flash-attention kernels' blocks (block_order in
// cuda/flash_attention.cu). Under is_causal each kernel's blocks weigh more or less by the
// rank of their tile; the library numbers them heaviest first within groups of heads. Here
// each kernel (forward, grad_kv, grad_q) runs with groups of 1 head (the blocks head by head,
// the order before block_order) and with several group sizes up to all heads, timed side by
// side in one run in bfloat16. The outputs must be the same bits in every order: a block's
// work does not depend on when it runs. Not part of the build: the measurement behind
// kHeadGroupBytes in docs/perf-notes.md.
//
// Build (after a CUDA build in build-gpu; about a minute):
//   nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -I build-gpu/include \
//     -I .deps/root/usr/include -DMINIGRAD_WITH_CUDA=1 bench/experiments/flash_block_order.cu \
//     build-gpu/libminigrad.a -L .deps/root/usr/lib/x86_64-linux-gnu -lfmt -lcublas -lcublasLt \
//     -o build-gpu/flash_block_order
// Run: build-gpu/flash_block_order (a line per shape, kernel and group size).

#include "flash_attention_source.h"  // the kernels' source, its entry points renamed

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include <minigrad/minigrad.h>

#include "event_timing.h"

using namespace minigrad;

namespace {

bool all_ok = true;

struct Problem {
  int64_t batch, heads, len, dim;
};

// Every element the same (bfloat16 and float32 hold exactly in double; no NaN is expected).
bool same_bits(const Tensor& a, const Tensor& b) { return a.to_vector<double>() == b.to_vector<double>(); }

template <int kD>
void run_problem(const Problem& pr) {
  using T = BFloat16;
  const TensorOptions bf16_gpu = TensorOptions(kBFloat16).device(Device::cuda());
  const Shape shape = {pr.batch, pr.heads, pr.len, pr.dim};
  const Tensor q = randn(shape, bf16_gpu), k = randn(shape, bf16_gpu), v = randn(shape, bf16_gpu);
  const Tensor grad = randn(shape, bf16_gpu);
  cuda::AttentionSpec spec;
  spec.scale = 1.0 / std::sqrt(static_cast<double>(pr.dim));
  spec.is_causal = true;
  const Tensor out = empty(shape, bf16_gpu), lse = empty({pr.batch, pr.heads, pr.len}, bf16_gpu.dtype(kFloat32));
  const Tensor delta = empty(lse.sizes(), lse.options());
  const Tensor dq = empty(shape, bf16_gpu), dk = empty(shape, bf16_gpu), dv = empty(shape, bf16_gpu);

  cuda::Params p = cuda::params_of(q, k, v, spec);
  p.out = static_cast<uint16_t*>(out.raw_data());
  cuda::set_backward_operands(p, grad, out, lse, delta, dq, dk, dv);
  const int library_groups[2] = {p.query_heads_per_group, p.kv_heads_per_group};

  using Fwd = cuda::ForwardShape<kD>;
  constexpr int kKeyWarps = cuda::GradKvShape<kD>::kWarps;
  constexpr int kFwdRows = cuda::kBlockRows * Fwd::kTiles;
  const int64_t heads = pr.batch * pr.heads;
  const int64_t forward_blocks = heads * cuda::ceil_div(p.q_len, kFwdRows);
  const int64_t query_blocks = heads * cuda::ceil_div(p.q_len, cuda::kBlockRows);
  const int64_t key_blocks = heads * cuda::ceil_div(p.k_len, kKeyWarps * cuda::kWarpRows);
  const char* op = "flash_block_order";
  auto forward = [&] {
    cuda::launch(cuda::attention_forward_kernel<T, kD>, forward_blocks,
                 cuda::forward_shared_bytes<kD, Fwd::kTiles, Fwd::kKeys>(), p, op);
  };
  auto grad_kv = [&] {
    cuda::launch(cuda::attention_grad_kv_kernel<T, kD, kKeyWarps>, key_blocks,
                 cuda::grad_kv_shared_bytes<kD, kKeyWarps * cuda::kWarpRows>(), p, op, kKeyWarps * 32);
  };
  auto grad_q = [&] {
    cuda::launch(cuda::attention_grad_q_kernel<T, kD>, query_blocks, cuda::grad_q_shared_bytes<kD>(), p, op);
  };
  // Reference outputs in the head-by-head order.
  p.query_heads_per_group = p.kv_heads_per_group = 1;
  forward();
  cuda::launch(cuda::attention_delta_kernel<T>, (heads * p.q_len + cuda::kWarps - 1) / cuda::kWarps, 0, p, op);
  grad_kv();
  grad_q();
  const Tensor out0 = out.clone(), lse0 = lse.clone(), dq0 = dq.clone(), dk0 = dk.clone(), dv0 = dv.clone();

  std::printf("(%lld, %lld, %lld, %lld) causal, bf16; the library's groups: %d query heads, %d kv heads\n",
              static_cast<long long>(pr.batch), static_cast<long long>(pr.heads), static_cast<long long>(pr.len),
              static_cast<long long>(pr.dim), library_groups[0], library_groups[1]);
  std::vector<int> sizes = {1, 2, 4, 8, 16, 32, 64, static_cast<int>(heads)};
  for (int g : library_groups) sizes.push_back(g);
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  for (int g : sizes) {
    if (g > heads) continue;
    p.query_heads_per_group = p.kv_heads_per_group = g;
    const double f = experiments::median_ms(forward, 15);
    const double kv = experiments::median_ms(grad_kv, 15);
    const double gq = experiments::median_ms(grad_q, 15);
    const bool ok = same_bits(out, out0) && same_bits(lse, lse0) && same_bits(dq, dq0) && same_bits(dk, dk0) &&
                    same_bits(dv, dv0);
    all_ok = all_ok && ok;
    std::printf("  %3d heads a group: forward %7.4f  grad_kv %7.4f  grad_q %7.4f  sum %7.4f ms%s  %s\n", g, f, kv, gq,
                f + kv + gq, g == library_groups[0] || g == library_groups[1] ? " (library)" : "",
                ok ? "same bits" : "DIFFERENT BITS");
  }
}

}  // namespace

int main() {
  manual_seed(7);
  run_problem<64>({8, 12, 1024, 64});
  run_problem<128>({4, 16, 4096, 128});
  run_problem<64>({16, 16, 1024, 64});
  run_problem<128>({4, 16, 1024, 128});
  run_problem<64>({4, 16, 2048, 64});
  return all_ok ? 0 : 1;
}
