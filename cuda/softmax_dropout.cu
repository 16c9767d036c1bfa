// softmax_dropout along the last dim of contiguous rows, forward and backward: the row
// kernels of cuda/softmax.cu with the mask, the scale and the dropout fused in.
//
//   forward:  P = softmax(scale * x + mask), y = P * keep / (1 - p_q); writes P (saved for
//             the backward) and y
//   backward: dP = dy * keep / (1 - p_q), dx = scale * P * (dP - sum(dP * P))
//
// The rows' layout and kernel choice are cuda/row_kernels.cuh's: rows of up to 8192 elements
// in registers (each input read once, each output written once), longer ones two passes of
// a block (online max and sum, then the write). Rows whose length or pointers do not allow
// 16-byte vectors also take the two-pass kernel, one element at a time: that keeps the
// register kernels to the vector width alone (attention rows are multiples of 8 elements).
//
// The options are runtime values, not template parameters, so each dtype compiles one
// kernel per row-length bucket whatever the options: the mask's kind (none, bool,
// additive), the causal flag and the dropout cost a predictable branch per element.
// The mask is read at its broadcast strides (a [B, 1, 1, S] padding mask is never expanded):
// each row finds its offset once, then steps along the row by the mask's last stride (1 or 0).
//
// The dropout of an element is decided by its index in the caller's x (kernels/dropout.h),
// one Philox call per group of 8 consecutive indices (dropout_bits::MaskCursor): with the
// softmax dim last that is one call per 16-byte vector of bfloat16.
#include <cmath>
#include <cstdint>
#include <type_traits>

#include <minigrad/core/dispatch.h>
#include <minigrad/cuda/block_reduce.cuh>
#include <minigrad/cuda/convert.cuh>
#include <minigrad/cuda/row_kernels.cuh>
#include <minigrad/cuda/runtime.h>
#include <minigrad/cuda/softmax_dropout.h>
#include <minigrad/cuda/strided_layout.cuh>
#include <minigrad/cuda/vector.cuh>
#include <minigrad/kernels/dropout.h>
#include <minigrad/kernels/elementwise_functors.h>  // compute_t

