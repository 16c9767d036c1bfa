// Experiment: the flash-attention forward kernel (cuda/flash_attention.cu) at four tile shapes
// (mma tiles of 16 query rows a warp, keys a step), timed side by side in one run in bfloat16,
// each checked against the library's narrow shape (ForwardShape) on the same inputs (O within
// bf16 rounding, the log-sum-exp within 1e-4). Not part of the build: the measurement behind
// ForwardShape and WideForwardShape, and when the library takes which, in docs/perf-notes.md.
// The kernels are the library's own, included from the source; only their template arguments
// differ.
//
// Build (after a CUDA build in build-gpu; about a minute):
//   nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -I build-gpu/include \
//     -I .deps/root/usr/include -DMINIGRAD_WITH_CUDA=1 bench/experiments/flash_forward_shapes.cu \
//     build-gpu/libminigrad.a -L .deps/root/usr/lib/x86_64-linux-gnu -lfmt -lcublas -lcublasLt \
//     -o build-gpu/flash_forward_shapes
// Run: build-gpu/flash_forward_shapes (prints one line per shape and variant); with --profile,
// one forward and backward of the library's kernels only.

#include "flash_attention_source.h"  // the kernels' source, its entry points renamed

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <minigrad/minigrad.h>

#include "event_timing.h"

using namespace minigrad;

namespace {

struct Problem {
  int64_t batch, heads, len, dim;
  bool is_causal;
};

struct Result {
  Tensor out, lse;
  double ms;
};

// One forward at tile shape (kTiles, kKeys) on the problem's inputs.
template <int kD, int kTiles, int kKeys>
Result run_shape(const Tensor& q, const Tensor& k, const Tensor& v, const cuda::AttentionSpec& spec) {
  const TensorOptions on_gpu = TensorOptions(q.dtype()).device(q.device());
  Result r{full(q.sizes(), std::nan(""), on_gpu), full({q.size(0), q.size(1), q.size(2)}, std::nan(""),
                                                         on_gpu.dtype(kFloat32)),
           0.0};
  cuda::Params p = cuda::params_of(q, k, v, spec);
  p.out = static_cast<uint16_t*>(r.out.raw_data());
  p.log_sum_exp = r.lse.data_ptr<float>();
  const int64_t blocks = q.size(0) * q.size(1) * cuda::ceil_div(p.q_len, cuda::kBlockRows * kTiles);
  auto kernel = cuda::attention_forward_kernel<BFloat16, kD, kTiles, kKeys>;
  r.ms = experiments::median_ms([&] {
    cuda::launch(kernel, blocks, cuda::forward_shared_bytes<kD, kTiles, kKeys>(), p, "flash_forward_shapes");
  }, 15);
  return r;
}

template <int kD, int kTiles, int kKeys>
void report(const Problem& pr, const Tensor& q, const Tensor& k, const Tensor& v, const cuda::AttentionSpec& spec,
            const Result& library) {
  const Result r = run_shape<kD, kTiles, kKeys>(q, k, v, spec);
  const double flops = 4.0 * pr.batch * pr.heads * pr.len * pr.len * pr.dim / (pr.is_causal ? 2.0 : 1.0);
  const double out_err = max(abs(r.out.to(kFloat32) - library.out.to(kFloat32))).item<double>();
  const double out_scale = max(abs(library.out.to(kFloat32))).item<double>();
  const double lse_err = max(abs(r.lse - library.lse)).item<double>();
  const bool ok = out_err <= 2e-2 * std::max(1.0, out_scale) && lse_err <= 1e-4;
  const int regs = [&] {
    cudaFuncAttributes a{};
    cudaFuncGetAttributes(&a, cuda::attention_forward_kernel<BFloat16, kD, kTiles, kKeys>);
    return a.numRegs;
  }();
  std::printf("  tiles %d keys %3d: %8.3f ms %6.1f TFLOP/s  (%3d registers, %3d KiB shared)  vs library: O %.2e, L %.2e %s\n",
              kTiles, kKeys, r.ms, flops / r.ms * 1e-9, regs, cuda::forward_shared_bytes<kD, kTiles, kKeys>() / 1024,
              out_err, lse_err, ok ? "ok" : "MISMATCH");
}

template <int kD>
void run_problem(const Problem& pr) {
  const TensorOptions bf16_gpu = TensorOptions(kBFloat16).device(Device::cuda());
  const Shape shape = {pr.batch, pr.heads, pr.len, pr.dim};
  const Tensor q = randn(shape, bf16_gpu), k = randn(shape, bf16_gpu), v = randn(shape, bf16_gpu);
  cuda::AttentionSpec spec;
  spec.scale = 1.0 / std::sqrt(static_cast<double>(pr.dim));
  spec.is_causal = pr.is_causal;
  std::printf("(%lld, %lld, %lld, %lld)%s, bf16, forward:\n", static_cast<long long>(pr.batch),
              static_cast<long long>(pr.heads), static_cast<long long>(pr.len), static_cast<long long>(pr.dim),
              pr.is_causal ? " causal" : "");
  using Library = cuda::ForwardShape<kD>;
  const Result library = run_shape<kD, Library::kTiles, Library::kKeys>(q, k, v, spec);
  report<kD, 1, 64>(pr, q, k, v, spec, library);
  report<kD, 1, 128>(pr, q, k, v, spec, library);
  report<kD, 2, 32>(pr, q, k, v, spec, library);
  report<kD, 2, 64>(pr, q, k, v, spec, library);
}

}  // namespace

// --profile: the library at (4, 16, 4096, 128), one forward and backward, for a profiler
// (ncu -k regex:attention_ -c 4 ... --profile) to capture each of their kernels once.
void profile_once() {
  const TensorOptions bf16_gpu = TensorOptions(kBFloat16).device(Device::cuda());
  const Shape shape = {4, 16, 4096, 128};
  tensor_list leaves = {randn(shape, bf16_gpu).requires_grad_(), randn(shape, bf16_gpu).requires_grad_(),
                        randn(shape, bf16_gpu).requires_grad_()};
  const Tensor grad_out = randn(shape, bf16_gpu);
  scaled_dot_product_attention(leaves[0], leaves[1], leaves[2]).backward(grad_out);
  cuda::synchronize();
}

int main(int argc, char** argv) {
  manual_seed(7);
  if (argc > 1 && std::string(argv[1]) == "--profile") {
    profile_once();
    return 0;
  }
  run_problem<128>({4, 16, 4096, 128, false});
  run_problem<128>({4, 16, 4096, 128, true});
  run_problem<64>({16, 16, 1024, 64, false});
  run_problem<64>({8, 12, 1024, 64, true});
  return 0;
}
