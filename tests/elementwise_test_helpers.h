#pragma once
// Helpers shared by test_elementwise.cpp and test_activations.cpp.
//
// The expected values of every elementwise op are computed here independently of the
// library: plain doubles out of to_vector<double>(), std:: math functions, and broadcasting
// done by index arithmetic. Only the tensor being checked comes from minigrad's kernels.
#include <cmath>
#include <functional>
#include <utility>
#include <vector>

#include "tests/test_support.h"

namespace minigrad {
namespace test {

using ScalarFn = std::function<double(double)>;
using ScalarFn2 = std::function<double(double, double)>;
using UnaryOp = std::function<Tensor(const Tensor&)>;

inline Tensor randn64(const Shape& sizes) { return randn(sizes, kFloat64); }

// A float64 tensor of x's shape holding f(x[i]).
inline Tensor reference_map(const Tensor& x, const ScalarFn& f) {
  std::vector<double> values = x.to_vector<double>();
  for (double& v : values) v = f(v);
  return from_vector(values, x.sizes(), TensorOptions(kFloat64));
}

// NumPy's broadcast shape, computed here so the reference does not lean on core/shape.cpp.
inline Shape reference_broadcast_shape(const Shape& a, const Shape& b) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n, 1);
  for (size_t i = 0; i < n; ++i) {
    const int64_t sa = i < a.size() ? a[a.size() - 1 - i] : 1;
    const int64_t sb = i < b.size() ? b[b.size() - 1 - i] : 1;
    out[n - 1 - i] = sa == 1 ? sb : sa;
  }
  return out;
}

// t's values read as if broadcast to `sizes`, in row-major order: each output index is
// unravelled, its dims aligned to t's from the right, and size-1 dims of t read index 0.
inline std::vector<double> reference_broadcast_values(const Tensor& t, const Shape& sizes) {
  const std::vector<double> values = t.to_vector<double>();
  const Shape& own = t.sizes();
  const size_t lead = sizes.size() - own.size();
  int64_t total = 1;
  for (int64_t s : sizes) total *= s;
  std::vector<double> out(static_cast<size_t>(total));
  for (int64_t flat = 0; flat < total; ++flat) {
    int64_t rest = flat;
    int64_t source = 0;
    int64_t source_stride = 1;
    for (size_t d = sizes.size(); d-- > 0;) {
      const int64_t index = rest % sizes[d];
      rest /= sizes[d];
      if (d < lead) continue;
      const int64_t own_size = own[d - lead];
      source += (own_size == 1 ? 0 : index) * source_stride;
      source_stride *= own_size;
    }
    out[static_cast<size_t>(flat)] = values[static_cast<size_t>(source)];
  }
  return out;
}

// A float64 tensor of the broadcast shape holding f(a[i], b[i]).
inline Tensor reference_zip(const Tensor& a, const Tensor& b, const ScalarFn2& f) {
  const Shape sizes = reference_broadcast_shape(a.sizes(), b.sizes());
  const std::vector<double> va = reference_broadcast_values(a, sizes);
  const std::vector<double> vb = reference_broadcast_values(b, sizes);
  std::vector<double> out(va.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = f(va[i], vb[i]);
  return from_vector(out, sizes, TensorOptions(kFloat64));
}

// v pushed out to kink +- margin when it lies within `margin` of a kink. Finite differences
// straddling a kink (|x| at 0, clamp at its limits) measure an average of the two one-sided
// slopes, which matches neither: gradcheck inputs stay away from kinks.
inline double away_from_kinks(double v, const std::vector<double>& kinks, double margin = 0.05) {
  for (double k : kinks)
    if (std::abs(v - k) < margin) v = v < k ? k - margin : k + margin;
  return v;
}

// The same values as the 2-D tensor x, in a non-contiguous layout (the transpose of a
// contiguous tensor), as a leaf with no history.
inline Tensor noncontiguous_copy(const Tensor& x) {
  Tensor transposed = x.detach().t().contiguous().t();
  REQUIRE_FALSE(transposed.is_contiguous());
  return transposed;
}

inline Tensor leaf(const Tensor& x) { return x.detach().requires_grad_(); }

// Tolerances for comparing an op's output in a dtype with the float64 reference evaluated
// on the same (already rounded) inputs: the output's own rounding dominates. float16 keeps
// 11 significant bits (relative step 2^-11 ~ 5e-4), bfloat16 8 bits (2^-8 ~ 4e-3).
struct DTypeTolerance {
  DType dtype;
  double rtol;
  double atol;
};
inline const std::vector<DTypeTolerance>& forward_tolerances() {
  static const std::vector<DTypeTolerance> tolerances = {
      {kFloat64, 1e-12, 1e-14}, {kFloat32, 1e-5, 1e-6}, {kFloat16, 4e-3, 1e-3}, {kBFloat16, 2e-2, 1e-2}};
  return tolerances;
}

// op(x) in float64, float32, float16 and bfloat16 against reference(x), x rounded to each
// dtype first; the output keeps the input's dtype and shape.
inline void check_forward_all_dtypes(const UnaryOp& op, const ScalarFn& reference, const Tensor& x64) {
  for (const DTypeTolerance& t : forward_tolerances()) {
    INFO("dtype: " << dtype_name(t.dtype));
    const Tensor x = x64.to(t.dtype);
    const Tensor y = op(x);
    CHECK(y.dtype() == t.dtype);
    CHECK(y.sizes() == x.sizes());
    CHECK_ALLCLOSE(y, reference_map(x, reference), t.rtol, t.atol);
  }
}

// The same for a two-input op, both inputs rounded to each dtype, with broadcasting.
inline void check_forward_all_dtypes(const std::function<Tensor(const Tensor&, const Tensor&)>& op,
                                     const ScalarFn2& reference, const Tensor& a64, const Tensor& b64) {
  for (const DTypeTolerance& t : forward_tolerances()) {
    INFO("dtype: " << dtype_name(t.dtype));
    const Tensor a = a64.to(t.dtype);
    const Tensor b = b64.to(t.dtype);
    const Tensor y = op(a, b);
    CHECK(y.dtype() == t.dtype);
    CHECK_ALLCLOSE(y, reference_zip(a, b, reference), t.rtol, t.atol);
  }
}

// gradcheck of a one-input op on x (float64) as given, and on the same values laid out
// non-contiguously.
inline void check_unary_gradients(const UnaryOp& op, const Tensor& x64) {
  auto fn = [&](const tensor_list& in) { return op(in[0]); };
  CHECK_GRADCHECK(fn, tensor_list{leaf(x64)});
  CHECK_GRADCHECK(fn, tensor_list{leaf(noncontiguous_copy(x64))});
}

}  // namespace test
}  // namespace minigrad
