#pragma once
// 16-byte vector access for memory-bound kernels: the one vector type of cuda/.
//
// A warp that loads 16 bytes per thread moves 512 bytes per instruction, four times what
// 4-byte loads move: fewer instructions per byte keep enough loads in flight to reach the
// bandwidth limit, which 2-byte loads of float16 rows alone do not. A vector load needs
// its address to be a multiple of the vector's size, so the kernels check alignment
// (is_aligned_for) and peel or fall back to one element at a time where it does not hold.
//
// Loads and stores. A plain copy of an AlignedVector<Half, 8> is already one 16-byte access
// (LDG.E.128 / STG.E.128 in the SASS, as through a uint4), not eight 2-byte ones. The
// elementwise engine still moves its vectors through an unsigned integer of the vector's
// size (load_vector / store_vector), because its bf16 rows kernels compile to fewer
// instructions that way (docs/perf-notes.md has the SASS counts and the timing); the other
// kernels of cuda/ copy the struct.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

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

// The unsigned integer of `bytes` bytes that load_vector and store_vector move.
template <int bytes>
struct VectorWord;
template <>
struct VectorWord<16> {
  using type = uint4;
};
template <>
struct VectorWord<8> {
  using type = uint2;
};
template <>
struct VectorWord<4> {
  using type = uint32_t;
};
template <>
struct VectorWord<2> {
  using type = uint16_t;
};
template <>
struct VectorWord<1> {
  using type = uint8_t;
};

// The vector of N elements of T whose bytes are `bits`, a VectorWord of the vector's size
// (a kernel that holds loaded vectors as words, as the normalization backward does, turns
// them back into elements with this).
template <typename T, int N, typename Word>
__device__ __forceinline__ AlignedVector<T, N> vector_from_bits(const Word& bits) {
  static_assert(sizeof(Word) == sizeof(AlignedVector<T, N>), "a word of the vector's size");
  AlignedVector<T, N> v;
  memcpy(&v, &bits, sizeof(v));
  return v;
}

// The N elements at p, which is aligned to the vector (is_aligned_for).
template <int N, typename T>
__device__ __forceinline__ AlignedVector<T, N> load_vector(const T* p) {
  using Word = typename VectorWord<static_cast<int>(sizeof(T)) * N>::type;
  // One load into a register first: a memcpy straight from global memory may compile to
  // byte loads.
  const Word bits = *reinterpret_cast<const Word*>(p);
  return vector_from_bits<T, N>(bits);
}

template <int N, typename T>
__device__ __forceinline__ void store_vector(T* p, const AlignedVector<T, N>& v) {
  using Word = typename VectorWord<static_cast<int>(sizeof(T)) * N>::type;
  Word bits;
  memcpy(&bits, &v, sizeof(bits));
  *reinterpret_cast<Word*>(p) = bits;
}

}  // namespace cuda
}  // namespace minigrad
