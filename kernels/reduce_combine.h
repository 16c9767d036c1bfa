#pragma once
// The combine step of the max/min reductions, written once for the CPU kernels
// (ops/reduce.cpp) and the CUDA kernels (MG_HOST_DEVICE), so both backends pick the same
// element.
#include <cstdint>
#include <limits>

#include <minigrad/core/macros.h>

namespace minigrad {

// Which extremum a max/min reduction looks for. One kernel serves both, the kind a value
// rather than a template argument: the kernels are instantiated once per dtype, and the
// branch on it is the same for every thread.
enum class Extremum { Max, Min };

// Whether (value, index) should replace (best, best_index) as the running maximum (or
// minimum). NaN beats every number either way, so one NaN makes the result NaN, as in
// PyTorch. Between equal values (or two NaNs) the smaller index wins: the result does not
// depend on the order the elements are visited in, so a parallel tree reduction picks the
// same element as a row-major loop does, the first extremum.
template <typename T>
MG_HOST_DEVICE bool extremum_prefers(Extremum kind, T value, int64_t index, T best, int64_t best_index) {
  const bool value_is_nan = value != value;
  const bool best_is_nan = best != best;
  if (value_is_nan || best_is_nan) return value_is_nan && (!best_is_nan || index < best_index);
  const bool beyond = kind == Extremum::Max ? value > best : value < best;
  return beyond || (value == best && index < best_index);
}

// Below (for Max) or above (for Min) every value of T: where a running extremum starts, on
// either backend (host code).
template <typename T>
T extremum_start(Extremum kind) {
  if constexpr (std::numeric_limits<T>::has_infinity)
    return kind == Extremum::Max ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
  else
    return kind == Extremum::Max ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
}

}  // namespace minigrad