namespace minigrad {
namespace cuda {
namespace {

enum class MaskKind : int { None, Bool, Additive };

// What the kernels apply, passed by value. A row's number, over the leading dims (all but
// the last), gives its mask offset (operand 0 of `leading`) and the index in x's order of
// its first element (operand 1).
struct RowOptions {
  StridedLayout<2> leading;
  int64_t mask_step = 0;   // the mask's stride along the row (0 when broadcast)
  int64_t index_step = 1;  // the index's stride along the row (1 when the softmax dim was x's last)
  const void* mask = nullptr;
  MaskKind mask_kind = MaskKind::None;
  int64_t causal_rows = 0;  // x.size(-2) when causal, else 0
  double scale = 1.0;
  bool drop = false;
  dropout_bits::Mask dropout;
  double keep_scale = 1.0;
};

// Where row `row` starts in the mask and in x's order, and its causal query row.
struct RowStart {
  int64_t mask_offset;
  int64_t index;
  int64_t query;
  __device__ RowStart(const RowOptions& o, int64_t row) {
    int64_t offsets[2];
    o.leading.offsets(row, offsets);
    mask_offset = offsets[0];
    index = offsets[1];
    query = o.causal_rows > 0 ? row - divide_index(row, o.causal_rows) * o.causal_rows : 0;
  }
};

// scale * x + mask of the element in column `col`, -inf where it is masked out.
template <typename T, typename acc_t>
__device__ __forceinline__ acc_t masked_logit(const RowOptions& o, const RowStart& s, acc_t x, int64_t col) {
  if (o.causal_rows > 0 && col > s.query) return -INFINITY;
  acc_t v = static_cast<acc_t>(o.scale) * x;
  if (o.mask_kind == MaskKind::Bool) {
    if (!static_cast<const bool*>(o.mask)[s.mask_offset + col * o.mask_step]) return -INFINITY;
  } else if (o.mask_kind == MaskKind::Additive) {
    v += convert_element<acc_t>(static_cast<const T*>(o.mask)[s.mask_offset + col * o.mask_step]);
  }
  return v;
}

// The keep decisions of the kVec columns first_col .. first_col + kVec - 1, bit e for column
// first_col + e. When their indices are consecutive and start at a multiple of kVec (the
// softmax dim is x's last, kVec divides the row's start), they lie in one group of 8: one
// Philox call, no per-element test. Otherwise one decision at a time through the cursor.
template <int kVec>
__device__ __forceinline__ uint32_t vector_keep_bits(const RowOptions& o, const RowStart& s,
                                                     dropout_bits::MaskCursor& cursor, int64_t first_col) {
  static_assert(dropout_bits::kElementsPerBlock % kVec == 0, "a vector must not straddle two groups");
  const uint64_t first = static_cast<uint64_t>(s.index + first_col * o.index_step);
  if (o.index_step == 1 && first % kVec == 0)
    return o.dropout.keep_bits(first / dropout_bits::kElementsPerBlock) >> (first % dropout_bits::kElementsPerBlock);
  uint32_t bits = 0;
#pragma unroll
  for (int e = 0; e < kVec; ++e)
    bits |= static_cast<uint32_t>(cursor.keep(first + static_cast<uint64_t>(e * o.index_step))) << e;
  return bits;
}

// The factor of a kept element, or 0.
template <typename acc_t>
__device__ __forceinline__ acc_t keep_factor(const RowOptions& o, uint32_t bits, int e) {
  return (bits >> e) & 1u ? static_cast<acc_t>(o.keep_scale) : acc_t(0);
}

// Blocks of the register kernels an SM must hold: 4 of 256 threads (8 of 128 for a warp per
// row), which caps a thread at 64 registers. Without the cap the bfloat16 kernels for rows of
// 1024 took 80 registers (forward) and 91 (backward), so an SM held 24 or 20 warps: too few
// loads in flight to reach the copy rate. A double row needs up to 64 registers for its
// values alone: no cap there.
template <typename T>
constexpr int kMinRowBlocks = sizeof(T) == 8 ? 1 : 4;

// ---- forward ----

// A row in registers (cuda/row_kernels.cuh: a warp or a block per row; thread t holds the
// row's vectors t, t + threads_per_row, ...).
template <typename T, int kVec, int kVectorsPerThread, bool kWarpPerRow>
__global__ void __launch_bounds__(kMaxRowThreads, kMinRowBlocks<T>)
    softmax_dropout_rows_kernel(const T* __restrict__ x, T* __restrict__ probs, T* __restrict__ y, int64_t rows,
                                int64_t n, const RowOptions options) {
  using acc_t = compute_t<T>;
  using Vector = AlignedVector<T, kVec>;
  __shared__ acc_t max_partials[kWarpSize];
  __shared__ acc_t sum_partials[kWarpSize];
  const RowThread<kWarpPerRow> me;
  if (me.row >= rows) return;  // a whole warp (the block holds whole rows): the combines see all threads
  const RowStart start(options, me.row);
  const Vector* in = reinterpret_cast<const Vector*>(x + me.row * n);
  const int64_t vectors = n / kVec;

  acc_t v[kVectorsPerThread][kVec];
  acc_t row_max = -INFINITY;
#pragma unroll
  for (int j = 0; j < kVectorsPerThread; ++j) {
    const int64_t k = static_cast<int64_t>(j) * me.threads_per_row + me.thread;
    if (k < vectors) {
      const Vector loaded = in[k];
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        v[j][e] = masked_logit<T>(options, start, convert_element<acc_t>(loaded.values[e]), k * kVec + e);
        row_max = fmax(row_max, v[j][e]);
      }
    }
  }
  row_max = row_allreduce<kWarpPerRow>(row_max, Max{}, acc_t(-INFINITY), max_partials);
  // A fully masked row: every exp is of -inf, its probabilities 0 (not exp(-inf - -inf) = NaN).
  const bool all_masked = row_max == -INFINITY;
  acc_t sum = 0;
#pragma unroll
  for (int j = 0; j < kVectorsPerThread; ++j) {
    if (static_cast<int64_t>(j) * me.threads_per_row + me.thread < vectors) {
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        v[j][e] = all_masked ? acc_t(0) : exp(v[j][e] - row_max);
        sum += v[j][e];
      }
    }
  }
  sum = row_allreduce<kWarpPerRow>(sum, Plus{}, acc_t(0), sum_partials);
  const acc_t inverse_sum = all_masked ? acc_t(0) : acc_t(1) / sum;
  Vector* p_out = reinterpret_cast<Vector*>(probs + me.row * n);
  Vector* y_out = reinterpret_cast<Vector*>(y + me.row * n);
  dropout_bits::MaskCursor cursor(options.dropout);
#pragma unroll
  for (int j = 0; j < kVectorsPerThread; ++j) {
    const int64_t k = static_cast<int64_t>(j) * me.threads_per_row + me.thread;
    if (k < vectors) {
      Vector p_result, y_result;
      const uint32_t keep = options.drop ? vector_keep_bits<kVec>(options, start, cursor, k * kVec) : 0u;
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        p_result.values[e] = convert_element<T>(v[j][e] * inverse_sum);
        const acc_t p = convert_element<acc_t>(p_result.values[e]);
        y_result.values[e] = convert_element<T>(p * keep_factor<acc_t>(options, keep, e));
      }
      p_out[k] = p_result;
      if (options.drop) y_out[k] = y_result;
    }
  }
}

