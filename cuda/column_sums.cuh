#pragma once
// The second step of a deterministic sum over the rows of a tensor, column by column: a first
// kernel, of the op's own, writes each block's (or each chunk of rows') sums of its columns as
// one row of [blocks, n] partials in compute_t<T>; sum_column_partials then adds the rows of
// partials up in a fixed order. No atomics anywhere, so the result has the same bits on every
// run. Used by the normalizations' dweight and dbias (cuda/normalization.cu) and by
// linear_gelu's bias gradient (cuda/gelu_bias_backward.cu).
#include <cuda_runtime.h>

#include <cstdint>

#include <minigrad/cuda/block_reduce.cuh>  // kWarpSize
#include <minigrad/cuda/convert.cuh>
#include <minigrad/kernels/elementwise_functors.h>  // compute_t: the half types in float, the others as themselves

namespace minigrad {
namespace cuda {

// Where the column sums of each set of partials go: set s (blockIdx.y) into out[s], none where
// null. The normalizations sum two sets, dweight's and dbias's, in one launch.
template <typename T>
struct ColumnSumOutputs {
  T* out[2];
};

// Sums the [blocks, n] partials over the blocks: column c of a 32-column tile is summed by
// threadIdx.y = 0..kSplit-1, each over the blocks y, y + kSplit, ... in order, and the
// kSplit sums are added in order of y. The same order on every run. Set s of partials starts
// s * blocks * n elements after the first.
constexpr int kPartialSplit = 16;

template <typename T>
__global__ void sum_partials_kernel(const compute_t<T>* __restrict__ partials, int64_t blocks, int64_t n,
                                    ColumnSumOutputs<T> outputs) {
  using acc_t = compute_t<T>;
  __shared__ acc_t sums[kPartialSplit][kWarpSize + 1];
  T* const out = outputs.out[blockIdx.y];
  if (out == nullptr) return;  // the whole block, before its barrier
  partials += static_cast<int64_t>(blockIdx.y) * blocks * n;
  const int64_t column = static_cast<int64_t>(blockIdx.x) * kWarpSize + threadIdx.x;
  acc_t sum = 0;
  if (column < n) {
#pragma unroll 4
    for (int64_t b = threadIdx.y; b < blocks; b += kPartialSplit) sum += partials[b * n + column];
  }
  sums[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y != 0 || column >= n) return;
  acc_t total = 0;
#pragma unroll
  for (int y = 0; y < kPartialSplit; ++y) total += sums[y][threadIdx.x];
  out[column] = convert_element<T>(total);
}

// For each set s of `sets` (1 or 2) sets of [chunks, n] partials, laid out one after the other
// from `partials`: outputs.out[s][c] = the sum of the set's partials[b * n + c] over b =
// 0..chunks-1, for each of the n columns, rounded to T once (none where out[s] is null). One
// launch on `stream`; the caller checks it (MG_CUDA_CHECK_LAUNCH).
template <typename T>
void sum_column_partials(const compute_t<T>* partials, int64_t chunks, int64_t n, ColumnSumOutputs<T> outputs,
                         int sets, cudaStream_t stream) {
  if (n == 0) return;  // a launch of no blocks is an error
  const dim3 block(kWarpSize, kPartialSplit);
  const dim3 grid(static_cast<unsigned int>((n + kWarpSize - 1) / kWarpSize), static_cast<unsigned int>(sets));
  sum_partials_kernel<T><<<grid, block, 0, stream>>>(partials, chunks, n, outputs);
}

// One set: out[c] = the sum of partials[b * n + c] over b = 0..chunks-1.
template <typename T>
void sum_column_partials(const compute_t<T>* partials, int64_t chunks, int64_t n, T* out, cudaStream_t stream) {
  sum_column_partials(partials, chunks, n, ColumnSumOutputs<T>{{out, nullptr}}, 1, stream);
}

}  // namespace cuda
}  // namespace minigrad
