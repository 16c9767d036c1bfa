#pragma once
// The launch machinery of the row kernels: kernels that reduce each contiguous row of a
// tensor along its last dim and then write it, elementwise (softmax, softmax with dropout,
// the normalizations). The kernels themselves live with their op; this header has what
// they share:
//  - how a row is held: rows of up to kMaxRowThreads x kElementsPerThread elements (8192;
//    a kernel that needs more registers an element asks for fewer a thread) stay in
//    registers from the load to the write, so each input is read once and each output
//    written once. Up to kWarpSize x kElementsPerThread elements (1024) a warp holds a row
//    (kWarpsPerBlock rows a block: shuffles only, no barrier); longer rows get a block of
//    just enough threads (64 to 256), so that many rows are in flight on each SM while
//    their reductions wait on barriers. Longer rows still go to an op's "online" kernel, a
//    block of kOnlineThreads per row.
//  - RowThread (which row a thread works on) and row_allreduce (the combine across a row's
//    threads); MaxSum, fold and CombineMaxSum, the running (max, sum) of the online kernels;
//  - the launch choices: the vector width (16-byte vectors where the row length and the
//    pointers allow) and the kernel for the row length (launch_for_rows);
//  - rows staged in shared memory (stage_row_vectors), for the rows too long for registers.
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <type_traits>

#include <minigrad/core/error.h>
#include <minigrad/core/tensor.h>
#include <minigrad/cuda/block_reduce.cuh>
#include <minigrad/cuda/mma.cuh>  // cp.async
#include <minigrad/cuda/vector.cuh>

