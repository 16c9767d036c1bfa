#pragma once
// The one N-dimensional loop every CPU kernel uses: it walks a shape in row-major order and
// hands the body the element offset of each operand, computed from that operand's strides
// (stride 0 broadcasts). The innermost dimension is a plain loop so the compiler can
// vectorize it; the outer dimensions advance an odometer.
#include <array>
#include <cstdint>

#include <minigrad/core/tensor.h>

namespace minigrad {

template <size_t N, typename F>
void for_each_offset(const Shape& sizes, const std::array<const int64_t*, N>& strides, F&& body) {
  const int64_t ndim = static_cast<int64_t>(sizes.size());
  for (int64_t s : sizes)
    if (s == 0) return;
  std::array<int64_t, N> off{};
  if (ndim == 0) {
    body(off);
    return;
  }
  const int64_t inner = sizes[ndim - 1];
  std::array<int64_t, N> inner_stride;
  for (size_t k = 0; k < N; ++k) inner_stride[k] = strides[k][ndim - 1];
  std::vector<int64_t> counter(static_cast<size_t>(ndim), 0);
  while (true) {
    std::array<int64_t, N> o = off;
    for (int64_t i = 0; i < inner; ++i) {
      body(o);
      for (size_t k = 0; k < N; ++k) o[k] += inner_stride[k];
    }
    // advance the odometer over the outer dimensions
    int64_t d = ndim - 2;
    for (; d >= 0; --d) {
      for (size_t k = 0; k < N; ++k) off[k] += strides[k][d];
      if (++counter[static_cast<size_t>(d)] < sizes[static_cast<size_t>(d)]) break;
      for (size_t k = 0; k < N; ++k) off[k] -= strides[k][d] * sizes[static_cast<size_t>(d)];
      counter[static_cast<size_t>(d)] = 0;
    }
    if (d < 0) return;
  }
}

}  // namespace minigrad
