#pragma once
// 16-byte vector access for memory-bound kernels: the one vector type of cuda/.
//
// A warp that loads 16 bytes per thread moves 512 bytes per instruction, four times what
// 4-byte loads move: fewer instructions per byte keep enough loads in flight to reach the
// bandwidth limit, which 2-byte loads of float16 rows alone do not. A vector load needs
// its address to be a multiple of the vector's size, so the kernels check alignment
// (is_aligned_for) and peel or fall back to one element at a time where it does not hold.
//
// Loads and stores copy the struct: for an AlignedVector<Half, 8> or <BFloat16, 8> that is
// one 16-byte access (LDG.E.128 / STG.E.128 in the SASS), the same instructions as a copy
// through a uint4, not eight 2-byte ones (docs/perf-notes.md has the listing).
#include <cstdint>

namespace minigrad {
namespace cuda {

// Elements of T in one 16-byte vector (1 for types of 16 bytes or more).
template <typename T>
constexpr int kElementsPer16Bytes = sizeof(T) >= 16 ? 1 : static_cast<int>(16 / sizeof(T));

// N elements of T moved by one access (16 bytes when N = kElementsPer16Bytes<T>).
template <typename T, int N>
struct alignas(sizeof(T) * N) AlignedVector {
  T values[N];
};

// Whether p may be read as a Vector (an AlignedVector) without a misaligned access.
template <typename Vector>
__host__ __device__ __forceinline__ bool is_aligned_for(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % alignof(Vector) == 0;
}

// The N elements at p, which is aligned to the vector (is_aligned_for).
template <int N, typename T>
__device__ __forceinline__ AlignedVector<T, N> load_vector(const T* p) {
  return *reinterpret_cast<const AlignedVector<T, N>*>(p);
}

template <int N, typename T>
__device__ __forceinline__ void store_vector(T* p, const AlignedVector<T, N>& v) {
  *reinterpret_cast<AlignedVector<T, N>*>(p) = v;
}

}  // namespace cuda
}  // namespace minigrad
