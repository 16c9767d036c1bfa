#pragma once
// The rules the indexing ops' CPU loops (ops/indexing.cpp) and CUDA kernels (cuda/indexing.cu)
// share, written once so both devices give the same answers:
//   - what scatter_add (and so index_add, and the backward of gather, index_select and
//     embedding) accumulates in, and in which order;
//   - topk's order, a total order, so the k elements chosen and their order are unique;
//   - multinomial's arithmetic: the running sum of a row, the category a uniform picks,
//     and the key that makes sampling without replacement a topk.
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include <minigrad/core/dtype.h>
#include <minigrad/core/macros.h>
#include <minigrad/kernels/random.h>

namespace minigrad {
namespace indexing {

// ---- scatter_add ----
// What the sum into one element runs in: the element type for float32 and float64 (as
// PyTorch's scatter_add; a double accumulator for float32 would need a buffer twice the
// output's size on the CPU, an embedding table's gradient), float for float16 and bfloat16
// (rounded once at the end), uint64 for int64 (wrapping around on overflow, defined for
// unsigned integers, as PyTorch's int64 sums wrap). The sum starts from the element of
// `self` and adds the sources in the order of their positions in the index (row-major):
// both devices add the same terms in the same order and round the same way.
template <typename T>
struct ScatterAccumulator {
  using type = T;
};
template <>
struct ScatterAccumulator<Half> {
  using type = float;
};
template <>
struct ScatterAccumulator<BFloat16> {
  using type = float;
};
template <>
struct ScatterAccumulator<int64_t> {
  using type = uint64_t;
};

// ---- topk ----
// Whether element (a, position ia) comes before (b, ib) in the order topk returns: the larger
// value first (largest) or the smaller (not largest); NaN counts as larger than every number,
// as in PyTorch's sort; equal values (and two NaNs) by position, the smaller first. K is the
// value's compute type: float, double or int64 (an integer is never NaN).
template <typename K>
MG_HOST_DEVICE bool topk_precedes(K a, int64_t ia, K b, int64_t ib, bool largest) {
  const bool a_nan = a != a;
  const bool b_nan = b != b;
  if (a_nan || b_nan) {
    if (a_nan && b_nan) return ia < ib;
    return largest ? a_nan : b_nan;  // largest: NaN first; smallest: NaN last
  }
  if (a != b) return largest ? a > b : a < b;
  return ia < ib;
}

// ---- multinomial ----
// What a row of probabilities holds, in the order the checks report it.
enum class RowStatus : int64_t { Ok = 0, Negative = 1, Infinite = 2, NaN = 3, ZeroSum = 4 };

struct RowScan {
  RowStatus status;
  int64_t nonzero;   // categories with a positive weight
};

// Writes the running sum of the row p[0], p[stride], ... (n weights) into cdf[0, n), in
// double and left to right, and says whether the row is a distribution: no negative,
// infinite or NaN weight, and a positive finite total (rows need not sum to 1).
template <typename T>
MG_HOST_DEVICE RowScan scan_probabilities(const T* p, int64_t stride, int64_t n, double* cdf) {
  RowScan scan{RowStatus::Ok, 0};
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    double v;
    if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
      v = static_cast<double>(static_cast<float>(p[i * stride]));
    else
      v = static_cast<double>(p[i * stride]);
    if (v != v) {
      if (scan.status == RowStatus::Ok) scan.status = RowStatus::NaN;
    } else if (v > DBL_MAX || v < -DBL_MAX) {
      if (scan.status == RowStatus::Ok) scan.status = RowStatus::Infinite;
    } else if (v < 0.0) {
      if (scan.status == RowStatus::Ok) scan.status = RowStatus::Negative;
    } else if (v > 0.0) {
      ++scan.nonzero;
    }
    total += v;
    cdf[i] = total;
  }
  if (scan.status == RowStatus::Ok && !(total > 0.0 && total <= DBL_MAX)) scan.status = RowStatus::ZeroSum;
  return scan;
}

// With replacement: the category a uniform u in [0, 1) picks, the first whose running sum
// passes u * total. A category of weight 0 adds nothing to the running sum, so it is never
// the first to pass. u < 1 keeps u * total below the total; the last positive category is the
// answer should rounding say otherwise.
MG_HOST_DEVICE int64_t pick_category(const double* cdf, int64_t n, double u) {
  const double target = u * cdf[n - 1];
  int64_t lo = 0, hi = n - 1;  // the answer is in [lo, hi]
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (cdf[mid] > target)
      hi = mid;
    else
      lo = mid + 1;
  }
  while (lo > 0 && cdf[lo] == cdf[lo - 1]) --lo;  // never a weight-0 category
  return lo;
}

// Without replacement: category i's key p_i / E_i with E_i ~ Exp(1), element i of the op's
// Philox stream. The num_samples largest keys are a draw of num_samples categories without
// replacement, in the order sequential draws would pick them (the exponential races of
// Efraimidis and Spirakis; PyTorch samples the same way). A weight-0 category's key is -1,
// below every positive weight's (>= 0 even where p / E underflows); the checks make sure
// enough weights are positive. log1p may differ by an ulp between the host's and CUDA's
// math libraries, so the two devices' keys can differ in the last bit: their draws then
// differ only where two keys fall within an ulp of each other.
MG_HOST_DEVICE double race_key(double p, uint64_t seed, uint64_t offset, uint64_t i) {
  using std::log1p;
  if (!(p > 0.0)) return -1.0;
  const double u = random_values::uniform<double>(seed, offset, i);  // in [0, 1)
  const double e = -log1p(-u);                                        // in [0, 37.5]
  return p / e;  // e == 0 (u == 0): +inf, the first pick, as an infinitely early race
}

}  // namespace indexing
}  // namespace minigrad
