#pragma once
// Index arithmetic for the reference computations of the reduction, softmax, matmul and view
// tests. It is written here, independently of core/ and ops/, so the expected values do
// not share code with the kernels they check: plain row-major multi-indices.
#include <cstdint>
#include <vector>

#include "tests/test_support.h"

namespace minigrad {
namespace test {

inline int64_t reference_numel(const Shape& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

// The multi-index of element `flat` of a row-major tensor of `sizes`.
inline Shape unravel(int64_t flat, const Shape& sizes) {
  Shape index(sizes.size());
  for (size_t d = sizes.size(); d-- > 0;) {
    index[d] = flat % sizes[d];
    flat /= sizes[d];
  }
  return index;
}

// The row-major flat position of a multi-index.
inline int64_t ravel(const Shape& index, const Shape& sizes) {
  int64_t flat = 0;
  for (size_t d = 0; d < sizes.size(); ++d) flat = flat * sizes[d] + index[d];
  return flat;
}

// For a reduction of a tensor of `sizes` over `dims` (non-negative, any order): for each
// output element, in row-major order, the flat indices of the input elements it combines,
// ascending.
inline std::vector<std::vector<int64_t>> reduction_groups(const Shape& sizes, const Shape& dims) {
  std::vector<bool> reduced(sizes.size(), false);
  for (int64_t d : dims) reduced[static_cast<size_t>(d)] = true;
  Shape kept_sizes;
  for (size_t d = 0; d < sizes.size(); ++d)
    if (!reduced[d]) kept_sizes.push_back(sizes[d]);
  std::vector<std::vector<int64_t>> groups(static_cast<size_t>(reference_numel(kept_sizes)));
  for (int64_t flat = 0; flat < reference_numel(sizes); ++flat) {
    const Shape index = unravel(flat, sizes);
    Shape kept_index;
    for (size_t d = 0; d < sizes.size(); ++d)
      if (!reduced[d]) kept_index.push_back(index[d]);
    groups[static_cast<size_t>(ravel(kept_index, kept_sizes))].push_back(flat);
  }
  return groups;
}

inline Tensor float64_tensor(const std::vector<double>& values, const Shape& sizes) {
  return from_vector(values, sizes, TensorOptions(kFloat64));
}

}  // namespace test
}  // namespace minigrad
