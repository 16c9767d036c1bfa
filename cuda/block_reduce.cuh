#pragma once
// Combining one value per thread across a warp and across a block: the last step of every
// reduction kernel (cuda/reduce.cu, cuda/softmax.cu).
//
// Inside a warp, values move through registers with shuffles, five steps for 32 lanes, no
// shared memory and no barrier. Across the warps of a block, each warp's result goes
// through shared memory once. The order of the combines is fixed by the lane and warp
// numbers, so a reduction gives the same bits on every run.
#include <cstring>

namespace minigrad {
namespace cuda {

constexpr int kWarpSize = 32;
constexpr unsigned kFullWarp = 0xffffffffu;

// Shuffles any trivially copyable value (a float, a double, a {value, index} pair) as
// 32-bit words: the hardware shuffles 32 bits at a time anyway.
template <typename T>
__device__ __forceinline__ T shuffle_xor(const T& value, int lane_mask) {
  constexpr int kWords = (sizeof(T) + 3) / 4;
  int words[kWords] = {};
  memcpy(words, &value, sizeof(T));
#pragma unroll
  for (int w = 0; w < kWords; ++w) words[w] = __shfl_xor_sync(kFullWarp, words[w], lane_mask);
  T out;
  memcpy(&out, words, sizeof(T));
  return out;
}

// Every lane gets combine() of the 32 lanes' values. A butterfly: at each step a lane
// combines its value with the lane whose number differs in one bit, so all lanes end with
// the same groupings and, combine being commutative, the same bits.
template <typename T, typename Combine>
__device__ __forceinline__ T warp_allreduce(T value, Combine combine) {
#pragma unroll
  for (int lane_mask = kWarpSize / 2; lane_mask > 0; lane_mask /= 2)
    value = combine(value, shuffle_xor(value, lane_mask));
  return value;
}

// Every thread of the block gets combine() of all threads' values. blockDim.x must be a
// multiple of 32 (at most 1024) and every thread must call it. `shared` holds one T per
// warp; the caller syncs before reusing it.
template <typename T, typename Combine>
__device__ __forceinline__ T block_allreduce(T value, Combine combine, T identity, T (&shared)[kWarpSize]) {
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int warps = blockDim.x / kWarpSize;
  value = warp_allreduce(value, combine);
  if (lane == 0) shared[warp] = value;
  __syncthreads();
  // Each warp combines the per-warp results itself: no second barrier to hand one back. The
  // butterfly needs only log2(span) steps, span the power of two at or above the number of
  // warps: lane l takes warp (l % span)'s result, so every group of span lanes holds all of
  // them (one step for a block of two warps, where a full butterfly would take five).
  const int span = warps == 1 ? 1 : 1 << (32 - __clz(warps - 1));
  const int source = lane & (span - 1);
  value = source < warps ? shared[source] : identity;
  for (int lane_mask = span / 2; lane_mask > 0; lane_mask /= 2) value = combine(value, shuffle_xor(value, lane_mask));
  return value;
}

}  // namespace cuda
}  // namespace minigrad
