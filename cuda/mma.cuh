#pragma once
// Warp-level tensor-core building blocks (sm_80 and later): the mma.sync instruction, the
// ldmatrix loads that feed it from shared memory, and cp.async copies into shared memory.
// Used by the flash attention kernels (cuda/flash_attention.cu); written once here so that a
// reader learns the fragment layouts in one place.
//
// mma.sync.m16n8k16 multiplies a 16x16 tile A by a 16x8 tile B (float16 or bfloat16) and adds
// a 16x8 float32 tile C, each spread over the 32 lanes of a warp as "fragments". With
// g = lane / 4 (the group) and t = lane % 4 (the thread in the group), the PTX ISA fixes:
//   A (4 registers, 2 elements each): a[0] = A[g][2t, 2t+1]      a[1] = A[g+8][2t, 2t+1]
//                                     a[2] = A[g][2t+8, 2t+9]    a[3] = A[g+8][2t+8, 2t+9]
//   B (2 registers):                  b[0] = B[2t, 2t+1][g]      b[1] = B[2t+8, 2t+9][g]
//   C (4 floats):                     c[0], c[1] = C[g][2t, 2t+1]  c[2], c[3] = C[g+8][2t, 2t+1]
// (two elements in one register: the lower index in the low 16 bits).
//
// Two consequences the kernels build on:
// - A C tile's row lives in the 4 lanes of one group: a row's max or sum is the lane's own
//   values, then two shuffles (xor 1, xor 2).
// - The C fragments of two adjacent n-blocks (columns 0-7 and 8-15) are, converted to 16-bit
//   and paired, exactly an A fragment of the 16x16 tile they make (a_from_c): a product's
//   output feeds the next product without leaving the registers (P = softmax(S) into P V).
//
// ldmatrix.x4 loads four 8x8 tiles of 16-bit elements: lanes 8i .. 8i+7 give the addresses of
// the 8 rows (16 bytes each) of tile i, and each lane receives, in register i, the elements
// [g][2t, 2t+1] of tile i, or with .trans the elements [2t, 2t+1][g] (the tile transposed).
// The loaders below choose which rows each lane points at so that the four registers are an
// A fragment, or the B fragments of two adjacent n-blocks.
//
// Shared-memory tiles are rows of kCols 16-bit elements, 16-byte chunks swizzled: chunk c of
// row r is stored at chunk c ^ (r % 8). ldmatrix reads the same chunk of 8 consecutive rows;
// unswizzled, rows of 128 or 256 bytes put those 8 chunks in the same 4 banks (an 8-way
// conflict); swizzled, the 8 chunks cover all 32 banks. cp.async writes whole chunks, so the
// swizzle costs nothing on the way in.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include <minigrad/core/dtype.h>

namespace minigrad {
namespace cuda {
namespace mma {

constexpr int kChunkElements = 8;  // 16-bit elements in one 16-byte chunk

// The element offset of (row, col) in a swizzled tile of kCols columns (kCols a multiple of
// 64: 8 chunks or more a row, so the XOR stays inside the row).
template <int kCols>
__device__ __forceinline__ int swizzled(int row, int col) {
  static_assert(kCols % 64 == 0, "a swizzled tile's rows hold a multiple of 8 chunks");
  const int chunk = (col / kChunkElements) ^ (row % 8);
  return row * kCols + chunk * kChunkElements + col % kChunkElements;
}

__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// ---- cp.async: global -> shared without passing through registers ----

// Copies 16 bytes from src to the shared dst, or writes 16 zero bytes when !valid (src is
// then not read, but must still be a valid address).
__device__ __forceinline__ void copy_chunk_async(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(dst)), "l"(src),
               "r"(valid ? 16 : 0));
}
// Copies 4 bytes from src to the shared dst, or writes 4 zero bytes when !valid (src is then
// not read, but must still be a valid address). Through L1 (.ca): only 16-byte copies may
// bypass it.
__device__ __forceinline__ void copy_word_async(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(shared_address(dst)), "l"(src),
               "r"(valid ? 4 : 0));
}
// Closes the group of the copies issued since the last commit.
__device__ __forceinline__ void commit_copies() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits until at most kPending committed groups are still in flight (this thread's copies
// only: a __syncthreads() after it makes every thread's copies visible to all).
template <int kPending>
__device__ __forceinline__ void wait_copies() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

// ---- fragments ----

using FragA = uint32_t[4];
using FragB = uint32_t[2];
using FragC = float[4];

// A (rows row0 .. row0+15, columns col0 .. col0+15) of a swizzled row-major tile: the matrix
// itself is A. Tile i = lanes 8i..8i+7: rows +0..7 / +8..15 (i % 2), columns +0 / +8 (i / 2).
template <int kCols>
__device__ __forceinline__ void load_a(const uint16_t* tile, int row0, int col0, FragA a) {
  const int lane = threadIdx.x % 32;
  const uint16_t* p = tile + swizzled<kCols>(row0 + lane % 16, col0 + lane / 16 * 8);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
               : "r"(shared_address(p)));
}

