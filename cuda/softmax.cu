// softmax and log_softmax along the last dim of contiguous rows, forward and backward.
//
// Each row is reduced (forward: its maximum and the sum of exp(x - max); backward:
// sum(grad * y) or sum(grad)) and then written, elementwise. Two kernels per direction:
//  - rows of up to 8192 elements are held in registers (cuda/row_kernels.cuh says how):
//    each input is read once and the output written once, the least traffic there is.
//    256 threads x 32 floats (or doubles) stay within any register budget.
//  - longer rows: a block of 512 threads per row, two passes. The first folds each element
//    into a running (max, sum) pair, rescaling the sum whenever the maximum grows ("online"
//    softmax), so one read gives both statistics; the second reads the row again (from L2
//    when it is still there) and writes.
// Loads and stores are 16-byte vectors where the row length and the pointers allow.
// float16/bfloat16 compute in float, float32 in float (expf and logf, full precision),
// float64 in double. The formulas are the CPU kernel's (ops/softmax.cpp), NaN and
// infinities included: fmax ignores a NaN in the maximum, exp(NaN - max) then makes the
// row's sum, and the row, NaN.
#include <cmath>
#include <initializer_list>
#include <limits>
#include <type_traits>

#include <minigrad/core/dispatch.h>
#include <minigrad/cuda/block_reduce.cuh>
#include <minigrad/cuda/convert.cuh>
#include <minigrad/cuda/row_kernels.cuh>
#include <minigrad/cuda/runtime.h>
#include <minigrad/cuda/softmax.h>
#include <minigrad/cuda/vector.cuh>
#include <minigrad/kernels/elementwise_functors.h>  // compute_t: the half types in float, the others as themselves

namespace minigrad {
namespace cuda {
namespace {

// ---- forward ----

// A row in registers, held by a warp (kWarpPerRow: kWarpsPerBlock rows per block) or by the
// whole block. Thread t holds the row's vectors t, t + threads_per_row, ...
// (kVectorsPerThread of them), so each load instruction of a warp reads neighbouring vectors.
template <typename T, int kVec, int kVectorsPerThread, bool kWarpPerRow>
__global__ void softmax_rows_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t n,
                                    bool take_log) {
  using acc_t = compute_t<T>;
  using Vector = AlignedVector<T, kVec>;
  __shared__ acc_t max_partials[kWarpSize];
  __shared__ acc_t sum_partials[kWarpSize];
  const RowThread<kWarpPerRow> me;
  const int64_t row = me.row;
  const int thread = me.thread;
  const int threads_per_row = me.threads_per_row;
  if (row >= rows) return;  // a whole warp (the block holds whole rows): the combines see all threads
  const Vector* in = reinterpret_cast<const Vector*>(x + row * n);
  Vector* out = reinterpret_cast<Vector*>(y + row * n);
  const int64_t vectors = n / kVec;

  acc_t v[kVectorsPerThread][kVec];
  acc_t row_max = -INFINITY;
#pragma unroll
  for (int j = 0; j < kVectorsPerThread; ++j) {
    const int64_t k = static_cast<int64_t>(j) * threads_per_row + thread;
    if (k < vectors) {
      convert_vector(in[k], v[j]);
#pragma unroll
      for (int e = 0; e < kVec; ++e) row_max = fmax(row_max, v[j][e]);
    }
  }
  row_max = row_allreduce<kWarpPerRow>(row_max, Max{}, acc_t(-INFINITY), max_partials);
  acc_t sum = 0;
#pragma unroll
  for (int j = 0; j < kVectorsPerThread; ++j) {
    if (static_cast<int64_t>(j) * threads_per_row + thread < vectors) {
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        const acc_t shifted = v[j][e] - row_max;
        const acc_t exp_shifted = exp(shifted);
        sum += exp_shifted;
        v[j][e] = take_log ? shifted : exp_shifted;
      }
    }
  }
  sum = row_allreduce<kWarpPerRow>(sum, Plus{}, acc_t(0), sum_partials);
  const acc_t log_sum = log(sum);
  const acc_t inverse_sum = acc_t(1) / sum;
#pragma unroll
  for (int j = 0; j < kVectorsPerThread; ++j) {
    const int64_t k = static_cast<int64_t>(j) * threads_per_row + thread;
    if (k < vectors) {
      Vector result;
#pragma unroll
      for (int e = 0; e < kVec; ++e)
        result.values[e] = convert_element<T>(take_log ? v[j][e] - log_sum : v[j][e] * inverse_sum);
      out[k] = result;
    }
  }
}

// Rows too long for registers: one row per block of kOnlineThreads, two passes over it.
template <typename T, int kVec>
__global__ void softmax_online_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t n, bool take_log) {
  using acc_t = compute_t<T>;
  using Vector = AlignedVector<T, kVec>;
  __shared__ MaxSum<acc_t> warp_results[kWarpSize];
  const int64_t row = blockIdx.x;
  const Vector* in = reinterpret_cast<const Vector*>(x + row * n);
  Vector* out = reinterpret_cast<Vector*>(y + row * n);
  const int64_t vectors = n / kVec;

  MaxSum<acc_t> state{-INFINITY, 0};
#pragma unroll 4
  for (int64_t k = threadIdx.x; k < vectors; k += blockDim.x) {
    acc_t v[kVec];
    convert_vector(in[k], v);
#pragma unroll
    for (int e = 0; e < kVec; ++e) state = fold(state, v[e]);
  }
  state = block_allreduce(state, CombineMaxSum<acc_t>{}, MaxSum<acc_t>{-INFINITY, 0}, warp_results);
  const acc_t log_sum = log(state.sum);
  const acc_t inverse_sum = acc_t(1) / state.sum;
#pragma unroll 4
  for (int64_t k = threadIdx.x; k < vectors; k += blockDim.x) {
    acc_t v[kVec];
    convert_vector(in[k], v);
    Vector result;
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      const acc_t shifted = v[e] - state.max;
      result.values[e] = convert_element<T>(take_log ? shifted - log_sum : exp(shifted) * inverse_sum);
    }
    out[k] = result;
  }
}