namespace minigrad {
namespace cuda {

// Elements each thread holds in registers, at most (unless a kernel asks for fewer).
constexpr int kElementsPerThread = 32;
constexpr int kWarpsPerBlock = 4;
constexpr int kMaxRowThreads = 256;
constexpr int kOnlineThreads = 512;

struct Plus {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};
struct Max {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return fmax(a, b);
  }
};

// Combines one value per thread across the threads of a row: shuffles when a warp holds
// the row, the block's combine (a barrier) when the row has the block to itself.
template <bool kWarpPerRow, typename T, typename Combine>
__device__ __forceinline__ T row_allreduce(T value, Combine combine, T identity, T (&shared)[kWarpSize]) {
  if constexpr (kWarpPerRow)
    return warp_allreduce(value, combine);
  else
    return block_allreduce(value, combine, identity, shared);
}

// log2(e) and ln(2) in the row kernels' accumulation type: exp(v) = exp2(v log2(e)), and exp2 is
// one instruction on the GPU (kernels/fast_math.h); a base-2 logarithm times ln(2) is a natural
// one.
template <typename acc_t>
constexpr acc_t kLog2e = acc_t(1.44269504088896340736);
template <typename acc_t>
constexpr acc_t kLn2 = acc_t(0.69314718055994530942);

// ---- the running (max, sum) pair of the online softmax kernels (softmax, softmax_dropout) ----
// One read of a long row gives its maximum and the sum of exp(element - max): the sum is
// rescaled whenever the maximum grows.

template <typename acc_t>
struct MaxSum {
  acc_t max;  // the largest element so far (-inf before any)
  acc_t sum;  // sum of exp(element - max) so far
};

// `sum`, measured against the maximum `from`, measured against the larger `to`.
template <typename acc_t>
__device__ __forceinline__ acc_t rescale(acc_t sum, acc_t from, acc_t to) {
  return from == to ? sum : sum * exp(from - to);
}

// A -inf element adds exp(-inf - max) = 0 whatever the maximum, so it is skipped: that also
// keeps a row that starts with -inf from computing -inf - (-inf) = NaN.
template <typename acc_t>
__device__ __forceinline__ MaxSum<acc_t> fold(MaxSum<acc_t> s, acc_t x) {
  if (x == -INFINITY) return s;
  const acc_t max = fmax(s.max, x);
  return {max, rescale(s.sum, s.max, max) + exp(x - max)};
}

template <typename acc_t>
struct CombineMaxSum {
  __device__ MaxSum<acc_t> operator()(MaxSum<acc_t> a, MaxSum<acc_t> b) const {
    const acc_t max = fmax(a.max, b.max);
    return {max, rescale(a.sum, a.max, max) + rescale(b.sum, b.max, max)};
  }
};

// Which row this thread works on, and its place among the row's threads.
template <bool kWarpPerRow>
struct RowThread {
  int64_t row;
  int thread;
  int threads_per_row;
  __device__ RowThread()
      : row(kWarpPerRow ? static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize : blockIdx.x),
        thread(kWarpPerRow ? threadIdx.x % kWarpSize : threadIdx.x),
        threads_per_row(kWarpPerRow ? kWarpSize : blockDim.x) {}
};


// ---- a row staged in shared memory ----
// A block looping over a row in global memory has each thread's loads in flight a vector or a
// few at a time, so a long row waits on memory several times in turn, and every pass after the
// first reads it again from L2. Staged, each thread copies all of its 16-byte vectors of the row
// (k = thread, thread + threads, ... below `vectors`) into shared memory at once by cp.async (no
// registers held while they are in flight): the row arrives in about one memory latency, and
// every pass reads it from shared memory. A thread reads back only the vectors it copied, once
// its own mma::wait_copies<0>() has returned, so no barrier guards them.
template <typename Word>
__device__ __forceinline__ void stage_row_vectors(const Word* row, Word* staged, int64_t vectors, int thread,
                                                  int threads) {
  for (int64_t k = thread; k < vectors; k += threads) mma::copy_chunk_async(&staged[k], &row[k], true);
  mma::commit_copies();
}

// Calls launch(std::integral_constant<int, kVec>{}) with kVec the elements per 16-byte
// vector of T when rows of n elements at these pointers allow vector access (n a multiple
// of it, pointers aligned: then every row is aligned), else with 1.
template <typename T, typename Launch>
void with_vector_width(int64_t n, std::initializer_list<const void*> pointers, Launch&& launch) {
  constexpr int kVec = kElementsPer16Bytes<T>;
  bool vectorized = n % kVec == 0;
  for (const void* p : pointers) vectorized = vectorized && is_aligned_for<AlignedVector<T, kVec>>(p);
  if (vectorized)
    launch(std::integral_constant<int, kVec>{});
  else
    launch(std::integral_constant<int, 1>{});
}

// Calls launch(std::integral_constant<int, P>{}) with P the smallest power of two at least
// vectors_per_thread (and at most kMax): one compiled kernel per bucket of row lengths.
template <int kMax, int P = 1, typename Launch>
void with_vectors_per_thread(int64_t vectors_per_thread, Launch&& launch) {
  if constexpr (P < kMax) {
    if (vectors_per_thread > P) return with_vectors_per_thread<kMax, P * 2>(vectors_per_thread, launch);
  }
  launch(std::integral_constant<int, P>{});
}

// The rows of a contiguous tensor along its last dim: how many, and how long.
struct Rows {
  int64_t count = 0;
  int64_t length = 0;
};

inline Rows rows_of(const Tensor& t) {
  const int64_t length = t.dim() == 0 ? 1 : t.size(-1);
  return {length == 0 ? 0 : t.numel() / length, length};
}

inline unsigned int blocks_for_rows(int64_t rows, int64_t rows_per_block, const char* op) {
  const int64_t blocks = (rows + rows_per_block - 1) / rows_per_block;
  MG_CHECK(blocks <= std::numeric_limits<int32_t>::max(), "{}: {} rows exceed the CUDA grid", op, rows);
  return static_cast<unsigned int>(blocks);
}

// Picks the kernel for the row length. Rows of up to kMaxRowThreads * kMaxElements elements
// go to launch_rows(vectors_per_thread, warp_per_row, grid, block_threads) (two integral
// constants, then the launch shape): a warp per row up to kWarpSize * kMaxElements, with
// the fewest vectors per lane that hold it (one compiled kernel per power of two), else a
// block of the fewest whole warps that hold the row. Longer rows go to
// launch_online(grid, block_threads). kMaxElements (a thread's share of a row, at most) is
// kElementsPerThread unless a kernel keeps more than one value per element.
template <int kVec, int kMaxElements = kElementsPerThread, typename LaunchRows, typename LaunchOnline>
void launch_for_rows(const Rows& rows, const char* op, LaunchRows&& launch_rows, LaunchOnline&& launch_online) {
  if (rows.length > int64_t{kMaxRowThreads} * kMaxElements) {
    launch_online(blocks_for_rows(rows.count, 1, op), kOnlineThreads);
    return;
  }
  constexpr int kMaxVectorsPerThread = kMaxElements / kVec;
  const int64_t vectors = rows.length / kVec;
  if (rows.length <= int64_t{kWarpSize} * kMaxElements) {
    const unsigned int grid = blocks_for_rows(rows.count, kWarpsPerBlock, op);
    with_vectors_per_thread<kMaxVectorsPerThread>((vectors + kWarpSize - 1) / kWarpSize, [&](auto per_lane) {
      launch_rows(per_lane, std::true_type{}, grid, kWarpsPerBlock * kWarpSize);
    });
    return;
  }
  const int64_t vectors_per_warp = int64_t{kWarpSize} * kMaxVectorsPerThread;
  const int threads = static_cast<int>((vectors + vectors_per_warp - 1) / vectors_per_warp) * kWarpSize;
  launch_rows(std::integral_constant<int, kMaxVectorsPerThread>{}, std::false_type{}, blocks_for_rows(rows.count, 1, op),
              threads);
}

}  // namespace cuda
}  // namespace minigrad
