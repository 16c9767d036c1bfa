// cross_entropy on the GPU: one kernel computes each row's loss and, in the same launch, the
// row's gradient; a second, small one scales the gradient by dy in the backward; a third counts
// the targets (Mean's divisor) and checks their range.
//
// Per row i with target t (ops/loss.cpp has the formulas and the CPU reference):
//   pass 1 reads the row once and folds each element into a running (max, sum of exp(x - max))
//          pair ("online" softmax: the sum is rescaled whenever the maximum grows) and the row's
//          sum of x (label smoothing's mean). One combine across the row's threads, then
//          loss_i = max + log(sum) - (1 - eps) x_it - eps sum_x / C.
//   pass 2 (when a gradient is wanted) takes the row again and writes
//          grad_ij = w_i (exp(x_ij - max) / sum - (1 - eps) [j == t] - eps / C).
// An ignored row reads nothing it uses: its loss is 0 and its gradient row zeros.
//
// Where pass 2 takes the row from. The rows that matter are long (a vocabulary: 50304 bf16 =
// 100 KB a row), far more than registers hold (256 threads x 32 elements is 8192). A block
// (up to 512 threads, two blocks an SM) holds a row; where two such rows fit an SM's shared
// memory (bf16 rows up to about 58000 classes on sm_90), each thread copies all of its
// vectors of the row there at once by cp.async before anything else ("staged": the whole row
// in one memory latency), folds them from there, and pass 2 reads them from there too. Longer
// rows, and GPUs with less shared memory, read the row into registers kUnroll vectors at a time
// and read it again for pass 2, from L2: at most two rows are in flight per SM, 264 on an
// H200's 132 SMs, 26 MB of bf16 rows of 50304, well within its L2. A short row (a warp each) is
// back in L1 or L2 a few hundred cycles after its first read. So the logits cross HBM once, the
// gradient once, and nothing else does: no float32 copy of the logits, no softmax tensor.
// Each dtype compiles three kernels: a warp per row (up to 4 vectors a lane), a block per row,
// a block per staged row.
//
// Rows are C elements long, C anything: a row starts at a different offset from a 16-byte
// boundary each (C = 50257 is odd). Each row is split into a head (the elements before its
// first 16-byte boundary, one per thread), whole 16-byte vectors, and a tail, so that every row
// is read as vectors. Pass 2 writes the gradient with the same split, which needs the gradient
// rows to sit at the same offsets as the logits' rows: true unless the logits are a view that
// starts off a 16-byte boundary, which then writes one element at a time.
//
// float16/bfloat16 and float32 compute in float, float64 in double. In float, exp(v) is
// 2^(v log2 e) on the hardware's ex2.approx (kernels/fast_math.h): a full-precision expf is
// about ten instructions, and the fold already spends about a dozen per element, near what a
// bf16 row at the copy rate leaves. ex2.approx is within 2 ulp for the terms that matter and
// flushes terms below 2^-126, which a sum of at least 1 (the maximum's own term) cannot show.
//
// Targets: ops/loss.cpp raises an error for a target outside [0, C) that is not ignore_index,
// from count_targets's count; the row kernel, run after that check, still never reads outside
// a row (such a target would give a NaN loss).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include <minigrad/core/dispatch.h>
#include <minigrad/cuda/block_reduce.cuh>
#include <minigrad/cuda/convert.cuh>
#include <minigrad/cuda/cross_entropy.h>
#include <minigrad/cuda/launch.cuh>
#include <minigrad/cuda/mma.cuh>  // cp.async
#include <minigrad/cuda/row_kernels.cuh>
#include <minigrad/cuda/runtime.h>
#include <minigrad/cuda/vector.cuh>
#include <minigrad/kernels/elementwise_functors.h>  // compute_t
#include <minigrad/kernels/fast_math.h>