// ---- backward ----

// grad_input from grad and y, the row in registers as in the forward.
template <typename T, int kVec, int kVectorsPerThread, bool kWarpPerRow>
__global__ void softmax_backward_rows_kernel(const T* __restrict__ grad, const T* __restrict__ y,
                                             T* __restrict__ grad_input, int64_t rows, int64_t n, bool take_log) {
  using acc_t = compute_t<T>;
  using Vector = AlignedVector<T, kVec>;
  __shared__ acc_t partials[kWarpSize];
  const RowThread<kWarpPerRow> me;
  const int64_t row = me.row;
  const int thread = me.thread;
  const int threads_per_row = me.threads_per_row;
  if (row >= rows) return;
  const Vector* g_in = reinterpret_cast<const Vector*>(grad + row * n);
  const Vector* y_in = reinterpret_cast<const Vector*>(y + row * n);
  Vector* out = reinterpret_cast<Vector*>(grad_input + row * n);
  const int64_t vectors = n / kVec;

  acc_t g[kVectorsPerThread][kVec];
  acc_t yv[kVectorsPerThread][kVec];
  acc_t total = 0;  // sum(grad * y), or sum(grad) for log_softmax
#pragma unroll
  for (int j = 0; j < kVectorsPerThread; ++j) {
    const int64_t k = static_cast<int64_t>(j) * threads_per_row + thread;
    if (k < vectors) {
      convert_vector(g_in[k], g[j]);
      convert_vector(y_in[k], yv[j]);
#pragma unroll
      for (int e = 0; e < kVec; ++e) total += take_log ? g[j][e] : g[j][e] * yv[j][e];
    }
  }
  total = row_allreduce<kWarpPerRow>(total, Plus{}, acc_t(0), partials);
#pragma unroll
  for (int j = 0; j < kVectorsPerThread; ++j) {
    const int64_t k = static_cast<int64_t>(j) * threads_per_row + thread;
    if (k < vectors) {
      Vector result;
#pragma unroll
      for (int e = 0; e < kVec; ++e)
        result.values[e] =
            convert_element<T>(take_log ? g[j][e] - exp(yv[j][e]) * total : yv[j][e] * (g[j][e] - total));
      out[k] = result;
    }
  }
}

