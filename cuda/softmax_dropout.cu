// softmax_dropout along the last dim of contiguous rows, forward and backward: the row
// kernels of cuda/softmax.cu with the mask, the scale and the dropout fused in.
//
//   forward:  P = softmax(scale * x + mask), y = P * keep / (1 - p_q); writes y and the
//             row's log-sum-exp L = log(sum(exp(scale * x + mask))), a float a row
//   backward: P = exp(scale * x + mask - L) again from x, dP = dy * keep / (1 - p_q),
//             dx = scale * P * (dP - sum(dP * P))
//
// Why P is recomputed rather than saved: the forward then reads x and writes y (2 elements
// of traffic each), where writing P too would make it 3, and P would be held from the
// forward to the backward; x is held anyway (the caller's). The backward reads x, dy and
// writes dx, as it would read P, dy and write dx. The exponentials it redoes are
// instructions, which the kernel has to spare while it waits on memory.
//
// The rows' layout and kernel choice are cuda/row_kernels.cuh's, with at most 32 elements a
// thread in the forward for 16-bit types and 16 otherwise (kForwardElementsPerThread,
// kBackwardElementsPerThread): bfloat16 rows of up to 8192 elements in the forward's
// registers, 4096 in the backward's (each input read once, each output written once). The
// forward's longer rows are staged in shared memory where two blocks' rows fit an SM (bfloat16
// rows of up to about 56000 elements on sm_90: read once, then three passes over shared
// memory), and so are the backward's x and dy (bfloat16 rows of up to about 28000: two passes
// over shared memory); the rest take two passes of a block over memory (the forward's online
// max and sum, then the write; the backward's sum, then the write). Rows whose length or
// pointers do not allow 16-byte vectors also take the two-pass kernel, one element at a time:
// that keeps the register kernels to the vector width alone (attention rows are multiples of 8
// elements).
//
// The options are runtime values, not template parameters, so each dtype compiles one
// kernel per row-length bucket whatever the options: the mask's kind (none, bool,
// additive), the causal flag and the dropout cost a predictable branch per element.
// The mask is read at its broadcast strides (a [B, 1, 1, S] padding mask is never expanded):
// each row finds its offset once, then steps along the row by the mask's last stride (1 or 0),
// a vector at a time where its rows are contiguous and aligned (RowOptions::mask_vector_alignment).
//
// Causal rows: the vectors wholly right of the diagonal are neither loaded nor computed, and
// their y and dx are written as zeros, which is what computing them gives (P = 0 there): for a
// square score matrix the forward moves a quarter fewer bytes (half of x is not read) and the
// backward a third fewer (half of x and of dy). One difference
// from the composite twin: a NaN or infinite dy at a masked element is not read, where the
// twin's 0 * dy would make it NaN.
//
// The dropout of an element is decided by its index in the caller's x (kernels/dropout.h),
// one Philox call per group of 8 consecutive indices (dropout_bits::MaskCursor): with the
// softmax dim last that is one call per 16-byte vector of bfloat16.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include <minigrad/core/dispatch.h>
#include <minigrad/cuda/block_reduce.cuh>
#include <minigrad/cuda/convert.cuh>
#include <minigrad/cuda/launch.cuh>
#include <minigrad/cuda/row_kernels.cuh>
#include <minigrad/cuda/runtime.h>
#include <minigrad/cuda/softmax_dropout.h>
#include <minigrad/cuda/strided_layout.cuh>
#include <minigrad/cuda/vector.cuh>
#include <minigrad/kernels/dropout.h>
#include <minigrad/kernels/elementwise_functors.h>  // compute_t
#include <minigrad/kernels/fast_math.h>