// Rows too long for registers, or not vectorizable: one row per block of kOnlineThreads, two
// passes over it (an online max and sum, then the write).
template <typename T, int kVec>
__global__ void softmax_dropout_online_kernel(const T* __restrict__ x, T* __restrict__ probs, T* __restrict__ y,
                                              int64_t n, const RowOptions options) {
  using acc_t = compute_t<T>;
  using Vector = AlignedVector<T, kVec>;
  __shared__ MaxSum<acc_t> warp_results[kWarpSize];
  const int64_t row = blockIdx.x;
  const RowStart start(options, row);
  const Vector* in = reinterpret_cast<const Vector*>(x + row * n);
  const int64_t vectors = n / kVec;

  MaxSum<acc_t> state{-INFINITY, 0};
  for (int64_t k = threadIdx.x; k < vectors; k += blockDim.x) {
    const Vector loaded = in[k];
#pragma unroll
    for (int e = 0; e < kVec; ++e)
      state = fold(state, masked_logit<T>(options, start, convert_element<acc_t>(loaded.values[e]), k * kVec + e));
  }
  state = block_allreduce(state, CombineMaxSum<acc_t>{}, MaxSum<acc_t>{-INFINITY, 0}, warp_results);
  const bool all_masked = state.max == -INFINITY;
  const acc_t inverse_sum = all_masked ? acc_t(0) : acc_t(1) / state.sum;
  Vector* p_out = reinterpret_cast<Vector*>(probs + row * n);
  Vector* y_out = reinterpret_cast<Vector*>(y + row * n);
  dropout_bits::MaskCursor cursor(options.dropout);
  for (int64_t k = threadIdx.x; k < vectors; k += blockDim.x) {
    const Vector loaded = in[k];
    Vector p_result, y_result;
    const uint32_t keep = options.drop ? vector_keep_bits<kVec>(options, start, cursor, k * kVec) : 0u;
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      const acc_t logit = masked_logit<T>(options, start, convert_element<acc_t>(loaded.values[e]), k * kVec + e);
      p_result.values[e] = convert_element<T>(all_masked ? acc_t(0) : exp(logit - state.max) * inverse_sum);
      const acc_t p = convert_element<acc_t>(p_result.values[e]);
      y_result.values[e] = convert_element<T>(p * keep_factor<acc_t>(options, keep, e));
    }
    p_out[k] = p_result;
    if (options.drop) y_out[k] = y_result;
  }
}

// ---- backward ----

template <typename T, int kVec, int kVectorsPerThread, bool kWarpPerRow>
__global__ void __launch_bounds__(kMaxRowThreads, kMinRowBlocks<T>)
    softmax_dropout_backward_rows_kernel(const T* __restrict__ grad, const T* __restrict__ probs,
                                         T* __restrict__ grad_input, int64_t rows, int64_t n,
                                         const RowOptions options) {
  using acc_t = compute_t<T>;
  using Vector = AlignedVector<T, kVec>;
  __shared__ acc_t partials[kWarpSize];
  const RowThread<kWarpPerRow> me;
  if (me.row >= rows) return;
  const RowStart start(options, me.row);
  const Vector* g_in = reinterpret_cast<const Vector*>(grad + me.row * n);
  const Vector* p_in = reinterpret_cast<const Vector*>(probs + me.row * n);
  const int64_t vectors = n / kVec;
  dropout_bits::MaskCursor cursor(options.dropout);

  acc_t dp[kVectorsPerThread][kVec];  // the gradient of P
  acc_t p[kVectorsPerThread][kVec];
  acc_t total = 0;  // sum(dP * P)
#pragma unroll
  for (int j = 0; j < kVectorsPerThread; ++j) {
    const int64_t k = static_cast<int64_t>(j) * me.threads_per_row + me.thread;
    if (k < vectors) {
      const Vector g_loaded = g_in[k];
      const Vector p_loaded = p_in[k];
      const uint32_t keep = options.drop ? vector_keep_bits<kVec>(options, start, cursor, k * kVec) : 0u;
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        dp[j][e] = convert_element<acc_t>(g_loaded.values[e]);
        if (options.drop) dp[j][e] *= keep_factor<acc_t>(options, keep, e);
        p[j][e] = convert_element<acc_t>(p_loaded.values[e]);
        total += dp[j][e] * p[j][e];
      }
    }
  }
  total = row_allreduce<kWarpPerRow>(total, Plus{}, acc_t(0), partials);
  const acc_t scale = static_cast<acc_t>(options.scale);
  Vector* out = reinterpret_cast<Vector*>(grad_input + me.row * n);