template <typename T, int kVec>
__global__ void softmax_backward_online_kernel(const T* __restrict__ grad, const T* __restrict__ y,
                                              T* __restrict__ grad_input, int64_t n, bool take_log) {
  using acc_t = compute_t<T>;
  using Vector = AlignedVector<T, kVec>;
  __shared__ acc_t warp_results[kWarpSize];
  const int64_t row = blockIdx.x;
  const Vector* g_in = reinterpret_cast<const Vector*>(grad + row * n);
  const Vector* y_in = reinterpret_cast<const Vector*>(y + row * n);
  Vector* out = reinterpret_cast<Vector*>(grad_input + row * n);
  const int64_t vectors = n / kVec;

  acc_t total = 0;
#pragma unroll 4
  for (int64_t k = threadIdx.x; k < vectors; k += blockDim.x) {
    acc_t g[kVec], yv[kVec];
    convert_vector(g_in[k], g);
    convert_vector(y_in[k], yv);
#pragma unroll
    for (int e = 0; e < kVec; ++e) total += take_log ? g[e] : g[e] * yv[e];
  }
  total = block_allreduce(total, Plus{}, acc_t(0), warp_results);
#pragma unroll 4
  for (int64_t k = threadIdx.x; k < vectors; k += blockDim.x) {
    acc_t g[kVec], yv[kVec];
    convert_vector(g_in[k], g);
    convert_vector(y_in[k], yv);
    Vector result;
#pragma unroll
    for (int e = 0; e < kVec; ++e)
      result.values[e] = convert_element<T>(take_log ? g[e] - exp(yv[e]) * total : yv[e] * (g[e] - total));
    out[k] = result;
  }
}

}  // namespace

void softmax_rows(const Tensor& x, const Tensor& y, bool log) {
  const char* op = log ? "log_softmax" : "softmax";
  const Rows rows = rows_of(x);
  if (rows.count == 0) return;
  DeviceGuard guard(x.device().index);
  const cudaStream_t stream = current_stream();
  dispatch_floating(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* in = static_cast<const T*>(x.raw_data());
    T* out = static_cast<T*>(y.raw_data());
    with_vector_width<T>(rows.length, {in, out}, [&](auto vector_width) {
      constexpr int kVec = decltype(vector_width)::value;
      launch_for_rows<kVec>(
          rows, op,
          [&](auto per_thread, auto warp_per_row, unsigned int grid, int block_threads) {
            softmax_rows_kernel<T, kVec, decltype(per_thread)::value, decltype(warp_per_row)::value>
                <<<grid, block_threads, 0, stream>>>(in, out, rows.count, rows.length, log);
          },
          [&](unsigned int grid, int block_threads) {
            softmax_online_kernel<T, kVec><<<grid, block_threads, 0, stream>>>(in, out, rows.length, log);
          });
      MG_CUDA_CHECK_LAUNCH(op);
    });
  });
}

void softmax_backward_rows(const Tensor& grad, const Tensor& y, const Tensor& grad_input, bool log) {
  const char* op = log ? "log_softmax (backward)" : "softmax (backward)";
  const Rows rows = rows_of(y);
  if (rows.count == 0) return;
  DeviceGuard guard(y.device().index);
  const cudaStream_t stream = current_stream();
  dispatch_floating(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* g = static_cast<const T*>(grad.raw_data());
    const T* out = static_cast<const T*>(y.raw_data());
    T* g_in = static_cast<T*>(grad_input.raw_data());
    with_vector_width<T>(rows.length, {g, out, g_in}, [&](auto vector_width) {
      constexpr int kVec = decltype(vector_width)::value;
      launch_for_rows<kVec>(
          rows, op,
          [&](auto per_thread, auto warp_per_row, unsigned int grid, int block_threads) {
            softmax_backward_rows_kernel<T, kVec, decltype(per_thread)::value, decltype(warp_per_row)::value>
                <<<grid, block_threads, 0, stream>>>(g, out, g_in, rows.count, rows.length, log);
          },
          [&](unsigned int grid, int block_threads) {
            softmax_backward_online_kernel<T, kVec>
                <<<grid, block_threads, 0, stream>>>(g, out, g_in, rows.length, log);
          });
      MG_CUDA_CHECK_LAUNCH(op);
    });
  });
}

}  // namespace cuda
}  // namespace minigrad