namespace minigrad {
namespace cuda {
namespace {

enum class MaskKind : int { None, Bool, Additive };

// What the kernels apply, passed by value. A row's number, over the leading dims (all but
// the last), gives its mask offset (operand 0 of `leading`) and the index in x's order of
// its first element (operand 1).
struct RowOptions {
  StridedLayout<2> leading;
  // When the softmax dim was x's last, the index of a row's first element is row * row_length
  // (0 otherwise): the offsets through `leading`, a division per leading dim, are then needed
  // only for a mask.
  int64_t row_length = 0;
  int64_t mask_step = 0;   // the mask's stride along the row (0 when broadcast)
  int64_t index_step = 1;  // the index's stride along the row (1 when the softmax dim was x's last)
  const void* mask = nullptr;
  MaskKind mask_kind = MaskKind::None;
  // The widest vector (in elements, a power of two up to 16) a mask row may be read in: each
  // row's mask start and the mask's pointer are multiples of it and mask_step is 1 (0 when
  // mask_step is not 1). Then a vector of x's row meets one vector of the mask.
  int mask_vector_alignment = 0;
  bool is_causal = false;
  IndexDivisor causal_rows;  // x.size(-2) when causal
  double scale = 1.0;
  bool drop = false;
  dropout_bits::Mask dropout;
  double keep_scale = 1.0;
};

// Where row `row` starts in the mask and in x's order, and where causality masks it from.
struct RowStart {
  int64_t mask_offset;
  int64_t index;
  // The first column masked out by causality (columns j > the query row i): i + 1, or no
  // column (INT64_MAX) when not causal.
  int64_t visible_end;
  __device__ RowStart(const RowOptions& o, int64_t row) {
    if (o.row_length > 0 && o.mask_kind == MaskKind::None) {
      mask_offset = 0;
      index = row * o.row_length;
    } else {
      int64_t offsets[2];
      o.leading.offsets(row, offsets);
      mask_offset = offsets[0];
      index = offsets[1];
    }
    visible_end = o.is_causal ? o.causal_rows.divide_with_remainder(row).remainder + 1 : INT64_MAX;
  }
  // Whether the vector of kVec elements starting at column `col` has an element causality
  // leaves: the kernels neither load nor compute the others, which are all -inf logits.
  __device__ bool visible(int64_t col) const { return col < visible_end; }
  // How many of a row's first `vectors` vectors of kVec elements are visible: the staged kernels
  // copy only those.
  template <int kVec>
  __device__ int64_t visible_vectors(int64_t vectors) const {
    const int64_t visible = visible_end == INT64_MAX ? vectors : (visible_end + kVec - 1) / kVec;
    return visible < vectors ? visible : vectors;
  }
};

// The factors of a logit l = (scale * x + mask) * unit, `unit` 1 for natural units, log2(e)
// for base 2 (the register and staged kernels hold logits in base 2, so that exp(v - m) is exp2
// of the scaled difference, one instruction; kLn2 takes a base-2 log-sum-exp back to natural
// units). vector_logits multiplies x by x_factor, and the caller multiplies what it
// returns by exponent_factor inside the exponent's fused multiply-add, fma(v, factor, -shift):
// when nothing is added to x (no additive mask) and scale * unit > 0, the whole factor moves
// there (x_factor 1: the multiply is skipped), since a positive factor commutes with the max.
// Otherwise it is applied to x (exponent_factor 1).
template <typename acc_t>
struct LogitUnits {
  acc_t x_factor;
  acc_t exponent_factor;
  acc_t unit;  // multiplies an additive mask
  __device__ LogitUnits(const RowOptions& o, acc_t unit_, bool factor_in_exponent) : unit(unit_) {
    const acc_t factor = static_cast<acc_t>(o.scale) * unit_;
    const bool moved = factor_in_exponent && o.mask_kind != MaskKind::Additive && factor > acc_t(0);
    x_factor = moved ? acc_t(1) : factor;
    exponent_factor = moved ? factor : acc_t(1);
  }
};

// x_factor * x + unit * mask of the kVec elements of a vector starting at column `col`, -inf
// where masked out, from the vector's bits as loaded (a VectorWord, or the vector itself). The
// options are the same for every element of every row: each is tested once a vector, not once
// an element. Callers call it for visible vectors only (RowStart::visible).
template <typename T, typename acc_t, int kVec, typename Bits>
__device__ __forceinline__ void vector_logits(const RowOptions& o, const RowStart& s, const LogitUnits<acc_t>& units,
                                              const Bits& x, int64_t col, acc_t (&v)[kVec]) {
  convert_vector(vector_from_bits<T, kVec>(x), v);
  if (units.x_factor != acc_t(1)) {
#pragma unroll
    for (int e = 0; e < kVec; ++e) v[e] *= units.x_factor;
  }
  const bool mask_vectors = o.mask_vector_alignment >= kVec;
  if (o.mask_kind == MaskKind::Additive) {
    const T* mask = static_cast<const T*>(o.mask) + s.mask_offset + col * o.mask_step;
    if (mask_vectors) {
      acc_t m[kVec];
      convert_vector(load_vector<kVec>(mask), m);
#pragma unroll
      for (int e = 0; e < kVec; ++e) v[e] += units.unit * m[e];
    } else {
#pragma unroll
      for (int e = 0; e < kVec; ++e) v[e] += units.unit * convert_element<acc_t>(mask[e * o.mask_step]);
    }
  } else if (o.mask_kind == MaskKind::Bool) {
    const uint8_t* row_mask = static_cast<const uint8_t*>(o.mask) + s.mask_offset;
    if (mask_vectors) {
      // kVec bools in one load (mask_step is 1 here), each tested in its word, unless no byte
      // is 0: a padding mask keeps most vectors whole.
      const AlignedVector<uint8_t, kVec> bytes = load_vector<kVec>(row_mask + col);
      constexpr int kWords = (kVec + 3) / 4;
      uint32_t words[kWords];
#pragma unroll
      for (int i = 0; i < kWords; ++i) words[i] = 0x01010101u;  // bytes past kVec: kept
      memcpy(words, &bytes, sizeof(bytes));
      bool any_zero_byte = false;  // a byte of w is 0 iff (w - 0x01..01) & ~w has its top bit set
#pragma unroll
      for (int i = 0; i < kWords; ++i) any_zero_byte |= ((words[i] - 0x01010101u) & ~words[i] & 0x80808080u) != 0u;
      if (any_zero_byte) {
#pragma unroll
        for (int e = 0; e < kVec; ++e)
          if ((words[e / 4] & (0xffu << (8 * (e % 4)))) == 0u) v[e] = -INFINITY;
      }
    } else {
      const uint8_t* mask = row_mask + col * o.mask_step;
#pragma unroll
      for (int e = 0; e < kVec; ++e)
        if (mask[e * o.mask_step] == 0) v[e] = -INFINITY;
    }
  }
  if (col + kVec > s.visible_end) {
#pragma unroll
    for (int e = 0; e < kVec; ++e)
      if (col + e >= s.visible_end) v[e] = -INFINITY;
  }
}

// The keep decisions of the kVec elements of a vector, as Philox words (kernels/dropout.h):
// element e is kept iff keeps(w[e / 2], e % 2, threshold). Read straight from the words, a
// decision is a shift or a mask and a compare, where packing them into bits and testing the
// bits again cost twice that.
template <int kVec>
struct KeepWords {
  uint32_t w[(kVec + 1) / 2];
  __device__ __forceinline__ bool kept(int e, uint32_t threshold) const {
    return dropout_bits::keeps(w[e / 2], static_cast<uint32_t>(e % 2), threshold);
  }
};

// The decisions of the vector starting at column `col`. When its indices are consecutive and
// start at a multiple of kVec (the softmax dim is x's last, kVec divides the row's start),
// they lie in one group of 8: one Philox call, its words taken as they are. Otherwise one
// decision at a time through the cursor, each written as a half of all ones or all zeros
// (all zeros is dropped unless the threshold is 0, when nothing is).
template <int kVec>
__device__ __forceinline__ KeepWords<kVec> vector_keep(const RowOptions& o, const RowStart& s,
                                                       dropout_bits::MaskCursor& cursor, int64_t col) {
  static_assert(dropout_bits::kElementsPerBlock % kVec == 0, "a vector must not straddle two groups");
  KeepWords<kVec> k;
  const uint64_t first = static_cast<uint64_t>(s.index + col * o.index_step);
  if constexpr (kVec > 1) {
    if (o.index_step == 1 && first % kVec == 0) {
      const philox::Uint4 b = o.dropout.block(first / dropout_bits::kElementsPerBlock);
      const uint32_t start = static_cast<uint32_t>(first % dropout_bits::kElementsPerBlock) / 2;  // kVec / 2 divides it
      if constexpr (kVec == 8) {
        k.w[0] = b.x, k.w[1] = b.y, k.w[2] = b.z, k.w[3] = b.w;
      } else if constexpr (kVec == 4) {
        k.w[0] = start == 0 ? b.x : b.z;
        k.w[1] = start == 0 ? b.y : b.w;
      } else {
        k.w[0] = start == 0 ? b.x : start == 1 ? b.y : start == 2 ? b.z : b.w;
      }
      return k;
    }
  }
#pragma unroll
  for (int i = 0; i < (kVec + 1) / 2; ++i) k.w[i] = 0;
#pragma unroll
  for (int e = 0; e < kVec; ++e)
    if (cursor.keep(first + static_cast<uint64_t>(e * o.index_step))) k.w[e / 2] |= 0xFFFFu << (16 * (e % 2));
  return k;
}

// The factor of element e: 1 / (1 - p_q) if kept, else 0.
template <typename acc_t, int kVec>
__device__ __forceinline__ acc_t keep_factor(const RowOptions& o, const KeepWords<kVec>& k, int e) {
  return k.kept(e, o.dropout.threshold) ? static_cast<acc_t>(o.keep_scale) : acc_t(0);
}

// The vectors of its row a thread holds in the register kernels: the j-th starts at column(j)
// (vectors t, t + threads_per_row, ... of the row for thread t). One is live when it lies in
// the row and causality leaves some of it; the others are neither loaded nor computed, and
// are written as zeros.
template <bool kWarpPerRow, int kVec>
struct HeldVectors {
  const RowThread<kWarpPerRow>& me;
  const RowStart& start;
  int64_t n;
  __device__ int64_t column(int j) const {
    return (static_cast<int64_t>(j) * me.threads_per_row + me.thread) * kVec;
  }
  __device__ bool in_row(int j) const { return column(j) < n; }
  __device__ bool live(int j) const { return in_row(j) && start.visible(column(j)); }
};

// Elements a thread of the register kernels holds, at most (row_kernels.cuh's launch_for_rows
// allows 32). The forward of a 16-bit type holds 32: a warp then holds a row of 1024 (where
// 64 threads of 16 did), so the row's fixed costs (its start, its mask offset, the combines,
// shuffles only) are paid over twice the elements, and a thread has four 16-byte loads in
// flight instead of two; bench/experiments/softmax_dropout_shapes.cu measured it faster for
// plain, causal and padding-masked rows (docs/perf-notes.md). The backward holds 16: at 32 it
// spilled (the exponentials, the Philox rounds and dy's vectors need registers beside the
// row) and was slower. float32 and double keep 16 (32 was measured for 16-bit types only).
template <typename T>
constexpr int kForwardElementsPerThread = sizeof(T) == 2 ? 32 : 16;
constexpr int kBackwardElementsPerThread = 16;

// Blocks of the register kernels an SM must hold: 4 of 256 threads (8 of 128 for a warp per
// row), which caps a thread at 64 registers. Without the cap the bfloat16 kernels for rows of
// 1024 took 80 registers (forward) and 91 (backward), so an SM held 24 or 20 warps: too few
// loads in flight to reach the copy rate. A thread holding more than 16 elements (kElements:
// the 16-bit forward) has more of its own loads in flight and gets 3 blocks (85 registers).
// A double row needs up to 64 registers for its values alone: no cap.
template <typename T, int kElements>
constexpr int kMinRowBlocks = sizeof(T) == 8 ? 1 : kElements > 16 ? 3 : 4;

// ---- forward ----

// The row's normalization in the base-2 kernels (the register and the staged forward), from
// the row's max logit: each exponential is exp2 of one fused multiply-add, and then, from the
// sum of the exponentials, the row's log-sum-exp in natural units and the factor of a kept
// element, 1 / sum / (1 - p_q) (the softmax's and the dropout's factors applied as one).
template <typename acc_t>
struct Base2Normalizer {
  acc_t exponent_factor;
  // A fully masked row: every logit is -inf. Shifted by 0 rather than by its max, each exp is
  // 0 (not exp(-inf - -inf) = NaN), and so are its probabilities.
  bool all_masked;
  acc_t shift;
  __device__ Base2Normalizer(acc_t row_max, const LogitUnits<acc_t>& base2)
      : exponent_factor(base2.exponent_factor),
        all_masked(row_max == -INFINITY),
        shift(all_masked ? acc_t(0) : row_max * base2.exponent_factor) {}
  // exp(logit - max) of a logit as vector_logits returns it.
  __device__ acc_t exponential(acc_t v) const { return fast_math::fast_exp2(fma(v, exponent_factor, -shift)); }
  // sum >= 1 (the max's own term is 1): the fast log2 and reciprocal hold their accuracy.
  __device__ acc_t log_sum_exp(acc_t sum) const {
    return all_masked ? acc_t(INFINITY) : (shift + fast_math::fast_log2(sum)) * kLn2<acc_t>;
  }
  __device__ acc_t kept_scale(acc_t sum, const RowOptions& o) const {
    const acc_t inverse_sum = all_masked ? acc_t(0) : fast_math::fast_reciprocal(sum);
    return o.drop ? inverse_sum * static_cast<acc_t>(o.keep_scale) : inverse_sum;
  }
};

// y of element e of a vector: its exponential times the kept scale, or 0 where dropped.
template <typename T, typename acc_t, int kVec>
__device__ __forceinline__ T dropout_output(const RowOptions& o, const KeepWords<kVec>& keep, int e,
                                            acc_t exponential, acc_t kept_scale) {
  const bool dropped = o.drop && !keep.kept(e, o.dropout.threshold);
  return convert_element<T>(exponential * (dropped ? acc_t(0) : kept_scale));  // a NaN stays NaN
}

// A row in registers (cuda/row_kernels.cuh: a warp or a block per row; thread t holds the
// row's vectors t, t + threads_per_row, ...). The logits are in base 2 (times log2(e)), so
// each exponential is the hardware's exp2; held as x itself when the whole factor moves into
// the exponent's fused multiply-add (LogitUnits), times it otherwise.
template <typename T, int kVec, int kVectorsPerThread, bool kWarpPerRow>
__global__ void __launch_bounds__(kMaxRowThreads, kMinRowBlocks<T, kVec * kVectorsPerThread>)
    softmax_dropout_rows_kernel(const T* __restrict__ x, T* __restrict__ y, compute_t<T>* __restrict__ log_sum_exp,
                                int64_t rows, int64_t n, const RowOptions options) {
  using acc_t = compute_t<T>;
  using Vector = AlignedVector<T, kVec>;
  __shared__ acc_t max_partials[kWarpSize];
  __shared__ acc_t sum_partials[kWarpSize];
  const RowThread<kWarpPerRow> me;
  if (me.row >= rows) return;  // a whole warp (the block holds whole rows): the combines see all threads
  const RowStart start(options, me.row);
  const LogitUnits<acc_t> base2(options, kLog2e<acc_t>, true);
  const HeldVectors<kWarpPerRow, kVec> held{me, start, n};

  // Held as the loads' words: loaded into a vector of T, a predicated load was merged into
  // its registers 16 bits at a time, and the loads waited on each other.
  using Word = typename VectorWord<static_cast<int>(sizeof(Vector))>::type;
  const Word* in = reinterpret_cast<const Word*>(x + me.row * n);
  Word loaded[kVectorsPerThread];
#pragma unroll
  for (int j = 0; j < kVectorsPerThread; ++j)
    if (held.live(j)) loaded[j] = in[held.column(j) / kVec];
  // The keep decisions do not depend on x: drawn while its loads are in flight.
  dropout_bits::MaskCursor cursor(options.dropout);
  KeepWords<kVec> keep[kVectorsPerThread];
#pragma unroll
  for (int j = 0; j < kVectorsPerThread; ++j)
    if (options.drop && held.live(j)) keep[j] = vector_keep<kVec>(options, start, cursor, held.column(j));
  acc_t v[kVectorsPerThread][kVec];
  acc_t row_max = -INFINITY;
#pragma unroll
  for (int j = 0; j < kVectorsPerThread; ++j) {
    if (held.live(j)) {
      vector_logits<T>(options, start, base2, loaded[j], held.column(j), v[j]);
#pragma unroll
      for (int e = 0; e < kVec; ++e) row_max = fmax(row_max, v[j][e]);
    }
  }
  row_max = row_allreduce<kWarpPerRow>(row_max, Max{}, acc_t(-INFINITY), max_partials);
  const Base2Normalizer<acc_t> normalizer(row_max, base2);
  acc_t sum = 0;
#pragma unroll
  for (int j = 0; j < kVectorsPerThread; ++j) {
    if (held.live(j)) {
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        v[j][e] = normalizer.exponential(v[j][e]);
        sum += v[j][e];
      }
    }
  }
  sum = row_allreduce<kWarpPerRow>(sum, Plus{}, acc_t(0), sum_partials);
  if (me.thread == 0) log_sum_exp[me.row] = normalizer.log_sum_exp(sum);
  const acc_t kept_scale = normalizer.kept_scale(sum, options);
  Vector* out = reinterpret_cast<Vector*>(y + me.row * n);
#pragma unroll
  for (int j = 0; j < kVectorsPerThread; ++j) {
    if (!held.in_row(j)) continue;
    Vector result;
    if (held.live(j)) {
#pragma unroll
      for (int e = 0; e < kVec; ++e) result.values[e] = dropout_output<T>(options, keep[j], e, v[j][e], kept_scale);
    } else {
      result = zero_vector<T, kVec>();
    }
    out[held.column(j) / kVec] = result;
  }
}

// Rows too long for registers, or not vectorizable: one row per block of kOnlineThreads, two
// passes over it (an online max and sum, in natural units, then the write).
template <typename T, int kVec>
__global__ void softmax_dropout_online_kernel(const T* __restrict__ x, T* __restrict__ y,
                                              compute_t<T>* __restrict__ log_sum_exp, int64_t n,
                                              const RowOptions options) {
  using acc_t = compute_t<T>;
  using Vector = AlignedVector<T, kVec>;
  __shared__ MaxSum<acc_t> warp_results[kWarpSize];
  const int64_t row = blockIdx.x;
  const RowStart start(options, row);
  const LogitUnits<acc_t> natural(options, acc_t(1), false);
  const Vector* in = reinterpret_cast<const Vector*>(x + row * n);
  const int64_t vectors = n / kVec;

  MaxSum<acc_t> state{-INFINITY, 0};
  for (int64_t k = threadIdx.x; k < vectors && start.visible(k * kVec); k += blockDim.x) {
    acc_t logits[kVec];
    vector_logits<T>(options, start, natural, in[k], k * kVec, logits);
#pragma unroll
    for (int e = 0; e < kVec; ++e) state = fold(state, logits[e]);
  }
  state = block_allreduce(state, CombineMaxSum<acc_t>{}, MaxSum<acc_t>{-INFINITY, 0}, warp_results);
  const bool all_masked = state.max == -INFINITY;
  if (threadIdx.x == 0) log_sum_exp[row] = all_masked ? acc_t(INFINITY) : state.max + log(state.sum);
  const acc_t inverse_sum = all_masked ? acc_t(0) : acc_t(1) / state.sum;
  Vector* out = reinterpret_cast<Vector*>(y + row * n);
  dropout_bits::MaskCursor cursor(options.dropout);
  for (int64_t k = threadIdx.x; k < vectors; k += blockDim.x) {
    Vector result;
    if (start.visible(k * kVec)) {
      KeepWords<kVec> keep;
      if (options.drop) keep = vector_keep<kVec>(options, start, cursor, k * kVec);
      acc_t logits[kVec];
      vector_logits<T>(options, start, natural, in[k], k * kVec, logits);
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        const acc_t p = all_masked ? acc_t(0) : exp(logits[e] - state.max) * inverse_sum;
        result.values[e] = convert_element<T>(options.drop ? p * keep_factor<acc_t>(options, keep, e) : p);
      }
    } else {
      result = zero_vector<T, kVec>();
    }
    out[k] = result;
  }
}

// Rows too long for registers that fit shared memory (16-byte vectors only): one row per block
// of kOnlineThreads, staged in shared memory (cuda/row_kernels.cuh's stage_row_vectors), then
// three passes over the staged row: the max, the sum, the write. The logits, the exponentials
// and the log-sum-exp are the register kernel's (base 2, each exponential one exp2), formed
// again at each pass from the staged x, where the online kernel's running sum takes two exp a
// logit and reads the row twice from memory.
template <typename T, int kVec>
__global__ void __launch_bounds__(kOnlineThreads)
    softmax_dropout_staged_kernel(const T* __restrict__ x, T* __restrict__ y, compute_t<T>* __restrict__ log_sum_exp,
                                  int64_t n, const RowOptions options) {
  using acc_t = compute_t<T>;
  using Vector = AlignedVector<T, kVec>;
  using Word = typename VectorWord<static_cast<int>(sizeof(Vector))>::type;
  __shared__ acc_t max_partials[kWarpSize];
  __shared__ acc_t sum_partials[kWarpSize];
  extern __shared__ __align__(16) unsigned char staged_bytes[];
  const Word* staged = reinterpret_cast<const Word*>(staged_bytes);
  const int64_t row = blockIdx.x;
  const RowStart start(options, row);
  const LogitUnits<acc_t> base2(options, kLog2e<acc_t>, true);
  const int64_t vectors = n / kVec;
  // Vectors causality masks out entirely are neither copied nor computed.
  const int64_t live = start.visible_vectors<kVec>(vectors);
  stage_row_vectors(reinterpret_cast<const Word*>(x + row * n), reinterpret_cast<Word*>(staged_bytes), live,
                    threadIdx.x, blockDim.x);
  mma::wait_copies<0>();

  acc_t row_max = -INFINITY;
  for (int64_t k = threadIdx.x; k < live; k += blockDim.x) {
    acc_t v[kVec];
    vector_logits<T>(options, start, base2, staged[k], k * kVec, v);
#pragma unroll
    for (int e = 0; e < kVec; ++e) row_max = fmax(row_max, v[e]);
  }
  row_max = block_allreduce(row_max, Max{}, acc_t(-INFINITY), max_partials);
  const Base2Normalizer<acc_t> normalizer(row_max, base2);
  acc_t sum = 0;
  for (int64_t k = threadIdx.x; k < live; k += blockDim.x) {
    acc_t v[kVec];
    vector_logits<T>(options, start, base2, staged[k], k * kVec, v);
#pragma unroll
    for (int e = 0; e < kVec; ++e) sum += normalizer.exponential(v[e]);
  }
  sum = block_allreduce(sum, Plus{}, acc_t(0), sum_partials);
  if (threadIdx.x == 0) log_sum_exp[row] = normalizer.log_sum_exp(sum);
  const acc_t kept_scale = normalizer.kept_scale(sum, options);
  Vector* out = reinterpret_cast<Vector*>(y + row * n);
  dropout_bits::MaskCursor cursor(options.dropout);
  for (int64_t k = threadIdx.x; k < vectors; k += blockDim.x) {
    Vector result;
    if (k < live) {
      KeepWords<kVec> keep;
      if (options.drop) keep = vector_keep<kVec>(options, start, cursor, k * kVec);
      acc_t v[kVec];
      vector_logits<T>(options, start, base2, staged[k], k * kVec, v);
#pragma unroll
      for (int e = 0; e < kVec; ++e)
        result.values[e] = dropout_output<T>(options, keep, e, normalizer.exponential(v[e]), kept_scale);
    } else {
      result = zero_vector<T, kVec>();
    }
    out[k] = result;
  }
}

// ---- backward ----

// P of one vector of a row, recomputed from x and the row's log-sum-exp (in base 2: a fully
// masked row's is +inf, so its P is exp2(-inf) = 0).
template <typename T, typename acc_t, int kVec, typename Bits>
__device__ __forceinline__ void recompute_probabilities(const RowOptions& o, const RowStart& s,
                                                        const LogitUnits<acc_t>& base2, acc_t log_sum_exp2,
                                                        const Bits& x, int64_t col, acc_t (&p)[kVec]) {
  vector_logits<T>(o, s, base2, x, col, p);
#pragma unroll
  for (int e = 0; e < kVec; ++e) p[e] = fast_math::fast_exp2(fma(p[e], base2.exponent_factor, -log_sum_exp2));
}

// dP = dy * keep / (1 - p_q) of element e of a vector, from its dy (converted to acc_t) and
// the vector's decisions.
template <typename acc_t, int kVec>
__device__ __forceinline__ acc_t grad_probability(const RowOptions& o, acc_t dy, const KeepWords<kVec>& keep, int e) {
  return o.drop ? dy * keep_factor<acc_t>(o, keep, e) : dy;
}

// The register path holds, per vector, P in compute_t<T> and dy as loaded with the vector's
// keep decisions (dP is one multiply from them).
template <typename T, int kVec, int kVectorsPerThread, bool kWarpPerRow>
__global__ void __launch_bounds__(kMaxRowThreads, kMinRowBlocks<T, kVec * kVectorsPerThread>)
    softmax_dropout_backward_rows_kernel(const T* __restrict__ grad, const T* __restrict__ x,
                                         const compute_t<T>* __restrict__ log_sum_exp, T* __restrict__ grad_input,
                                         int64_t rows, int64_t n, const RowOptions options) {
  using acc_t = compute_t<T>;
  using Vector = AlignedVector<T, kVec>;
  __shared__ acc_t partials[kWarpSize];
  const RowThread<kWarpPerRow> me;
  if (me.row >= rows) return;
  const RowStart start(options, me.row);
  const LogitUnits<acc_t> base2(options, kLog2e<acc_t>, true);
  const acc_t log_sum_exp2 = log_sum_exp[me.row] * kLog2e<acc_t>;
  // As in the forward: the vectors that are not live have P = 0, so their dx is 0 and neither
  // their x nor their dy is read.
  const HeldVectors<kWarpPerRow, kVec> held{me, start, n};
  dropout_bits::MaskCursor cursor(options.dropout);

  // Held as the loads' words (see the forward).
  using Word = typename VectorWord<static_cast<int>(sizeof(Vector))>::type;
  const Word* g_in = reinterpret_cast<const Word*>(grad + me.row * n);
  const Word* x_in = reinterpret_cast<const Word*>(x + me.row * n);
  Word dy[kVectorsPerThread];
  Word x_loaded[kVectorsPerThread];
#pragma unroll
  for (int j = 0; j < kVectorsPerThread; ++j) {
    if (held.live(j)) {
      dy[j] = g_in[held.column(j) / kVec];
      x_loaded[j] = x_in[held.column(j) / kVec];
    }
  }
  // The keep decisions, drawn while the loads are in flight.
  KeepWords<kVec> keep[kVectorsPerThread];
#pragma unroll
  for (int j = 0; j < kVectorsPerThread; ++j)
    if (options.drop && held.live(j)) keep[j] = vector_keep<kVec>(options, start, cursor, held.column(j));
  acc_t p[kVectorsPerThread][kVec];
  acc_t total = 0;  // sum(dP * P)
#pragma unroll
  for (int j = 0; j < kVectorsPerThread; ++j) {
    if (held.live(j)) {
      recompute_probabilities<T>(options, start, base2, log_sum_exp2, x_loaded[j], held.column(j), p[j]);
      acc_t g[kVec];
      convert_vector(vector_from_bits<T, kVec>(dy[j]), g);
#pragma unroll
      for (int e = 0; e < kVec; ++e) total += grad_probability(options, g[e], keep[j], e) * p[j][e];
    }
  }
  total = row_allreduce<kWarpPerRow>(total, Plus{}, acc_t(0), partials);
  const acc_t scale = static_cast<acc_t>(options.scale);
  Vector* out = reinterpret_cast<Vector*>(grad_input + me.row * n);
#pragma unroll
  for (int j = 0; j < kVectorsPerThread; ++j) {
    if (!held.in_row(j)) continue;
    Vector result;
    if (held.live(j)) {
      acc_t g[kVec];
      convert_vector(vector_from_bits<T, kVec>(dy[j]), g);  // again: dy is held as loaded, half the registers of g
#pragma unroll
      for (int e = 0; e < kVec; ++e)
        result.values[e] = convert_element<T>(scale * p[j][e] * (grad_probability(options, g[e], keep[j], e) - total));
    } else {
      result = zero_vector<T, kVec>();
    }
    out[held.column(j) / kVec] = result;
  }
}

// The backward of a row too long for registers, or not vectorizable, by a block: two passes
// over x and dy (the sum, then the write), P and the mask computed again in each. kStaged
// (16-byte vectors only): the row's x and dy are copied into shared memory first (their
// causally visible vectors), x's vectors then dy's, and the two passes read them there instead
// of from memory and L2.
template <typename T, int kVec, bool kStaged>
__device__ __forceinline__ void backward_long_row(const T* __restrict__ grad, const T* __restrict__ x,
                                                  const compute_t<T>* __restrict__ log_sum_exp,
                                                  T* __restrict__ grad_input, int64_t n, const RowOptions& options) {
  using acc_t = compute_t<T>;
  using Vector = AlignedVector<T, kVec>;
  using Word = typename VectorWord<static_cast<int>(sizeof(Vector))>::type;
  __shared__ acc_t warp_results[kWarpSize];
  extern __shared__ __align__(16) unsigned char staged_bytes[];
  const int64_t row = blockIdx.x;
  const RowStart start(options, row);
  const LogitUnits<acc_t> base2(options, kLog2e<acc_t>, true);
  const acc_t log_sum_exp2 = log_sum_exp[row] * kLog2e<acc_t>;
  const Vector* g_in = reinterpret_cast<const Vector*>(grad + row * n);
  const Vector* x_in = reinterpret_cast<const Vector*>(x + row * n);
  const int64_t vectors = n / kVec;
  const Word* staged_x = reinterpret_cast<const Word*>(staged_bytes);
  const Word* staged_dy = staged_x + vectors;
  if constexpr (kStaged) {
    const int64_t live = start.visible_vectors<kVec>(vectors);
    Word* staged = reinterpret_cast<Word*>(staged_bytes);
    stage_row_vectors(reinterpret_cast<const Word*>(x_in), staged, live, threadIdx.x, blockDim.x);
    stage_row_vectors(reinterpret_cast<const Word*>(g_in), staged + vectors, live, threadIdx.x, blockDim.x);
    mma::wait_copies<0>();
  }

  // dP and P of vector k, both passes: P recomputed, the keep decisions drawn through `cursor`.
  auto gradient_terms = [&](int64_t k, dropout_bits::MaskCursor& cursor, acc_t(&dp)[kVec], acc_t(&p)[kVec]) {
    acc_t dy[kVec];
    if constexpr (kStaged) {
      convert_vector(vector_from_bits<T, kVec>(staged_dy[k]), dy);
      recompute_probabilities<T>(options, start, base2, log_sum_exp2, staged_x[k], k * kVec, p);
    } else {
      convert_vector(g_in[k], dy);
      recompute_probabilities<T>(options, start, base2, log_sum_exp2, x_in[k], k * kVec, p);
    }
    KeepWords<kVec> keep;
    if (options.drop) keep = vector_keep<kVec>(options, start, cursor, k * kVec);
#pragma unroll
    for (int e = 0; e < kVec; ++e) dp[e] = grad_probability(options, dy[e], keep, e);
  };

  acc_t total = 0;
  {
    dropout_bits::MaskCursor cursor(options.dropout);
    for (int64_t k = threadIdx.x; k < vectors && start.visible(k * kVec); k += blockDim.x) {
      acc_t dp[kVec], p[kVec];
      gradient_terms(k, cursor, dp, p);
#pragma unroll
      for (int e = 0; e < kVec; ++e) total += dp[e] * p[e];
    }
  }
  total = block_allreduce(total, Plus{}, acc_t(0), warp_results);
  const acc_t scale = static_cast<acc_t>(options.scale);
  Vector* out = reinterpret_cast<Vector*>(grad_input + row * n);
  dropout_bits::MaskCursor cursor(options.dropout);
  for (int64_t k = threadIdx.x; k < vectors; k += blockDim.x) {
    Vector result;
    if (start.visible(k * kVec)) {
      acc_t dp[kVec], p[kVec];
      gradient_terms(k, cursor, dp, p);
#pragma unroll
      for (int e = 0; e < kVec; ++e) result.values[e] = convert_element<T>(scale * p[e] * (dp[e] - total));
    } else {
      result = zero_vector<T, kVec>();
    }
    out[k] = result;
  }
}

// Long or unvectorizable rows, two passes over memory.
template <typename T, int kVec>
__global__ void softmax_dropout_backward_online_kernel(const T* __restrict__ grad, const T* __restrict__ x,
                                                       const compute_t<T>* __restrict__ log_sum_exp,
                                                       T* __restrict__ grad_input, int64_t n,
                                                       const RowOptions options) {
  backward_long_row<T, kVec, false>(grad, x, log_sum_exp, grad_input, n, options);
}

// Long rows staged in shared memory, held to 64 registers a thread so that two blocks fit an
// SM (float16's took 68 unbounded, one block an SM: nothing to run while a block's copies land).
template <typename T, int kVec>
__global__ void __launch_bounds__(kOnlineThreads, 2)
    softmax_dropout_backward_staged_kernel(const T* __restrict__ grad, const T* __restrict__ x,
                                           const compute_t<T>* __restrict__ log_sum_exp, T* __restrict__ grad_input,
                                           int64_t n, const RowOptions options) {
  backward_long_row<T, kVec, true>(grad, x, log_sum_exp, grad_input, n, options);
}

// ---- launch ----

// The kernels' options from the host's description.
RowOptions row_options(const SoftmaxDropoutRows& rows, const char* op) {
  RowOptions o;
  const size_t dims = rows.sizes.size();
  const Shape leading(rows.sizes.begin(), rows.sizes.end() - 1);
  const Shape mask_strides = rows.mask.defined() ? rows.mask_strides : Shape(dims, 0);
  o.leading = make_strided_layout<2>(leading, {mask_strides.data(), rows.index_strides.data()}, op);
  o.mask_step = mask_strides[dims - 1];
  o.index_step = rows.index_strides[dims - 1];
  if (rows.index_strides == contiguous_strides(rows.sizes)) o.row_length = rows.sizes[dims - 1];
  if (rows.mask.defined()) {
    o.mask = rows.mask.raw_data();
    o.mask_kind = rows.mask.dtype() == kBool ? MaskKind::Bool : MaskKind::Additive;
    if (o.mask_step == 1) {
      // The largest power of two (up to 16) dividing the mask's address in elements and every
      // leading stride a row can step by.
      const int64_t element_size = static_cast<int64_t>(rows.mask.element_size());
      const auto address = static_cast<int64_t>(reinterpret_cast<uintptr_t>(o.mask));
      int alignment = 16;
      while (alignment > 1 && address % (alignment * element_size) != 0) alignment /= 2;
      for (size_t d = 0; d + 1 < dims; ++d)
        while (rows.sizes[d] > 1 && mask_strides[d] % alignment != 0) alignment /= 2;
      o.mask_vector_alignment = alignment;
    }
  }
  o.is_causal = rows.is_causal;
  if (rows.is_causal) o.causal_rows = IndexDivisor(rows.sizes[dims - 2]);
  o.scale = rows.scale;
  o.drop = rows.drop;
  o.dropout = rows.dropout;
  o.keep_scale = rows.dropout.scale();
  return o;
}

// Calls launch_rows / launch_online (cuda/row_kernels.cuh's launch_for_rows) with the vector
// width as a constant: 16-byte vectors where the row and pointers allow, else the online
// kernel one element at a time.
template <typename T, int kMaxElements, typename LaunchRows, typename LaunchOnline>
void launch_softmax_dropout(const Rows& rows, std::initializer_list<const void*> pointers, const char* op,
                            LaunchRows&& launch_rows, LaunchOnline&& launch_online) {
  with_vector_width<T>(rows.length, pointers, [&](auto vector_width) {
    constexpr int kVec = decltype(vector_width)::value;
    if constexpr (kVec == 1) {
      launch_online(vector_width, blocks_for_rows(rows.count, 1, op), kOnlineThreads);
    } else {
      launch_for_rows<kVec, kMaxElements>(
          rows, op,
          [&](auto per_thread, auto warp_per_row, unsigned int grid, int block_threads) {
            launch_rows(vector_width, per_thread, warp_per_row, grid, block_threads);
          },
          [&](unsigned int grid, int block_threads) { launch_online(vector_width, grid, block_threads); });
    }
  });
}

// The forward with at most kMaxElements elements a thread in the register kernels, or with 0
// kForwardElementsPerThread's choice for the dtype: the library runs 0,
// bench/experiments/softmax_dropout_shapes.cu 16 and 32.
template <int kMaxElements = 0>
void forward_rows(const Tensor& x, const SoftmaxDropoutRows& rows, const Tensor& y, const Tensor& log_sum_exp) {
  const char* op = "softmax_dropout";
  const Rows shape = rows_of(x);
  if (shape.count == 0) return;
  const RowOptions options = row_options(rows, op);
  DeviceGuard guard(x.device().index);
  const cudaStream_t stream = current_stream();
  dispatch_floating(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using acc_t = compute_t<T>;
    const T* in = static_cast<const T*>(x.raw_data());
    T* out = static_cast<T*>(y.raw_data());
    acc_t* lse = static_cast<acc_t*>(log_sum_exp.raw_data());
    launch_softmax_dropout<T, kMaxElements != 0 ? kMaxElements : kForwardElementsPerThread<T>>(
        shape, {in, out}, op,
        [&](auto vector_width, auto per_thread, auto warp_per_row, unsigned int grid, int block_threads) {
          softmax_dropout_rows_kernel<T, decltype(vector_width)::value, decltype(per_thread)::value,
                                      decltype(warp_per_row)::value>
              <<<grid, block_threads, 0, stream>>>(in, out, lse, shape.count, shape.length, options);
        },
        [&](auto vector_width, unsigned int grid, int block_threads) {
          constexpr int kVec = decltype(vector_width)::value;
          if constexpr (kVec > 1) {
            const int64_t staged_bytes = shape.length * static_cast<int64_t>(sizeof(T));
            if (fits_staged_rows(staged_bytes, 2, op)) {
              const auto kernel = softmax_dropout_staged_kernel<T, kVec>;
              allow_shared_memory(kernel, static_cast<int>(staged_bytes), op);
              kernel<<<grid, block_threads, static_cast<size_t>(staged_bytes), stream>>>(in, out, lse, shape.length,
                                                                                          options);
              return;
            }
          }
          softmax_dropout_online_kernel<T, kVec>
              <<<grid, block_threads, 0, stream>>>(in, out, lse, shape.length, options);
        });
    MG_CUDA_CHECK_LAUNCH(op);
  });
}

}  // namespace

