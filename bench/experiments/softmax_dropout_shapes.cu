// Experiment: softmax_dropout's forward (cuda/softmax_dropout.cu) with at most 16 elements a
// thread in its register kernels and with 32 (the library's kForwardElementsPerThread for
// 16-bit types), timed side by side in one run in bfloat16 on the benchmark's scores,
// (4, 16, 1024, 1024) with p = 0.1: plain, causal, and with a (4, 1, 1, 1024) bool padding
// mask. Both outputs are checked against each other. Not part of the build: the measurement
// behind kForwardElementsPerThread's choice in docs/perf-notes.md. The kernels are the
// library's own, included from the source; only the elements a thread holds differ.
//
// What 32 a thread changes for rows of 1024: a warp holds a row (32 lanes of 32 elements)
// where 64 threads of 16 did, so the row's fixed costs (its start and mask offset, the two
// combines, now shuffles only, no shared memory) are paid over twice the elements, and each
// thread has four 16-byte loads in flight instead of two. What it costs: 3 blocks of 256
// threads an SM at up to 85 registers (24 warps) instead of 4 at 64 (32 warps).
//
// Build (after a CUDA build in build-gpu; about a minute), or through scripts/gpu-check with
// EXPERIMENTS=softmax_dropout_shapes:
//   nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -I build-gpu/include \
//     -I .deps/root/usr/include -DMINIGRAD_WITH_CUDA=1 bench/experiments/softmax_dropout_shapes.cu \
//     build-gpu/libminigrad.a -L .deps/root/usr/lib/x86_64-linux-gnu -lfmt -lcublas -lcublasLt \
//     -o build-gpu/softmax_dropout_shapes

// The included file defines the library's entry points, which libminigrad.a defines too.
#define softmax_dropout_rows experiment_softmax_dropout_rows
#define softmax_dropout_backward_rows experiment_softmax_dropout_backward_rows
#include "../../cuda/softmax_dropout.cu"
#undef softmax_dropout_rows
#undef softmax_dropout_backward_rows

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include <minigrad/minigrad.h>

#include "event_timing.h"

using namespace minigrad;

namespace {

bool all_ok = true;  // 32 a thread agreed with 16 everywhere (the exit status)

struct Result {
  Tensor y, lse;
  double ms = 0;
};

template <int kMaxElements>
Result run(const Tensor& x, const cuda::SoftmaxDropoutRows& rows) {
  Result r{full(x.sizes(), std::nan(""), x.options()), full({x.numel() / x.size(-1)}, std::nan(""),
                                                            x.options().dtype(kFloat32))};
  r.ms = experiments::median_ms([&] { cuda::forward_rows<kMaxElements>(x, rows, r.y, r.lse); }, 25);
  return r;
}

void compare(const char* what, const Tensor& x, const cuda::SoftmaxDropoutRows& rows, double bytes) {
  const Result narrow = run<16>(x, rows);
  const Result wide = run<32>(x, rows);
  // The row's sums combine in another order (a warp instead of two): y within a bf16 rounding.
  const double y_err = max(abs(wide.y.to(kFloat32) - narrow.y.to(kFloat32))).item<double>();
  const double lse_err = max(abs(wide.lse - narrow.lse)).item<double>();
  const bool ok = y_err <= 2e-2 && lse_err <= 1e-4;
  all_ok = all_ok && ok;
  std::printf("  %-13s 16 a thread %8.4f ms (%5.0f GB/s)   32 a thread %8.4f ms (%5.0f GB/s)   "
              "32 vs 16: y %.1e, L %.1e %s\n",
              what, narrow.ms, bytes / narrow.ms * 1e-6, wide.ms, bytes / wide.ms * 1e-6, y_err, lse_err,
              ok ? "ok" : "MISMATCH");
}

}  // namespace

int main() {
  manual_seed(7);
  const TensorOptions bf16_gpu = TensorOptions(kBFloat16).device(Device::cuda());
  const Shape shape = {4, 16, 1024, 1024};
  const Tensor x = randn(shape, bf16_gpu);
  const double bytes = 2.0 * x.numel() * 2;  // read x, write y (GB/s counts these, causal too)
  std::printf("softmax_dropout forward, (4, 16, 1024, 1024) bf16, p = 0.1:\n");

  cuda::SoftmaxDropoutRows rows;
  rows.sizes = shape;
  rows.index_strides = contiguous_strides(shape);
  rows.scale = 0.125;
  rows.drop = true;
  rows.dropout = dropout_bits::Mask{1234, 0, dropout_bits::threshold_of(0.1)};
  compare("plain", x, rows, bytes);

  cuda::SoftmaxDropoutRows causal = rows;
  causal.is_causal = true;
  compare("causal", x, causal, bytes);

  // A padding mask: batch b keeps its first 1024 - 128 b keys.
  cuda::SoftmaxDropoutRows padded = rows;
  const Tensor keys = arange(1024).reshape({1, 1, 1, 1024});
  const Tensor lengths = from_vector<int64_t>({1024, 896, 768, 640}, {4, 1, 1, 1});
  padded.mask = (keys < lengths).to(Device::cuda());
  padded.mask_strides = {1024, 0, 0, 1};
  compare("padding mask", x, padded, bytes);
  return all_ok ? 0 : 1;
}