namespace minigrad {
namespace cuda {
namespace {

// Vectors each thread loads before using any: four 16-byte loads in flight per thread. A batch
// that runs past the row's end loads only what is there, so the row's last vectors come in one
// batch (one memory latency) rather than one after another.
constexpr int kUnroll = 4;
// Rows of up to this many vectors per lane are held by a warp (bf16: C <= 1024), longer ones
// by a block with about this many vectors per thread, within [kMinBlockThreads, kMaxBlockThreads].
constexpr int64_t kVectorsPerLane = 4;
constexpr int64_t kVectorsPerBlockThread = 4;
constexpr int kMinBlockThreads = 64;
// At most 512 threads a block, and at most 64 registers a thread so that two blocks fit an SM
// (64K registers): while one block combines its row's statistics (a __syncthreads), the other
// can keep loads in flight. (double's fold needs more than 64 registers: one block an SM.)
// (Measured on the register path, no faster than one block of 1024 threads an SM: the rows
// waited on memory several times each either way, which the staged rows do once;
// docs/perf-notes.md.)
constexpr int kMaxBlockThreads = 512;
template <typename T>
constexpr int kBlocksPerSM = std::is_same_v<compute_t<T>, double> ? 1 : 2;
constexpr int kScaleThreads = 256;
constexpr int kCountThreads = 256;
constexpr int64_t kMaxGrid = 4096;  // grid-stride loops beyond that

// e^(v - shift) for elements measured against one shift (their row's maximum so far): v <= shift,
// or any v once the maximum is +inf, where the sum is +inf whatever the other terms are. See the
// top of the file for float: there v log2(e) - shift log2(e) is one fused multiply-add, the second
// product taken once per shift (v - shift, then times log2(e), were two instructions an element).
template <typename acc_t>
struct ShiftedExp {
  acc_t shift;
  acc_t shift_log2;  // shift * log2(e)
  __device__ __forceinline__ explicit ShiftedExp(acc_t s) : shift(s), shift_log2(s * kLog2e<acc_t>) {}
  __device__ __forceinline__ acc_t operator()(acc_t v) const {
    if constexpr (std::is_same_v<acc_t, float>)
      return fast_math::fast_exp2(fmaf(v, kLog2e<float>, -shift_log2));
    else
      return exp(v - shift);
  }
};

// `sum`, measured against the maximum `from`, measured against the larger `to`. In float by the
// hardware's exp2 and a select: branched around where the maximum did not grow, as rescale()
// does, some lane of each warp nearly always had a new maximum, so warps ran the precise expf
// (11 instructions) for almost every vector. Equal maxima (both infinite included) keep the sum.
template <typename acc_t>
__device__ __forceinline__ acc_t rescaled(acc_t sum, acc_t from, acc_t to) {
  if constexpr (std::is_same_v<acc_t, float>)
    return sum * (from == to ? 1.0f : fast_math::fast_exp2((from - to) * kLog2e<float>));
  else
    return rescale(sum, from, to);
}

// ---- one row: where its vectors are ----

// A row of n elements starting at `row`: `head` elements up to the first 16-byte boundary,
// then `vectors` whole 16-byte vectors; the rest (fewer than a vector) is the tail.
struct RowSplit {
  int64_t head;
  int64_t vectors;
};

template <typename T>
__device__ __forceinline__ RowSplit split_row(const T* row, int64_t n) {
  constexpr int kVec = kElementsPer16Bytes<T>;
  const int64_t misaligned = static_cast<int64_t>(reinterpret_cast<uintptr_t>(row) % 16 / sizeof(T));
  const int64_t head = ::min(n, misaligned == 0 ? int64_t{0} : kVec - misaligned);
  return {head, (n - head) / kVec};
}

// ---- pass 1: the row's statistics ----

template <typename acc_t>
struct RowStats {
  MaxSum<acc_t> max_sum;  // the maximum, and the sum of exp(x - maximum)
  acc_t sum_x;            // the sum of the elements: label smoothing's mean
};

template <typename acc_t>
struct CombineRowStats {
  __device__ RowStats<acc_t> operator()(const RowStats<acc_t>& a, const RowStats<acc_t>& b) const {
    return {CombineMaxSum<acc_t>{}(a.max_sum, b.max_sum), a.sum_x + b.sum_x};
  }
};

// Folds K elements (a vector, or one) into s: one rescale of the running sum for the K.
// fmax ignores a NaN in the maximum, and the NaN's own term then makes the sum NaN. While every
// element so far is -inf (or NaN) the terms are taken against 0 instead of the maximum: a row
// that starts with -inf would otherwise compute exp(-inf - -inf) = NaN. Against 0 too once the
// maximum is +inf, as logsumexp does on the CPU: the +inf element's term is then +inf, and so is
// the row's sum and its lse, where exp(inf - inf) would make them NaN.
// The sum of the elements is label smoothing's alone: without smoothing it is not taken (one
// addition an element; the flag is the same for every thread of the launch).
template <typename acc_t, int K>
__device__ __forceinline__ void fold_values(RowStats<acc_t>& s, const acc_t (&v)[K], bool with_sum_x) {
  acc_t group_max = v[0];
#pragma unroll
  for (int e = 1; e < K; ++e) group_max = fmax(group_max, v[e]);
  const acc_t max = fmax(s.max_sum.max, group_max);
  const ShiftedExp<acc_t> exp_shifted(isinf(max) ? acc_t(0) : max);
  acc_t sum = rescaled(s.max_sum.sum, s.max_sum.max, max);
#pragma unroll
  for (int e = 0; e < K; ++e) sum += exp_shifted(v[e]);
  if (with_sum_x) {
#pragma unroll
    for (int e = 0; e < K; ++e) s.sum_x += v[e];
  }
  s.max_sum = {max, sum};
}

// One element, and one vector held as its load's words (a predicated load into a vector of T
// was merged into its registers 16 bits at a time, and each waited for the one before).
template <typename T, typename acc_t>
__device__ __forceinline__ void fold_element(RowStats<acc_t>& s, T x, bool with_sum_x) {
  const acc_t v[1] = {convert_element<acc_t>(x)};
  fold_values(s, v, with_sum_x);
}
template <typename T, typename acc_t, typename Word>
__device__ __forceinline__ void fold_vector(RowStats<acc_t>& s, const Word& loaded, bool with_sum_x) {
  constexpr int kVec = kElementsPer16Bytes<T>;
  acc_t v[kVec];
  convert_vector(vector_from_bits<T, kVec>(loaded), v);
  fold_values(s, v, with_sum_x);
}

template <typename T>
using RowWord = typename VectorWord<static_cast<int>(sizeof(AlignedVector<T, kElementsPer16Bytes<T>>))>::type;

// This thread's share of the row's statistics: the head and tail elements one per thread, the
// vectors every `threads`-th from `thread`, kUnroll loads at a time.
template <typename T, typename acc_t = compute_t<T>>
__device__ __forceinline__ RowStats<acc_t> fold_row(const T* __restrict__ x, int64_t n, int thread, int threads,
                                                    bool with_sum_x) {
  using Word = RowWord<T>;
  RowStats<acc_t> s{{acc_t(-INFINITY), acc_t(0)}, acc_t(0)};
  const RowSplit split = split_row(x, n);
  if (thread < split.head) fold_element(s, x[thread], with_sum_x);
  const Word* body = reinterpret_cast<const Word*>(x + split.head);
  for (int64_t k = thread; k < split.vectors; k += kUnroll * threads) {
    Word loaded[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (k + u * threads < split.vectors) loaded[u] = body[k + u * threads];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (k + u * threads < split.vectors) fold_vector<T>(s, loaded[u], with_sum_x);
  }
  const int64_t tail = split.head + split.vectors * kElementsPer16Bytes<T>;
  if (tail + thread < n) fold_element(s, x[tail + thread], with_sum_x);  // the tail is shorter than a vector: one each
  return s;
}

// ---- a row staged in shared memory ----
//
// The register path above has each thread's loads in flight kUnroll vectors at a time, so a
// row of 50304 bf16 (12-13 vectors a thread in blocks of 512) waits on memory four times in
// turn, and a block holds its SM's share of the bandwidth only while its loads are out. Staged
// (cuda/row_kernels.cuh's stage_row_vectors), the row's body arrives in one memory latency, and
// pass 2 reads it from shared memory instead of from L2.

// Issues the copies of this thread's vectors of the row's body (vector k to staged[k]).
template <typename T>
__device__ __forceinline__ void stage_row(const T* x, RowSplit split, RowWord<T>* staged, int thread, int threads) {
  stage_row_vectors(reinterpret_cast<const RowWord<T>*>(x + split.head), staged, split.vectors, thread, threads);
}

// fold_row, with the vectors from the staged copy (after wait_copies).
template <typename T, typename acc_t = compute_t<T>>
__device__ __forceinline__ RowStats<acc_t> fold_staged_row(const T* __restrict__ x, RowSplit split,
                                                           const RowWord<T>* staged, int64_t n, int thread,
                                                           int threads, bool with_sum_x) {
  RowStats<acc_t> s{{acc_t(-INFINITY), acc_t(0)}, acc_t(0)};
  if (thread < split.head) fold_element(s, x[thread], with_sum_x);
  for (int64_t k = thread; k < split.vectors; k += threads) fold_vector<T>(s, staged[k], with_sum_x);
  const int64_t tail = split.head + split.vectors * kElementsPer16Bytes<T>;
  if (tail + thread < n) fold_element(s, x[tail + thread], with_sum_x);
  return s;
}

// ---- pass 2: writing a row ----

// Vector k of a row's body (first element `first` of the row), from its loaded words.
template <typename T, typename Value>
__device__ __forceinline__ void store_vector(const RowWord<T>& loaded, AlignedVector<T, kElementsPer16Bytes<T>>* dst,
                                             int64_t k, int64_t first, Value value) {
  using acc_t = compute_t<T>;
  constexpr int kVec = kElementsPer16Bytes<T>;
  acc_t v[kVec];
  convert_vector(vector_from_bits<T, kVec>(loaded), v);
  AlignedVector<T, kVec> result;
#pragma unroll
  for (int e = 0; e < kVec; ++e) result.values[e] = convert_element<T>(value(v[e], first + e));
  dst[k] = result;
}

// out[j] = value(x[j], j) for the n elements of a row, x and out of one type. Vectorized: out
// and x sit at the same offset from a 16-byte boundary, and the row goes as head, vectors,
// tail; otherwise one element per thread. x may be out (scaling in place): each batch loads
// all its vectors before it stores any, and a thread stores only what it loaded.
template <typename T, typename Value>
__device__ __forceinline__ void write_row(const T* x, T* out, int64_t n, bool vectorized, int64_t thread,
                                          int64_t threads, Value value) {
  using acc_t = compute_t<T>;
  constexpr int kVec = kElementsPer16Bytes<T>;
  using Vector = AlignedVector<T, kVec>;
  auto element = [&](int64_t j) { out[j] = convert_element<T>(value(convert_element<acc_t>(x[j]), j)); };
  if (!vectorized) {
    for (int64_t j = thread; j < n; j += threads) element(j);
    return;
  }
  const RowSplit split = split_row(out, n);
  if (thread < split.head) element(thread);
  using Word = RowWord<T>;  // as in fold_row
  const Word* in = reinterpret_cast<const Word*>(x + split.head);
  Vector* dst = reinterpret_cast<Vector*>(out + split.head);
  for (int64_t k = thread; k < split.vectors; k += kUnroll * threads) {
    Word loaded[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (k + u * threads < split.vectors) loaded[u] = in[k + u * threads];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (k + u * threads < split.vectors)
        store_vector<T>(loaded[u], dst, k + u * threads, split.head + (k + u * threads) * kVec, value);
  }
  const int64_t tail = split.head + split.vectors * kVec;
  if (tail + thread < n) element(tail + thread);
}

// write_row from a staged row (out at the same offsets from 16-byte boundaries as x): the
// thread's vectors from its own staged copies, head and tail from x.
template <typename T, typename Value>
__device__ __forceinline__ void write_staged_row(const T* x, RowSplit split, const RowWord<T>* staged, T* out,
                                                 int64_t n, int thread, int threads, Value value) {
  using acc_t = compute_t<T>;
  constexpr int kVec = kElementsPer16Bytes<T>;
  auto element = [&](int64_t j) { out[j] = convert_element<T>(value(convert_element<acc_t>(x[j]), j)); };
  if (thread < split.head) element(thread);
  auto* dst = reinterpret_cast<AlignedVector<T, kVec>*>(out + split.head);
  for (int64_t k = thread; k < split.vectors; k += threads)
    store_vector<T>(staged[k], dst, k, split.head + k * kVec, value);
  const int64_t tail = split.head + split.vectors * kVec;
  if (tail + thread < n) element(tail + thread);
}

// The gradient row of an ignored target: zeros, without reading the logits.
template <typename T>
__device__ __forceinline__ void zero_row(T* out, int64_t n, int thread, int threads) {
  constexpr int kVec = kElementsPer16Bytes<T>;
  using Vector = AlignedVector<T, kVec>;
  const Vector zeros = zero_vector<T, kVec>();
  const T zero = zeros.values[0];
  const RowSplit split = split_row(out, n);
  if (thread < split.head) out[thread] = zero;
  Vector* dst = reinterpret_cast<Vector*>(out + split.head);
  for (int64_t k = thread; k < split.vectors; k += threads) dst[k] = zeros;
  const int64_t tail = split.head + split.vectors * kVec;
  if (tail + thread < n) out[tail + thread] = zero;
}

// ---- the kernels ----

template <typename T>
struct CrossEntropyArgs {
  const T* logits;  // [rows, classes], contiguous
  const int64_t* targets;
  int64_t target_stride;
  compute_t<T>* loss;           // [rows]
  T* grad;                      // [rows, classes], contiguous; null: no gradient
  const int64_t* counted_rows;  // Mean's divisor, on the device; null: weight 1
  int64_t rows;
  int64_t classes;
  int64_t ignore_index;
  compute_t<T> smoothing;
  bool same_alignment;  // grad's rows at the same offsets from 16-byte boundaries as the logits'
};

// One row per warp (kWarpPerRow: kWarpsPerBlock rows a block) or per block; kStaged (block
// rows only): the row's vectors copied into dynamic shared memory first (a row staged in shared
// memory, above).
template <typename T, bool kWarpPerRow, bool kStaged>
__global__ void __launch_bounds__(kWarpPerRow ? kWarpsPerBlock * kWarpSize : kMaxBlockThreads,
                                       kWarpPerRow ? 1 : kBlocksPerSM<T>)
    cross_entropy_kernel(const CrossEntropyArgs<T> a) {
  using acc_t = compute_t<T>;
  static_assert(!(kStaged && kWarpPerRow), "only block rows are staged");
  __shared__ RowStats<acc_t> partials[kWarpSize];
  extern __shared__ __align__(16) uint8_t staged_bytes[];
  RowWord<T>* staged = reinterpret_cast<RowWord<T>*>(staged_bytes);
  const RowThread<kWarpPerRow> me;
  if (me.row >= a.rows) return;  // a whole warp, or the whole block: the combines see all their threads
  const int64_t n = a.classes;
  const T* x = a.logits + me.row * n;
  T* grad = a.grad == nullptr ? nullptr : a.grad + me.row * n;
  const RowSplit split = split_row(x, n);
  // The copies go out before the target is known: an ignored row (rare) waits for them and
  // drops them, where waiting for the target first would add a memory latency to every row.
  if constexpr (kStaged) stage_row(x, split, staged, me.thread, me.threads_per_row);
  const int64_t target = a.targets[me.row * a.target_stride];
  if (target == a.ignore_index) {
    if constexpr (kStaged) mma::wait_copies<0>();  // no thread exits with copies in flight
    if (me.thread == 0) a.loss[me.row] = acc_t(0);
    if (grad != nullptr) zero_row(grad, n, me.thread, me.threads_per_row);
    return;
  }
  // The target's logit, loaded first so that its latency hides behind the row's.
  acc_t picked = 0;
  if (me.thread == 0) picked = target >= 0 && target < n ? convert_element<acc_t>(x[target]) : acc_t(NAN);

  RowStats<acc_t> s;
  if constexpr (kStaged) {
    mma::wait_copies<0>();
    s = fold_staged_row(x, split, staged, n, me.thread, me.threads_per_row, a.smoothing != acc_t(0));
  } else {
    s = fold_row(x, n, me.thread, me.threads_per_row, a.smoothing != acc_t(0));
  }
  s = row_allreduce<kWarpPerRow>(s, CombineRowStats<acc_t>{},
                                 RowStats<acc_t>{{acc_t(-INFINITY), acc_t(0)}, acc_t(0)}, partials);
  const acc_t max = s.max_sum.max;
  const acc_t sum = s.max_sum.sum;
  if (me.thread == 0) {
    acc_t loss = max + log(sum) - (acc_t(1) - a.smoothing) * picked;
    // Only with smoothing: a row with a -inf logit has sum_x = -inf, and 0 * -inf is NaN.
    if (a.smoothing != acc_t(0)) loss -= a.smoothing * (s.sum_x / static_cast<acc_t>(n));
    a.loss[me.row] = loss;
  }
  if (grad == nullptr) return;

  // w (exp(x - max) / sum - (1 - eps) [j == t] - eps / C), with w / sum, w eps / C and
  // w (1 - eps) taken once a row.
  const acc_t weight = a.counted_rows == nullptr ? acc_t(1) : acc_t(1) / static_cast<acc_t>(*a.counted_rows);
  // As fold_values measured the terms, except for a +inf maximum: there the sum is +inf, and
  // against the maximum the row's probabilities are 0 and NaN (at the +inf) as on the CPU.
  const ShiftedExp<acc_t> exp_shifted(max == -INFINITY ? acc_t(0) : max);
  const acc_t probability_scale = weight / sum;
  const acc_t uniform = weight * a.smoothing / static_cast<acc_t>(n);
  const acc_t on_target = weight * (acc_t(1) - a.smoothing);
  auto gradient = [=](acc_t v, int64_t) { return exp_shifted(v) * probability_scale - uniform; };
  if (kStaged && a.same_alignment)
    write_staged_row(x, split, staged, grad, n, me.thread, me.threads_per_row, gradient);
  else
    write_row(x, grad, n, a.same_alignment, me.thread, me.threads_per_row, gradient);
  // The target's element, written again with its term -w (1 - eps) by the thread that loaded
  // its logit, once the row's writes are done (the barrier orders the two stores): comparing
  // every element's column with the target cost 3 instructions an element.
  if constexpr (kWarpPerRow)
    __syncwarp();
  else
    __syncthreads();
  if (me.thread == 0 && target >= 0 && target < n)
    grad[target] = convert_element<T>(gradient(picked, target) - on_target);
}

// grad times dy in place. A 0-dim dy (dy_stride 0): one factor, grad as one flat run of
// elements, the whole grid over it. A [N] dy: a warp per row, each with its own factor. A
// factor of 1 leaves its elements unread.
template <typename T>
__global__ void __launch_bounds__(kScaleThreads)
    scale_grad_kernel(T* grad, const T* dy, int64_t dy_stride, int64_t rows, int64_t n) {
  using acc_t = compute_t<T>;
  if (dy_stride == 0) {
    const acc_t factor = convert_element<acc_t>(dy[0]);
    if (factor == acc_t(1)) return;
    const int64_t thread = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    write_row(grad, grad, rows * n, true, thread, static_cast<int64_t>(gridDim.x) * blockDim.x,
              [=](acc_t v, int64_t) { return v * factor; });
    return;
  }
  const int warps_per_block = blockDim.x / kWarpSize;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * warps_per_block;
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * warps_per_block + threadIdx.x / kWarpSize; row < rows;
       row += warps) {
    const acc_t factor = convert_element<acc_t>(dy[row * dy_stride]);
    if (factor == acc_t(1)) continue;
    T* g = grad + row * n;
    write_row(g, g, n, true, threadIdx.x % kWarpSize, kWarpSize, [=](acc_t v, int64_t) { return v * factor; });
  }
}

// counts[0] += the targets that are not ignore_index, counts[1] += those outside [0, classes).
__global__ void __launch_bounds__(kCountThreads)
    count_targets_kernel(const int64_t* targets, int64_t stride, int64_t n, int64_t classes, int64_t ignore_index,
                         unsigned long long* counts) {
  unsigned long long counted = 0, out_of_range = 0;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = targets[i * stride];
    if (t == ignore_index) continue;
    ++counted;
    if (t < 0 || t >= classes) ++out_of_range;
  }
  // Integer sums: the same whatever order the warps' atomics arrive in.
  counted = warp_allreduce(counted, Plus{});
  out_of_range = warp_allreduce(out_of_range, Plus{});
  if (threadIdx.x % kWarpSize == 0) {
    if (counted != 0) atomicAdd(&counts[0], counted);
    if (out_of_range != 0) atomicAdd(&counts[1], out_of_range);
  }
}

unsigned int grid_of(int64_t work, int64_t per_block) {
  return static_cast<unsigned int>(std::clamp<int64_t>((work + per_block - 1) / per_block, 1, kMaxGrid));
}

}  // namespace

void cross_entropy_count_targets(const Tensor& targets, int64_t classes, int64_t ignore_index, const Tensor& counts) {
  const char* op = "cross_entropy (targets)";
  DeviceGuard guard(targets.device().index);
  const cudaStream_t stream = current_stream();
  MG_CUDA_CHECK(cudaMemsetAsync(counts.raw_data(), 0, 2 * sizeof(int64_t), stream), op);
  const int64_t n = targets.numel();
  if (n == 0) return;
  count_targets_kernel<<<grid_of(n, kCountThreads), kCountThreads, 0, stream>>>(
      targets.data_ptr<int64_t>(), targets.stride(0), n, classes, ignore_index,
      static_cast<unsigned long long*>(counts.raw_data()));
  MG_CUDA_CHECK_LAUNCH(op);
}

void cross_entropy_rows(const Tensor& logits, const Tensor& targets, const CrossEntropyRows& options,
                        const Tensor& loss_rows, const Tensor& grad) {
  const char* op = "cross_entropy";
  const int64_t rows = logits.size(0);
  if (rows == 0) return;
  DeviceGuard guard(logits.device().index);
  const cudaStream_t stream = current_stream();
  dispatch_floating(logits.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using acc_t = compute_t<T>;
    CrossEntropyArgs<T> a;
    a.logits = static_cast<const T*>(logits.raw_data());
    a.targets = targets.data_ptr<int64_t>();
    a.target_stride = targets.stride(0);
    a.loss = static_cast<acc_t*>(loss_rows.raw_data());
    a.grad = grad.defined() ? static_cast<T*>(grad.raw_data()) : nullptr;
    a.counted_rows = options.counted_rows.defined() ? options.counted_rows.data_ptr<int64_t>() : nullptr;
    a.rows = rows;
    a.classes = logits.size(1);
    a.ignore_index = options.ignore_index;
    a.smoothing = static_cast<acc_t>(options.label_smoothing);
    // The rows have one length, so if the first rows of logits and grad start at the same
    // offset from a 16-byte boundary, every pair of rows does.
    a.same_alignment =
        a.grad == nullptr || (reinterpret_cast<uintptr_t>(a.logits) - reinterpret_cast<uintptr_t>(a.grad)) % 16 == 0;

    constexpr int kVec = kElementsPer16Bytes<T>;
    const int64_t vectors = (a.classes + kVec - 1) / kVec;
    if (vectors <= kVectorsPerLane * kWarpSize) {
      cross_entropy_kernel<T, true, false>
          <<<blocks_for_rows(rows, kWarpsPerBlock, op), kWarpsPerBlock * kWarpSize, 0, stream>>>(a);
    } else {
      // Whole warps, about kVectorsPerBlockThread vectors each.
      const int64_t per_warp = kVectorsPerBlockThread * kWarpSize;
      const int64_t warps = (vectors + per_warp - 1) / per_warp;
      const int threads =
          static_cast<int>(std::clamp<int64_t>(warps * kWarpSize, kMinBlockThreads, kMaxBlockThreads));
      const unsigned int grid = blocks_for_rows(rows, 1, op);
      // A row's vectors (at most `vectors` 16-byte vectors, whatever its head) staged in shared
      // memory where kBlocksPerSM blocks of them fit an SM; otherwise the register path.
      const int64_t staged_bytes = vectors * 16;
      if (fits_staged_rows(staged_bytes, kBlocksPerSM<T>, op)) {
        auto kernel = cross_entropy_kernel<T, false, true>;
        allow_shared_memory(kernel, static_cast<int>(staged_bytes), op);
        kernel<<<grid, threads, static_cast<size_t>(staged_bytes), stream>>>(a);
      } else {
        cross_entropy_kernel<T, false, false><<<grid, threads, 0, stream>>>(a);
      }
    }
    MG_CUDA_CHECK_LAUNCH(op);
  });
}

void cross_entropy_scale_grad(const Tensor& grad, const Tensor& dy) {
  const char* op = "cross_entropy (backward)";
  const int64_t rows = grad.size(0), n = grad.size(1);
  if (grad.numel() == 0) return;
  DeviceGuard guard(grad.device().index);
  const cudaStream_t stream = current_stream();
  const int64_t dy_stride = dy.dim() == 0 ? 0 : dy.stride(0);
  dispatch_floating(grad.dtype(), [&](auto tag) {
    using T = decltype(tag);
    constexpr int kVec = kElementsPer16Bytes<T>;
    const unsigned int grid = dy_stride == 0 ? grid_of(rows * n, int64_t{kScaleThreads} * kVec)
                                             : grid_of(rows, kScaleThreads / kWarpSize);
    scale_grad_kernel<T><<<grid, kScaleThreads, 0, stream>>>(static_cast<T*>(grad.raw_data()),
                                                             static_cast<const T*>(dy.raw_data()), dy_stride, rows, n);
    MG_CUDA_CHECK_LAUNCH(op);
  });
}

}  // namespace cuda
}  // namespace minigrad
