#pragma once
// The combine steps of the reductions, written once for the CPU kernels (ops/reduce.cpp) and
// the CUDA kernels (MG_HOST_DEVICE), so both backends pick the same element.
#include <cstdint>
#include <limits>

#include <minigrad/core/macros.h>

namespace minigrad {

// Whether (value, index) should replace (best, best_index) as the running maximum.
// NaN beats every number, so one NaN makes the maximum NaN, as in PyTorch. Between equal
// values (or two NaNs) the smaller index wins: the result does not depend on the order the
// elements are visited in, so a parallel tree reduction picks the same element as a
// row-major loop does, the first maximum.
template <typename T>
MG_HOST_DEVICE bool max_prefers(T value, int64_t index, T best, int64_t best_index) {
  const bool value_is_nan = value != value;
  const bool best_is_nan = best != best;
  if (value_is_nan || best_is_nan) return value_is_nan && (!best_is_nan || index < best_index);
  return value > best || (value == best && index < best_index);
}

// Below every value of T: where a running maximum starts, on either backend (host code).
template <typename T>
T lowest_value() {
  if constexpr (std::numeric_limits<T>::has_infinity)
    return -std::numeric_limits<T>::infinity();
  else
    return std::numeric_limits<T>::lowest();
}

}  // namespace minigrad