#pragma unroll
  for (int j = 0; j < kVectorsPerThread; ++j) {
    const int64_t k = static_cast<int64_t>(j) * me.threads_per_row + me.thread;
    if (k < vectors) {
      Vector result;
#pragma unroll
      for (int e = 0; e < kVec; ++e) result.values[e] = convert_element<T>(scale * p[j][e] * (dp[j][e] - total));
      out[k] = result;
    }
  }
}

template <typename T, int kVec>
__global__ void softmax_dropout_backward_online_kernel(const T* __restrict__ grad, const T* __restrict__ probs,
                                                       T* __restrict__ grad_input, int64_t n,
                                                       const RowOptions options) {
  using acc_t = compute_t<T>;
  using Vector = AlignedVector<T, kVec>;
  __shared__ acc_t warp_results[kWarpSize];
  const int64_t row = blockIdx.x;
  const RowStart start(options, row);
  const Vector* g_in = reinterpret_cast<const Vector*>(grad + row * n);
  const Vector* p_in = reinterpret_cast<const Vector*>(probs + row * n);
  const int64_t vectors = n / kVec;

  // dP of one vector: the mask drawn again in each pass.
  const auto grad_probs = [&](dropout_bits::MaskCursor& cursor, const Vector& g, int64_t k, acc_t (&dp)[kVec]) {
    const uint32_t keep = options.drop ? vector_keep_bits<kVec>(options, start, cursor, k * kVec) : 0u;
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      dp[e] = convert_element<acc_t>(g.values[e]);
      if (options.drop) dp[e] *= keep_factor<acc_t>(options, keep, e);
    }
  };
  acc_t total = 0;
  {
    dropout_bits::MaskCursor cursor(options.dropout);
    for (int64_t k = threadIdx.x; k < vectors; k += blockDim.x) {
      const Vector p_loaded = p_in[k];
      acc_t dp[kVec];
      grad_probs(cursor, g_in[k], k, dp);
#pragma unroll
      for (int e = 0; e < kVec; ++e) total += dp[e] * convert_element<acc_t>(p_loaded.values[e]);
    }
  }
  total = block_allreduce(total, Plus{}, acc_t(0), warp_results);
  const acc_t scale = static_cast<acc_t>(options.scale);
  Vector* out = reinterpret_cast<Vector*>(grad_input + row * n);
  dropout_bits::MaskCursor cursor(options.dropout);
  for (int64_t k = threadIdx.x; k < vectors; k += blockDim.x) {
    const Vector p_loaded = p_in[k];
    acc_t dp[kVec];
    grad_probs(cursor, g_in[k], k, dp);
    Vector result;
#pragma unroll
    for (int e = 0; e < kVec; ++e)
      result.values[e] = convert_element<T>(scale * convert_element<acc_t>(p_loaded.values[e]) * (dp[e] - total));
    out[k] = result;
  }
}

// ---- launch ----

// The kernels' options from the host's description; `with_mask` false for the backward.
RowOptions row_options(const SoftmaxDropoutRows& rows, bool with_mask, const char* op) {
  RowOptions o;
  const size_t dims = rows.sizes.size();
  const Shape leading(rows.sizes.begin(), rows.sizes.end() - 1);
  const Shape no_mask(dims, 0);
  const Shape& mask_strides = with_mask && rows.mask.defined() ? rows.mask_strides : no_mask;
  o.leading = make_strided_layout<2>(leading, {mask_strides.data(), rows.index_strides.data()}, op);
  o.mask_step = mask_strides[dims - 1];
  o.index_step = rows.index_strides[dims - 1];
  if (with_mask && rows.mask.defined()) {
    o.mask = rows.mask.raw_data();
    o.mask_kind = rows.mask.dtype() == kBool ? MaskKind::Bool : MaskKind::Additive;
  }
  o.causal_rows = rows.is_causal ? rows.sizes[dims - 2] : 0;
  o.scale = rows.scale;
  o.drop = rows.drop;
  o.dropout = rows.dropout;
  o.keep_scale = rows.dropout.scale();
  return o;
}

