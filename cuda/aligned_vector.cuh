#pragma once
// 16-byte vector access for memory-bound kernels.
//
// A warp that loads 16 bytes per thread moves 512 bytes per instruction, four times what
// 4-byte loads move: fewer instructions per byte keep enough loads in flight to reach the
// bandwidth limit, which 2-byte loads of float16 rows alone do not. A vector load needs
// its address to be a multiple of 16, so the kernels check alignment and peel or fall back
// to one element at a time where it does not hold.
#include <cstdint>

namespace minigrad {
namespace cuda {

// Elements of T in one 16-byte vector (1 for types of 16 bytes or more).
template <typename T>
constexpr int kElementsPer16Bytes = sizeof(T) >= 16 ? 1 : static_cast<int>(16 / sizeof(T));

template <typename T, int N>
struct alignas(sizeof(T) * N) AlignedVector {
  T values[N];
};

// Whether p may be read as a Vector (an AlignedVector) without a misaligned access.
template <typename Vector>
__host__ __device__ __forceinline__ bool is_aligned_for(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % alignof(Vector) == 0;
}

}  // namespace cuda
}  // namespace minigrad