// The B fragments of two n-blocks (n0 .. n0+7 into b0, n0+8 .. n0+15 into b1) over k0 .. k0+15,
// B[k][n] = tile[n][k]: the tile holds B transposed, one row per column n of B (K in Q K^T).
// Tile i: rows n0 + 0..7 / + 8..15 (i / 2), columns k0 + 0 / + 8 (i % 2).
template <int kCols>
__device__ __forceinline__ void load_b_from_rows(const uint16_t* tile, int n0, int k0, FragB b0, FragB b1) {
  const int lane = threadIdx.x % 32, i = lane / 8;
  const uint16_t* p = tile + swizzled<kCols>(n0 + lane % 8 + i / 2 * 8, k0 + i % 2 * 8);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(b0[0]), "=r"(b0[1]), "=r"(b1[0]), "=r"(b1[1])
               : "r"(shared_address(p)));
}

// The same two n-blocks with B[k][n] = tile[k][n]: the tile holds B itself, one row per k (V
// in P V), read transposed. Tile i: rows k0 + 0..7 / + 8..15 (i % 2), columns n0 + 0 / + 8 (i / 2).
template <int kCols>
__device__ __forceinline__ void load_b_from_columns(const uint16_t* tile, int k0, int n0, FragB b0, FragB b1) {
  const int lane = threadIdx.x % 32, i = lane / 8;
  const uint16_t* p = tile + swizzled<kCols>(k0 + lane % 8 + i % 2 * 8, n0 + i / 2 * 8);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(b0[0]), "=r"(b0[1]), "=r"(b1[0]), "=r"(b1[1])
               : "r"(shared_address(p)));
}

// A (rows m0 .. m0+15, columns k0 .. k0+15) with A[m][k] = tile[k][m]: the tile holds A
// transposed (dS^T, written with keys as rows, read as dS for dQ = dS K), read transposed.
// Tile i: rows k0 + 0..7 / + 8..15 (i / 2), columns m0 + 0 / + 8 (i % 2).
template <int kCols>
__device__ __forceinline__ void load_a_from_columns(const uint16_t* tile, int k0, int m0, FragA a) {
  const int lane = threadIdx.x % 32, i = lane / 8;
  const uint16_t* p = tile + swizzled<kCols>(k0 + lane % 8 + i / 2 * 8, m0 + i % 2 * 8);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
               : "r"(shared_address(p)));
}

// c += a b, in float32, for T = Half or BFloat16.
template <typename T>
__device__ __forceinline__ void mma_16x8x16(FragC c, const FragA a, const FragB b) {
  if constexpr (std::is_same_v<T, BFloat16>)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Two floats as two 16-bit T in one register, lo in the low half (rounded to nearest even).
template <typename T>
__device__ __forceinline__ uint32_t pack(float lo, float hi) {
  if constexpr (std::is_same_v<T, BFloat16>) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  } else {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
}

// The A fragment of the 16x16 tile whose columns 0-7 are the C fragment left and 8-15 right.
template <typename T>
__device__ __forceinline__ void a_from_c(const FragC left, const FragC right, FragA a) {
  a[0] = pack<T>(left[0], left[1]);
  a[1] = pack<T>(left[2], left[3]);
  a[2] = pack<T>(right[0], right[1]);
  a[3] = pack<T>(right[2], right[3]);
}

}  // namespace mma
}  // namespace cuda
}  // namespace minigrad