// Calls launch_rows / launch_online (cuda/row_kernels.cuh's launch_for_rows) with the vector
// width as a constant: 16-byte vectors where the row and pointers allow, else the online
// kernel one element at a time.
template <typename T, typename LaunchRows, typename LaunchOnline>
void launch_softmax_dropout(const Rows& rows, std::initializer_list<const void*> pointers, const char* op,
                            LaunchRows&& launch_rows, LaunchOnline&& launch_online) {
  with_vector_width<T>(rows.length, pointers, [&](auto vector_width) {
    constexpr int kVec = decltype(vector_width)::value;
    if constexpr (kVec == 1) {
      launch_online(vector_width, blocks_for_rows(rows.count, 1, op), kOnlineThreads);
    } else {
      launch_for_rows<kVec>(
          rows, op,
          [&](auto per_thread, auto warp_per_row, unsigned int grid, int block_threads) {
            launch_rows(vector_width, per_thread, warp_per_row, grid, block_threads);
          },
          [&](unsigned int grid, int block_threads) { launch_online(vector_width, grid, block_threads); });
    }
  });
}

}  // namespace

void softmax_dropout_rows(const Tensor& x, const SoftmaxDropoutRows& rows, const Tensor& probs, const Tensor& y) {
  const char* op = "softmax_dropout";
  const Rows shape = rows_of(x);
  if (shape.count == 0) return;
  const RowOptions options = row_options(rows, /*with_mask=*/true, op);
  DeviceGuard guard(x.device().index);
  const cudaStream_t stream = current_stream();
  dispatch_floating(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* in = static_cast<const T*>(x.raw_data());
    T* p_out = static_cast<T*>(probs.raw_data());
    T* y_out = static_cast<T*>(y.raw_data());
    launch_softmax_dropout<T>(
        shape, {in, p_out, y_out}, op,
        [&](auto vector_width, auto per_thread, auto warp_per_row, unsigned int grid, int block_threads) {
          softmax_dropout_rows_kernel<T, decltype(vector_width)::value, decltype(per_thread)::value,
                                      decltype(warp_per_row)::value>
              <<<grid, block_threads, 0, stream>>>(in, p_out, y_out, shape.count, shape.length, options);
        },
        [&](auto vector_width, unsigned int grid, int block_threads) {
          softmax_dropout_online_kernel<T, decltype(vector_width)::value>
              <<<grid, block_threads, 0, stream>>>(in, p_out, y_out, shape.length, options);
        });
    MG_CUDA_CHECK_LAUNCH(op);
  });
}

void softmax_dropout_backward_rows(const Tensor& grad, const Tensor& probs, const SoftmaxDropoutRows& rows,
                                   const Tensor& grad_input) {
  const char* op = "softmax_dropout (backward)";
  const Rows shape = rows_of(probs);
  if (shape.count == 0) return;
  const RowOptions options = row_options(rows, /*with_mask=*/false, op);
  DeviceGuard guard(probs.device().index);
  const cudaStream_t stream = current_stream();
  dispatch_floating(probs.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* g = static_cast<const T*>(grad.raw_data());
    const T* p = static_cast<const T*>(probs.raw_data());
    T* out = static_cast<T*>(grad_input.raw_data());
    launch_softmax_dropout<T>(
        shape, {g, p, out}, op,
        [&](auto vector_width, auto per_thread, auto warp_per_row, unsigned int grid, int block_threads) {
          softmax_dropout_backward_rows_kernel<T, decltype(vector_width)::value, decltype(per_thread)::value,
                                               decltype(warp_per_row)::value>
              <<<grid, block_threads, 0, stream>>>(g, p, out, shape.count, shape.length, options);
        },
        [&](auto vector_width, unsigned int grid, int block_threads) {
          softmax_dropout_backward_online_kernel<T, decltype(vector_width)::value>
              <<<grid, block_threads, 0, stream>>>(g, p, out, shape.length, options);
        });
    MG_CUDA_CHECK_LAUNCH(op);
  });
}

}  // namespace cuda
}  // namespace minigrad
