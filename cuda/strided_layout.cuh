#pragma once
// How a CUDA kernel finds the elements of N strided operands that share one shape.
//
// The host describes the shape and each operand's strides (in elements; 0 broadcasts) in a
// StridedLayout, passed to the kernel by value. A thread turns its linear index (row-major
// over the shape) into one element offset per operand. All indexing is int64: a tensor may
// hold more than 2^31 elements.
//
// Before launching, make_strided_layout merges dims the operands all step through as one
// (size-1 dims vanish; [a, b] with stride b*s and s merges into [a*b] with stride s), so
// a contiguous tensor is one dim whatever its rank, a transposed matrix two, and each merged
// dim saves the kernel an integer division per element. The divisions that remain are by
// sizes the host knows: each size comes with its multiplier (kernels/index_divisor.h), so a
// division is three instructions, not the GPU's software routine of about 20.
#include <array>
#include <cstdint>

#include <minigrad/core/error.h>
#include <minigrad/core/shape.h>
#include <minigrad/core/tensor.h>
#include <minigrad/kernels/index_divisor.h>

namespace minigrad {
namespace cuda {

// Dims a kernel can index after merging. 8 dims for 5 operands (the elementwise engine's
// most) are 328 bytes of kernel parameters, far below the 4 KiB limit; a tensor that still
// has more is refused.
constexpr int kMaxDims = 8;

template <int N>
struct StridedLayout {
  int ndim = 0;
  IndexDivisor sizes[kMaxDims];        // each dim's size, and how to divide by it (by 1 past ndim)
  int64_t strides[N][kMaxDims] = {};  // 0 past ndim

  // True when every operand is a plain run of elements: the linear index is the offset.
  bool is_contiguous() const {
    if (ndim == 0) return true;
    if (ndim > 1) return false;
    for (int k = 0; k < N; ++k)
      if (strides[k][0] != 1) return false;
    return true;
  }

  // off[k] = the element offset of the linear index `linear` in operand k.
  __device__ __forceinline__ void offsets(int64_t linear, int64_t (&off)[N]) const {
    // Most layouts have two dims or fewer after merging (a transposed matrix; a padding mask's
    // rows). For them, one division and no loop: the dims past ndim divide by 1 with strides
    // of 0, so the same two lines serve one dim and none. The loop below costs its bookkeeping
    // and reads each stride at a computed place in the parameters: about 80 instructions for
    // two dims in softmax_dropout's row start, where these lines take about 20.
    if (ndim <= 2) {
      const auto [outer, inner] = sizes[1].divide_with_remainder(linear);
      for (int k = 0; k < N; ++k) off[k] = outer * strides[k][0] + inner * strides[k][1];
      return;
    }
    for (int k = 0; k < N; ++k) off[k] = 0;
    for (int d = ndim - 1; d > 0; --d) {
      const auto [quotient, coord] = sizes[d].divide_with_remainder(linear);
      linear = quotient;
      for (int k = 0; k < N; ++k) off[k] += coord * strides[k][d];
    }
    if (ndim > 0)
      for (int k = 0; k < N; ++k) off[k] += linear * strides[k][0];
  }
};

// The layout of `sizes` walked with each operand's strides (each of sizes.size() entries),
// its dims merged. `op` names the caller in the error for a tensor of too many dims.
template <int N>
StridedLayout<N> make_strided_layout(const Shape& sizes, const std::array<const int64_t*, N>& strides,
                                     const char* op) {
  StridedLayout<N> layout;
  int64_t merged[kMaxDims] = {};
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 1) continue;  // never stepped through: any stride will do
    if (layout.ndim > 0) {
      const int last = layout.ndim - 1;
      bool merges = true;
      for (int k = 0; k < N; ++k) merges = merges && layout.strides[k][last] == strides[k][d] * sizes[d];
      if (merges) {
        merged[last] *= sizes[d];
        for (int k = 0; k < N; ++k) layout.strides[k][last] = strides[k][d];
        continue;
      }
    }
    MG_CHECK(layout.ndim < kMaxDims,
             "{}: the CUDA kernels index at most {} dims after merging; this shape {} with its strides needs more",
             op, kMaxDims, shape_str(sizes));
    merged[layout.ndim] = sizes[d];
    for (int k = 0; k < N; ++k) layout.strides[k][layout.ndim] = strides[k][d];
    ++layout.ndim;
  }
  for (int d = 0; d < layout.ndim; ++d) layout.sizes[d] = IndexDivisor(merged[d]);
  return layout;
}

}  // namespace cuda
}  // namespace minigrad