void softmax_dropout_rows(const Tensor& x, const SoftmaxDropoutRows& rows, const Tensor& y,
                          const Tensor& log_sum_exp) {
  forward_rows(x, rows, y, log_sum_exp);
}

void softmax_dropout_backward_rows(const Tensor& grad, const Tensor& x, const Tensor& log_sum_exp,
                                   const SoftmaxDropoutRows& rows, const Tensor& grad_input) {
  const char* op = "softmax_dropout (backward)";
  const Rows shape = rows_of(x);
  if (shape.count == 0) return;
  const RowOptions options = row_options(rows, op);
  DeviceGuard guard(x.device().index);
  const cudaStream_t stream = current_stream();
  dispatch_floating(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using acc_t = compute_t<T>;
    const T* g = static_cast<const T*>(grad.raw_data());
    const T* in = static_cast<const T*>(x.raw_data());
    const acc_t* lse = static_cast<const acc_t*>(log_sum_exp.raw_data());
    T* out = static_cast<T*>(grad_input.raw_data());
    launch_softmax_dropout<T, kBackwardElementsPerThread>(
        shape, {g, in, out}, op,
        [&](auto vector_width, auto per_thread, auto warp_per_row, unsigned int grid, int block_threads) {
          softmax_dropout_backward_rows_kernel<T, decltype(vector_width)::value, decltype(per_thread)::value,
                                               decltype(warp_per_row)::value>
              <<<grid, block_threads, 0, stream>>>(g, in, lse, out, shape.count, shape.length, options);
        },
        [&](auto vector_width, unsigned int grid, int block_threads) {
          constexpr int kVec = decltype(vector_width)::value;
          if constexpr (kVec > 1) {
            const int64_t staged_bytes = 2 * shape.length * static_cast<int64_t>(sizeof(T));  // x and dy
            if (fits_staged_rows(staged_bytes, 2, op)) {
              const auto kernel = softmax_dropout_backward_staged_kernel<T, kVec>;
              allow_shared_memory(kernel, static_cast<int>(staged_bytes), op);
              kernel<<<grid, block_threads, static_cast<size_t>(staged_bytes), stream>>>(g, in, lse, out, shape.length,
                                                                                          options);
              return;
            }
          }
          softmax_dropout_backward_online_kernel<T, kVec>
              <<<grid, block_threads, 0, stream>>>(g, in, lse, out, shape.length, options);
        });
    MG_CUDA_CHECK_LAUNCH(op);
  });
}

}  // namespace cuda
}  // namespace minigrad
