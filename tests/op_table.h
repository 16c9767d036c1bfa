#pragma once
// The op table: one row per public op (per shape case where an op has several), in the
// spirit of PyTorch's OpInfo. The tests are generated from it, one test case per property,
// each iterating over the rows (tests/op_table_checks.h): gradcheck in float64, gradgradcheck
// of the twice-differentiable rows, the error of a second backward through a
// once-differentiable one, non-contiguous inputs, empty inputs and every dtype against
// float64 on the CPU (tests/test_op_table.cpp); the GPU's values and gradients against the
// CPU's in every dtype, and the gradient checks again on the GPU (tests/test_cuda_op_table.cpp).
//
// A new op is one row here, in its family's section, plus its sample inputs (S and T are
// the table's names for `const Samples&` and `const tensor_list&`):
//
//   OpInfo("softplus", [](S s) { return tensor_list{s.normal({2, 4})}; },
//          [](T x) { return softplus(x[0], 2.0); }),
//
// The sample function makes the inputs with s.normal, s.positive, s.away_from, s.values
// (floating, requiring grad), s.mask (bool) and s.indices (int64); fn calls the op on them.
// Only where the defaults do not fit, chain after the row:
//   .once("MyOpBackward")              its backward is a kernel: a second backward must fail naming it
//   .no_grad()                         not differentiable (comparisons, argmax): values only
//   .dtypes({kFloat64, kFloat32})      the floating dtypes it takes, float64 always (default: all four)
//   .tolerance(kBFloat16, rtol, atol)  for comparisons in one dtype (default: default_tolerance)
//   .gradcheck_options(o)              the finite differences' step and tolerances
//   .empty_shape({3})                  the output's shape on the empty inputs (default: the
//                                      output's usual shape with its leading dim 0)
//   .empty_inputs(fn, {0, 2})          empty inputs other than the default ones, and the shape
//   .empty_error("max: ")              the op refuses the empty inputs, with this message
//   .no_empty()                        no empty-input test
// A row's name must be unique: every failure message starts with it.
//
// Sample inputs are small and kept away from the points where an op has a kink (relu and
// abs at 0, clamp at its limits, max at ties) or is undefined (log, sqrt, pow and division
// near 0): finite differences across a kink measure a jump, not a derivative.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tests/test_support.h"

namespace minigrad {
namespace test {

// ---- sample inputs ----

// What a row's sample function receives: the device and the floating dtype of the inputs
// to make. Every value is drawn in float64 on the CPU, from a seed of the row's own (so a
// row sees the same values in every dtype, on every device and in any order), then rounded
// to `dtype` and moved to `device`. Floating inputs require grad; masks and indices do not.
//
// For the empty-input test the same sample function runs with `empty_rank` set: the
// inputs of that rank (the highest among the row's inputs) get a leading dim of 0, which
// keeps broadcasting intact ([2, 3] and [3] become [0, 3] and [3]).
class Samples {
 public:
  Samples(Device device, DType dtype, int64_t empty_rank = -1)
      : device_(device), dtype_(dtype), empty_rank_(empty_rank) {}
  Device device() const { return device_; }
  DType dtype() const { return dtype_; }

  // Standard normal values.
  Tensor normal(const Shape& s) const { return floating(randn(shape(s), kFloat64)); }
  // Uniform in [0.5, 1.5): for log, sqrt, pow's base and denominators.
  Tensor positive(const Shape& s) const { return floating(rand(shape(s), kFloat64) + 0.5); }
  // Normal values pushed at least `margin` away from `point` on either side.
  Tensor away_from(const Shape& s, double point, double margin) const {
    std::vector<double> v = randn(shape(s), kFloat64).to_vector<double>();
    for (double& x : v) x = point + (x < 0 ? -1.0 : 1.0) * (margin + std::fabs(x));
    return floating(from_vector(v, shape(s)));
  }
  // Given values (ties, exact scalars), row-major.
  Tensor values(const std::vector<double>& v, const Shape& s) const {
    return floating(is_empty(s) ? zeros(shape(s), kFloat64) : from_vector(v, s));
  }
  // A bool tensor, true where v is 1: a condition for where. Never requires grad.
  Tensor mask(const std::vector<double>& v, const Shape& s) const {
    const Tensor m = is_empty(s) ? zeros(shape(s), kBool) : from_vector(v, s) > 0.5;
    return m.to(device_);
  }
  // Given int64 values: the indices of an indexing op. Never requires grad.
  Tensor indices(const std::vector<int64_t>& v, const Shape& s) const {
    const Tensor i = is_empty(s) ? zeros(shape(s), kInt64) : from_vector(v, s);
    return i.to(device_);
  }

 private:
  bool is_empty(const Shape& s) const { return static_cast<int64_t>(s.size()) == empty_rank_ && !s.empty(); }
  Shape shape(Shape s) const {
    if (is_empty(s)) s[0] = 0;
    return s;
  }
  Tensor floating(const Tensor& x64) const { return x64.to(dtype_).to(device_).requires_grad_(); }

  Device device_;
  DType dtype_;
  int64_t empty_rank_;
};

// ---- rows ----

enum class Differentiable { Twice, Once, No };

struct Tolerance {
  double rtol;
  double atol;
};

// How closely an op's result in `dtype` must match: the float64 result on the same
// (already rounded) inputs, and the GPU's result against the CPU's. float16 keeps 11
// significant bits (relative step 2^-11 ~ 5e-4), bfloat16 8 bits (2^-8 ~ 4e-3); a
// gradient is a few ops deep, each rounded, hence a few steps. float64 differs only in the
// order of a sum and in the last bits of the GPU's math functions.
inline Tolerance default_tolerance(DType dtype) {
  switch (dtype) {
    case kFloat32: return {1e-5, 1e-5};
    case kFloat16: return {5e-3, 5e-3};
    case kBFloat16: return {3e-2, 3e-2};
    default: return {1e-10, 1e-12};
  }
}

using SampleFn = std::function<tensor_list(const Samples&)>;
using OpFn = GradcheckFn;  // Tensor(const tensor_list&)

struct OpInfo {
  std::string name;  // unique: every failure message starts with it
  SampleFn sample;
  OpFn fn;
  Differentiable differentiable = Differentiable::Twice;
  std::string once_function;  // Differentiable::Once: the Function the error must name
  std::vector<DType> dtype_list = {kFloat64, kFloat32, kFloat16, kBFloat16};
  std::vector<std::pair<DType, Tolerance>> tolerance_overrides;
  GradcheckOptions gradcheck = {};
  bool test_empty = true;
  SampleFn empty_sample;               // unset: `sample` with the highest-rank inputs emptied
  std::optional<Shape> empty_output;   // unset: the usual output's shape, leading dim 0
  std::string empty_message;           // set: the empty inputs must raise this error

  OpInfo(std::string name_, SampleFn sample_, OpFn fn_)
      : name(std::move(name_)), sample(std::move(sample_)), fn(std::move(fn_)) {}

  OpInfo& once(std::string function) {
    differentiable = Differentiable::Once;
    once_function = std::move(function);
    return *this;
  }
  OpInfo& no_grad() {
    differentiable = Differentiable::No;
    return *this;
  }
  OpInfo& dtypes(std::vector<DType> list) {
    dtype_list = std::move(list);
    return *this;
  }
  OpInfo& tolerance(DType dtype, double rtol, double atol) {
    tolerance_overrides.push_back({dtype, {rtol, atol}});
    return *this;
  }
  OpInfo& gradcheck_options(const GradcheckOptions& options) {
    gradcheck = options;
    return *this;
  }
  OpInfo& empty_shape(Shape shape) {
    empty_output = std::move(shape);
    return *this;
  }
  OpInfo& empty_inputs(SampleFn inputs, Shape shape) {
    empty_sample = std::move(inputs);
    empty_output = std::move(shape);
    return *this;
  }
  OpInfo& empty_error(std::string message) {
    empty_message = std::move(message);
    return *this;
  }
  OpInfo& no_empty() {
    test_empty = false;
    return *this;
  }

  bool has_grad() const { return differentiable != Differentiable::No; }
  bool takes(DType dtype) const { return std::find(dtype_list.begin(), dtype_list.end(), dtype) != dtype_list.end(); }
  Tolerance tolerance_for(DType dtype) const {
    for (const auto& [d, t] : tolerance_overrides)
      if (d == dtype) return t;
    return default_tolerance(dtype);
  }
};

// A float32 round trip measures float32 rounding: loose finite differences.
inline GradcheckOptions through_float32_options() {
  GradcheckOptions o;
  o.eps = 1e-3;
  o.atol = 1e-3;
  o.rtol = 1e-2;
  return o;
}

inline const std::vector<OpInfo>& op_table() {
  using S = const Samples&;
  using T = const tensor_list&;
  // The comparisons' inputs: values that tie in some places, exact in every dtype.
  const SampleFn ties = [](S s) {
    return tensor_list{s.values({1, 2, 3, 4, 5, 6}, {2, 3}), s.values({1, 3, 2, 4, 6, 5}, {2, 3})};
  };
  const SampleFn ties_with_half = [](S s) { return tensor_list{s.values({0.5, -1, 0.5, 2, 0, 0.75}, {2, 3})}; };
  static const std::vector<OpInfo> rows = {
      // ---- arithmetic (ops/binary.cpp) ----
      OpInfo("add", [](S s) { return tensor_list{s.normal({2, 3}), s.normal({2, 3})}; },
             [](T x) { return add(x[0], x[1]); }),
      OpInfo("add, broadcast", [](S s) { return tensor_list{s.normal({2, 3}), s.normal({3})}; },
             [](T x) { return x[0] + x[1]; }),
      OpInfo("sub, broadcast", [](S s) { return tensor_list{s.normal({2, 3}), s.normal({2, 1})}; },
             [](T x) { return sub(x[0], x[1]); }),
      OpInfo("mul", [](S s) { return tensor_list{s.normal({2, 3}), s.normal({2, 3})}; },
             [](T x) { return mul(x[0], x[1]); }),
      OpInfo("mul, broadcast both sides", [](S s) { return tensor_list{s.normal({2, 1, 3}), s.normal({4, 1})}; },
             [](T x) { return x[0] * x[1]; }),
      OpInfo("mul, 0-d", [](S s) { return tensor_list{s.normal({}), s.normal({2, 3})}; },
             [](T x) { return x[0] * x[1]; }),
      OpInfo("div", [](S s) { return tensor_list{s.normal({2, 3}), s.away_from({2, 3}, 0.0, 0.5)}; },
             [](T x) { return div(x[0], x[1]); }),
      OpInfo("div, broadcast", [](S s) { return tensor_list{s.normal({2, 3}), s.away_from({3}, 0.0, 0.5)}; },
             [](T x) { return x[0] / x[1]; }),
      OpInfo("add scalar", [](S s) { return tensor_list{s.normal({2, 3})}; }, [](T x) { return add(x[0], 1.5); }),
      OpInfo("sub scalar", [](S s) { return tensor_list{s.normal({2, 3})}; }, [](T x) { return sub(x[0], 1.5); }),
      OpInfo("mul scalar", [](S s) { return tensor_list{s.normal({2, 3})}; }, [](T x) { return mul(x[0], -2.5); }),
      OpInfo("div scalar", [](S s) { return tensor_list{s.normal({2, 3})}; }, [](T x) { return div(x[0], 4.0); }),
      OpInfo("rsub", [](S s) { return tensor_list{s.normal({2, 3})}; }, [](T x) { return rsub(2.0, x[0]); }),
      OpInfo("rdiv", [](S s) { return tensor_list{s.away_from({2, 3}, 0.0, 0.5)}; },
             [](T x) { return rdiv(2.0, x[0]); }),

      // ---- elementwise math (ops/unary.cpp) ----
      OpInfo("neg", [](S s) { return tensor_list{s.normal({2, 3})}; }, [](T x) { return neg(x[0]); }),
      OpInfo("exp", [](S s) { return tensor_list{s.normal({2, 3})}; }, [](T x) { return exp(x[0]); }),
      OpInfo("log", [](S s) { return tensor_list{s.positive({2, 3})}; }, [](T x) { return log(x[0]); }),
      OpInfo("sqrt", [](S s) { return tensor_list{s.positive({2, 3})}; }, [](T x) { return sqrt(x[0]); }),
      OpInfo("erf", [](S s) { return tensor_list{s.normal({2, 3})}; }, [](T x) { return erf(x[0]); }),
      OpInfo("tanh", [](S s) { return tensor_list{s.normal({2, 3})}; }, [](T x) { return tanh(x[0]); }),
      OpInfo("sigmoid", [](S s) { return tensor_list{s.normal({2, 3})}; }, [](T x) { return sigmoid(x[0]); }),
      OpInfo("abs", [](S s) { return tensor_list{s.away_from({2, 3}, 0.0, 0.1)}; }, [](T x) { return abs(x[0]); }),
      OpInfo("pow, scalar exponent", [](S s) { return tensor_list{s.positive({2, 3})}; },
             [](T x) { return pow(x[0], 2.5); }),
      OpInfo("pow, integer exponent of a negative base", [](S s) { return tensor_list{s.normal({2, 3})}; },
             [](T x) { return pow(x[0], 3.0); }),
      OpInfo("pow, tensor exponent", [](S s) { return tensor_list{s.positive({2, 3}), s.normal({2, 3})}; },
             [](T x) { return pow(x[0], x[1]); }),
      OpInfo("pow, tensor exponent, broadcast", [](S s) { return tensor_list{s.positive({2, 3}), s.normal({3})}; },
             [](T x) { return pow(x[0], x[1]); }),
      OpInfo("clamp",
             [](S s) { return tensor_list{s.values({-1.3, -0.7, -0.2, 0.1, 0.3, 0.8, 1.4, -0.4}, {2, 4})}; },
             [](T x) { return clamp(x[0], -0.5, 0.5); }),
      OpInfo("clamp_min", [](S s) { return tensor_list{s.away_from({2, 3}, 0.25, 0.1)}; },
             [](T x) { return clamp_min(x[0], 0.25); }),
      OpInfo("clamp_max", [](S s) { return tensor_list{s.away_from({2, 3}, -0.25, 0.1)}; },
             [](T x) { return clamp_max(x[0], -0.25); }),
      OpInfo("square", [](S s) { return tensor_list{s.normal({2, 3})}; }, [](T x) { return square(x[0]); }),
      OpInfo("rsqrt", [](S s) { return tensor_list{s.positive({2, 3})}; }, [](T x) { return rsqrt(x[0]); }),
      OpInfo("reciprocal", [](S s) { return tensor_list{s.away_from({2, 3}, 0.0, 0.5)}; },
             [](T x) { return reciprocal(x[0]); }),
      OpInfo("log1p", [](S s) { return tensor_list{s.positive({2, 3})}; }, [](T x) { return log1p(x[0]); }),
      OpInfo("expm1", [](S s) { return tensor_list{s.normal({2, 3})}; }, [](T x) { return expm1(x[0]); }),
      OpInfo("sin", [](S s) { return tensor_list{s.normal({2, 3})}; }, [](T x) { return sin(x[0]); }),
      OpInfo("cos", [](S s) { return tensor_list{s.normal({2, 3})}; }, [](T x) { return cos(x[0]); }),
      OpInfo("sign", [](S s) { return tensor_list{s.away_from({2, 3}, 0.0, 0.1)}; }, [](T x) { return sign(x[0]); }),
      OpInfo("floor", [](S s) { return tensor_list{s.values({-1.5, -0.5, 0.5, 1.5, 2.5, -2.5}, {2, 3})}; },
             [](T x) { return floor(x[0]); }),
      OpInfo("pow, scalar base", [](S s) { return tensor_list{s.normal({2, 3})}; }, [](T x) { return pow(2.0, x[0]); }),
      OpInfo("clamp, max only", [](S s) { return tensor_list{s.away_from({2, 3}, 0.3, 0.05)}; },
             [](T x) { return clamp(x[0], std::nullopt, 0.3); }),
      OpInfo("clamp, tensor bounds",
             [](S s) {
               return tensor_list{s.values({-1.3, -0.7, -0.2, 0.1, 0.3, 0.8, 1.4, -0.4}, {2, 4}),
                                  s.values({-0.5, -0.9, -0.1, -0.6}, {4}), s.values({0.5, 0.6, 0.9, 0.2}, {4})};
             },
             [](T x) { return clamp(x[0], x[1], x[2]); }),
      OpInfo("maximum, broadcast", [](S s) { return tensor_list{s.normal({3, 4}), s.normal({4})}; },
             [](T x) { return maximum(x[0], x[1]); }),
      OpInfo("minimum", [](S s) { return tensor_list{s.normal({3, 4}), s.normal({3, 4})}; },
             [](T x) { return minimum(x[0], x[1]); }),
      OpInfo("lerp, scalar weight", [](S s) { return tensor_list{s.normal({3, 4}), s.normal({4})}; },
             [](T x) { return lerp(x[0], x[1], 0.3); }),
      OpInfo("lerp, tensor weight", [](S s) { return tensor_list{s.normal({3, 4}), s.normal({3, 4}), s.normal({3, 1})}; },
             [](T x) { return lerp(x[0], x[1], x[2]); }),
      OpInfo("silu", [](S s) { return tensor_list{s.normal({2, 3})}; }, [](T x) { return silu(x[0]); }),
      OpInfo("leaky_relu", [](S s) { return tensor_list{s.away_from({2, 3}, 0.0, 0.1)}; },
             [](T x) { return leaky_relu(x[0], 0.2); }),
      OpInfo("elu", [](S s) { return tensor_list{s.away_from({2, 3}, 0.0, 0.1)}; }, [](T x) { return elu(x[0], 0.5); }),
      OpInfo("masked_fill, scalar", [](S s) { return tensor_list{s.normal({2, 3}), s.mask({1, 0, 1}, {3})}; },
             [](T x) { return masked_fill(x[0], x[1], 0.5); }),
      OpInfo("where, scalar other", [](S s) { return tensor_list{s.mask({1, 0, 0, 1, 1, 0}, {2, 3}), s.normal({2, 3})}; },
             [](T x) { return where(x[0], x[1], -1.0); }),

      // ---- comparisons (no gradient) and where (ops/compare.cpp) ----
      OpInfo("eq", ties, [](T x) { return eq(x[0], x[1]); }).no_grad(),
      OpInfo("ne", ties, [](T x) { return ne(x[0], x[1]); }).no_grad(),
      OpInfo("lt", ties, [](T x) { return lt(x[0], x[1]); }).no_grad(),
      OpInfo("le", ties, [](T x) { return le(x[0], x[1]); }).no_grad(),
      OpInfo("gt", ties, [](T x) { return gt(x[0], x[1]); }).no_grad(),
      OpInfo("ge", ties, [](T x) { return ge(x[0], x[1]); }).no_grad(),
      OpInfo("eq, broadcast",
             [](S s) { return tensor_list{s.values({1, 2, 3, 4, 5, 6}, {2, 3}), s.values({1, 5, 6}, {3})}; },
             [](T x) { return eq(x[0], x[1]); })
          .no_grad(),
      OpInfo("gt, broadcast", [](S s) { return tensor_list{s.normal({2, 3}), s.normal({2, 1})}; },
             [](T x) { return gt(x[0], x[1]); })
          .no_grad(),
      OpInfo("eq scalar", ties_with_half, [](T x) { return eq(x[0], 0.5); }).no_grad(),
      OpInfo("ne scalar", ties_with_half, [](T x) { return ne(x[0], 0.5); }).no_grad(),
      OpInfo("lt scalar", ties_with_half, [](T x) { return lt(x[0], 0.5); }).no_grad(),
      OpInfo("le scalar", ties_with_half, [](T x) { return le(x[0], 0.5); }).no_grad(),
      OpInfo("gt scalar", ties_with_half, [](T x) { return gt(x[0], 0.5); }).no_grad(),
      OpInfo("ge scalar", ties_with_half, [](T x) { return ge(x[0], 0.5); }).no_grad(),
      OpInfo("where",
             [](S s) { return tensor_list{s.mask({1, 0, 1, 0, 0, 1}, {2, 3}), s.normal({2, 3}), s.normal({2, 3})}; },
             [](T x) { return where(x[0], x[1], x[2]); }),
      OpInfo("where, broadcast",
             [](S s) { return tensor_list{s.mask({1, 0}, {2, 1}), s.normal({2, 3}), s.normal({3})}; },
             [](T x) { return where(x[0], x[1], x[2]); }),

      // ---- reductions (ops/reduce.cpp) ----
      OpInfo("sum", [](S s) { return tensor_list{s.normal({2, 3})}; }, [](T x) { return sum(x[0]); })
          .empty_shape({}),
      OpInfo("sum over dims", [](S s) { return tensor_list{s.normal({2, 3, 2})}; },
             [](T x) { return sum(x[0], {0, 2}); })
          .empty_shape({3}),
      OpInfo("sum over a dim, keepdim", [](S s) { return tensor_list{s.normal({2, 3})}; },
             [](T x) { return sum(x[0], {1}, true); }),
      OpInfo("mean", [](S s) { return tensor_list{s.normal({2, 3})}; }, [](T x) { return mean(x[0]); })
          .empty_shape({}),
      OpInfo("mean over dims", [](S s) { return tensor_list{s.normal({2, 3, 2})}; },
             [](T x) { return mean(x[0], {0, -1}); })
          .empty_shape({3}),
      OpInfo("mean over a dim, keepdim", [](S s) { return tensor_list{s.normal({2, 3, 2})}; },
             [](T x) { return mean(x[0], {-1}, true); }),
      OpInfo("max", [](S s) { return tensor_list{s.normal({2, 3})}; }, [](T x) { return max(x[0]); })
          .empty_error("max: the input 'self' is empty"),
      OpInfo("max over a dim", [](S s) { return tensor_list{s.normal({3, 4})}; }, [](T x) { return std::get<0>(max(x[0], 1)); }),
      OpInfo("max over a dim, keepdim", [](S s) { return tensor_list{s.normal({3, 4})}; },
             [](T x) { return std::get<0>(max(x[0], 0, true)); })
          .empty_error("max: cannot reduce over dim 0 of size 0"),
      OpInfo("argmax", [](S s) { return tensor_list{s.normal({3, 4})}; }, [](T x) { return argmax(x[0], 1); })
          .no_grad(),
      OpInfo("argmax, keepdim", [](S s) { return tensor_list{s.normal({3, 4})}; },
             [](T x) { return argmax(x[0], -2, true); })
          .no_grad()
          .empty_error("argmax: cannot reduce over dim 0 of size 0"),
      OpInfo("max over a dim, indices", [](S s) { return tensor_list{s.normal({3, 4})}; },
             [](T x) { return std::get<1>(max(x[0], 1)); })
          .no_grad(),
      OpInfo("min", [](S s) { return tensor_list{s.normal({2, 3})}; }, [](T x) { return min(x[0]); })
          .empty_error("min: "),
      OpInfo("min over a dim", [](S s) { return tensor_list{s.normal({3, 4})}; },
             [](T x) { return std::get<0>(min(x[0], 1)); }),
      OpInfo("argmin", [](S s) { return tensor_list{s.normal({3, 4})}; }, [](T x) { return argmin(x[0], 1); })
          .no_grad(),
      OpInfo("amax over dims", [](S s) { return tensor_list{s.normal({2, 3, 4})}; },
             [](T x) { return amax(x[0], {0, 2}); })
          .empty_error("amax: "),
      OpInfo("amin over a dim, keepdim", [](S s) { return tensor_list{s.normal({2, 3, 4})}; },
             [](T x) { return x[0].amin(1, true); }),
      OpInfo("logsumexp", [](S s) { return tensor_list{s.normal({2, 3, 4})}; },
             [](T x) { return logsumexp(x[0], {1}); }),
      OpInfo("logsumexp over dims, keepdim", [](S s) { return tensor_list{s.normal({2, 3, 4})}; },
             [](T x) { return logsumexp(x[0], {1, 2}, true); }),
      OpInfo("prod", [](S s) { return tensor_list{s.normal({2, 3})}; }, [](T x) { return prod(x[0]); })
          .empty_shape({}),
      OpInfo("prod over a dim", [](S s) { return tensor_list{s.normal({2, 3, 4})}; },
             [](T x) { return prod(x[0], 2); }),
      OpInfo("prod with zeros", [](S s) { return tensor_list{s.values({1.5, 0, 0.9, 1.2, 0, 0.8}, {2, 3})}; },
             [](T x) { return prod(x[0], 1); }),
      OpInfo("var", [](S s) { return tensor_list{s.normal({2, 3})}; }, [](T x) { return var(x[0]); })
          .no_empty(),
      OpInfo("var over dims, correction 0, keepdim", [](S s) { return tensor_list{s.normal({2, 3, 4})}; },
             [](T x) { return var(x[0], {0, 2}, 0.0, true); })
          .no_empty(),
      OpInfo("std over a dim", [](S s) { return tensor_list{s.normal({2, 3, 4})}; },
             [](T x) { return x[0].std(1); }),
      OpInfo("norm", [](S s) { return tensor_list{s.normal({2, 3})}; }, [](T x) { return norm(x[0]); })
          .empty_shape({}),
      OpInfo("norm, p = 1 over dims", [](S s) { return tensor_list{s.normal({2, 3, 4})}; },
             [](T x) { return norm(x[0], 1, {0, 2}); })
          .empty_shape({3}),
      OpInfo("norm, p = inf over a dim", [](S s) { return tensor_list{s.normal({2, 3, 4})}; },
             [](T x) { return norm(x[0], std::numeric_limits<double>::infinity(), {2}); })
          .no_empty(),
      OpInfo("norm, p = 3 over a dim, keepdim", [](S s) { return tensor_list{s.normal({2, 3, 4})}; },
             [](T x) { return norm(x[0], 3, {1}, true); }),
      OpInfo("cumsum", [](S s) { return tensor_list{s.normal({2, 3, 4})}; }, [](T x) { return cumsum(x[0], 0); }),
      OpInfo("cumsum over the last dim", [](S s) { return tensor_list{s.normal({2, 3, 4})}; },
             [](T x) { return cumsum(x[0], -1); }),
      OpInfo("any", [](S s) { return tensor_list{s.normal({2, 3})}; }, [](T x) { return any(x[0] > 0.5); })
          .no_grad()
          .empty_shape({}),
      OpInfo("all over a dim", [](S s) { return tensor_list{s.normal({2, 3})}; },
             [](T x) { return all(x[0] > -0.5, 1); })
          .no_grad(),
      OpInfo("sum_to", [](S s) { return tensor_list{s.normal({2, 3, 4})}; },
             [](T x) { return sum_to(x[0], {3, 1}); })
          .empty_shape({3, 1}),

      // ---- matmul (ops/matmul.cpp), every shape class ----
      OpInfo("matmul 1-D x 1-D", [](S s) { return tensor_list{s.normal({4}), s.normal({4})}; },
             [](T x) { return matmul(x[0], x[1]); })
          .empty_shape({}),
      OpInfo("matmul 2-D x 1-D", [](S s) { return tensor_list{s.normal({3, 4}), s.normal({4})}; },
             [](T x) { return matmul(x[0], x[1]); }),
      OpInfo("matmul 1-D x 2-D", [](S s) { return tensor_list{s.normal({3}), s.normal({3, 2})}; },
             [](T x) { return matmul(x[0], x[1]); })
          .empty_inputs([](S s) { return tensor_list{s.normal({3}), s.normal({3, 0})}; }, {0}),
      OpInfo("matmul 2-D x 2-D", [](S s) { return tensor_list{s.normal({2, 3}), s.normal({3, 2})}; },
             [](T x) { return matmul(x[0], x[1]); })
          .empty_inputs([](S s) { return tensor_list{s.normal({2, 0}), s.normal({0, 2})}; }, {2, 2}),
      OpInfo("matmul batched", [](S s) { return tensor_list{s.normal({2, 2, 3}), s.normal({2, 3, 2})}; },
             [](T x) { return matmul(x[0], x[1]); }),
      OpInfo("matmul batched x 2-D", [](S s) { return tensor_list{s.normal({2, 2, 3}), s.normal({3, 2})}; },
             [](T x) { return matmul(x[0], x[1]); }),
      OpInfo("matmul 2-D x batched", [](S s) { return tensor_list{s.normal({2, 3}), s.normal({2, 3, 2})}; },
             [](T x) { return matmul(x[0], x[1]); }),
      OpInfo("matmul 1-D x batched", [](S s) { return tensor_list{s.normal({3}), s.normal({2, 3, 2})}; },
             [](T x) { return matmul(x[0], x[1]); }),
      OpInfo("matmul batched x 1-D", [](S s) { return tensor_list{s.normal({2, 2, 3}), s.normal({3})}; },
             [](T x) { return matmul(x[0], x[1]); }),
      OpInfo("matmul, broadcast batch dims",
             [](S s) { return tensor_list{s.normal({2, 1, 2, 3}), s.normal({2, 3, 2})}; },
             [](T x) { return matmul(x[0], x[1]); }),

      // ---- linear (ops/linear.cpp) ----
      OpInfo("linear", [](S s) { return tensor_list{s.normal({2, 3, 4}), s.normal({5, 4}), s.normal({5})}; },
             [](T x) { return linear(x[0], x[1], x[2]); }),
      OpInfo("linear 1-D, no bias", [](S s) { return tensor_list{s.normal({4}), s.normal({3, 4})}; },
             [](T x) { return linear(x[0], x[1]); }),
      // out_features a multiple of 8: on the GPU the tanh form takes cuBLASLt's GELU epilogue.
      OpInfo("linear_gelu tanh",
             [](S s) { return tensor_list{s.normal({2, 3, 5}), s.normal({8, 5}), s.normal({8})}; },
             [](T x) { return linear_gelu(x[0], x[1], x[2], GeluApproximation::Tanh); }),
      OpInfo("linear_gelu exact, no bias", [](S s) { return tensor_list{s.normal({3, 4}), s.normal({5, 4})}; },
             [](T x) { return linear_gelu(x[0], x[1]); })
          .empty_inputs([](S s) { return tensor_list{s.normal({0, 4}), s.normal({5, 4})}; }, {0, 5}),
      OpInfo("mlp tanh",
             [](S s) {
               return tensor_list{s.normal({3, 6}), s.normal({16, 6}), s.normal({16}), s.normal({4, 16}),
                                  s.normal({4})};
             },
             [](T x) { return mlp(x[0], x[1], x[2], x[3], x[4], GeluApproximation::Tanh); })
          .empty_inputs(
              [](S s) {
                return tensor_list{s.normal({0, 6}), s.normal({16, 6}), s.normal({16}), s.normal({4, 16}),
                                   s.normal({4})};
              },
              {0, 4}),
      OpInfo("mlp exact, no biases, 1-D", [](S s) { return tensor_list{s.normal({5}), s.normal({7, 5}), s.normal({3, 7})}; },
             [](T x) { return mlp(x[0], x[1], std::nullopt, x[2], std::nullopt); })
          .empty_inputs([](S s) { return tensor_list{s.normal({2, 0}), s.normal({7, 0}), s.normal({3, 7})}; }, {2, 3}),

      // ---- losses (ops/loss.cpp) ----
      OpInfo("cross_entropy", [](S s) { return tensor_list{s.normal({4, 5}), s.indices({1, 0, 4, 2}, {4})}; },
             [](T x) { return cross_entropy(x[0], x[1]); })
          .once("CrossEntropy")
          .no_empty(),
      OpInfo("cross_entropy, ignore_index, label smoothing, sum",
             [](S s) { return tensor_list{s.normal({4, 3}), s.indices({2, -1, 0, 1}, {4})}; },
             [](T x) { return cross_entropy(x[0], x[1], -1, 0.2, Reduction::Sum); })
          .once("CrossEntropy")
          .no_empty(),
      OpInfo("cross_entropy, no reduction", [](S s) { return tensor_list{s.normal({3, 4}), s.indices({3, 3, 0}, {3})}; },
             [](T x) { return cross_entropy(x[0], x[1], -100, 0.0, Reduction::None); })
          .once("CrossEntropy")
          .no_empty(),
      OpInfo("mse_loss", [](S s) { return tensor_list{s.normal({2, 3}), s.normal({2, 3})}; },
             [](T x) { return mse_loss(x[0], x[1]); })
          .empty_shape({}),

      // ---- softmax family (ops/softmax.cpp) ----
      OpInfo("softmax", [](S s) { return tensor_list{s.normal({2, 4})}; }, [](T x) { return softmax(x[0], 1); }),
      OpInfo("softmax over dim 0", [](S s) { return tensor_list{s.normal({3, 2})}; },
             [](T x) { return softmax(x[0], 0); }),
      OpInfo("softmax over the middle dim", [](S s) { return tensor_list{s.normal({2, 3, 2})}; },
             [](T x) { return softmax(x[0], -2); }),
      OpInfo("log_softmax", [](S s) { return tensor_list{s.normal({2, 4})}; },
             [](T x) { return log_softmax(x[0], -1); }),
      OpInfo("log_softmax over dim 0", [](S s) { return tensor_list{s.normal({3, 2})}; },
             [](T x) { return log_softmax(x[0], 0); }),

      // ---- dropout (ops/dropout.cpp): each call draws from a Generator of its own, seeded alike, so
      // that every call of a row (gradcheck's many, each dtype, each device) drops the same elements ----
      OpInfo("dropout", [](S s) { return tensor_list{s.normal({4, 8})}; },
             [](T x) {
               Generator gen(7);
               return dropout(x[0], 0.3, true, &gen);
             }),
      OpInfo("softmax_dropout, causal and scaled", [](S s) { return tensor_list{s.normal({2, 3, 5})}; },
             [](T x) {
               Generator gen(7);
               return softmax_dropout(x[0], -1, 0.3, true, std::nullopt, true, 0.5, &gen);
             })
          .once("SoftmaxDropout"),
      OpInfo("softmax_dropout over dim 0, bool mask",
             [](S s) { return tensor_list{s.normal({3, 2, 4}), s.mask({1, 0, 1, 1, 1, 1, 0, 1}, {2, 4})}; },
             [](T x) {
               Generator gen(7);
               return softmax_dropout(x[0], 0, 0.3, true, x[1], false, std::nullopt, &gen);
             })
          .once("SoftmaxDropout"),
      OpInfo("softmax_dropout in eval", [](S s) { return tensor_list{s.normal({2, 6})}; },
             [](T x) { return softmax_dropout(x[0], -1, 0.3, false, std::nullopt, false, 2.0); })
          .once("SoftmaxDropout"),
      // ---- end of dropout ----

      // ---- activations (ops/relu.cpp, ops/gelu.cpp, ops/softplus.cpp) ----
      OpInfo("relu", [](S s) { return tensor_list{s.away_from({2, 4}, 0.0, 0.1)}; }, [](T x) { return relu(x[0]); }),
      OpInfo("gelu", [](S s) { return tensor_list{s.normal({2, 4})}; }, [](T x) { return gelu(x[0]); }),
      OpInfo("gelu, tanh approximation", [](S s) { return tensor_list{s.normal({2, 4})}; },
             [](T x) { return gelu(x[0], GeluApproximation::Tanh); }),
      OpInfo("softplus", [](S s) { return tensor_list{s.normal({2, 4})}; },
             [](T x) { return softplus(x[0], 2.0); }),
      OpInfo("softplus, past the threshold", [](S s) { return tensor_list{s.away_from({2, 4}, 0.0, 0.2)}; },
             [](T x) { return softplus(x[0], 10.0, 1.0); }),

      // ---- normalizations (ops/normalization.cpp) ----
      OpInfo("layer_norm", [](S s) { return tensor_list{s.normal({3, 5}), s.positive({5}), s.normal({5})}; },
             [](T x) { return layer_norm(x[0], {5}, x[1], x[2]); })
          .once("LayerNorm"),
      OpInfo("layer_norm over two dims, no weight or bias", [](S s) { return tensor_list{s.normal({2, 2, 3})}; },
             [](T x) { return layer_norm(x[0], {2, 3}); })
          .once("LayerNorm"),
      OpInfo("layer_norm_gelu", [](S s) { return tensor_list{s.normal({3, 5}), s.positive({5}), s.normal({5})}; },
             [](T x) { return layer_norm_gelu(x[0], {5}, x[1], x[2]); })
          .once("LayerNormGelu"),
      OpInfo("layer_norm_gelu, tanh approximation",
             [](S s) { return tensor_list{s.normal({3, 5}), s.positive({5}), s.normal({5})}; },
             [](T x) { return layer_norm_gelu(x[0], {5}, x[1], x[2], 1e-5, GeluApproximation::Tanh); })
          .once("LayerNormGelu"),
      OpInfo("rms_norm", [](S s) { return tensor_list{s.normal({3, 5}), s.positive({5})}; },
             [](T x) { return rms_norm(x[0], {5}, x[1]); })
          .once("RMSNorm"),

      // ---- views (ops/views.cpp) ----
      OpInfo("view", [](S s) { return tensor_list{s.normal({2, 3, 2})}; }, [](T x) { return x[0].view({3, -1}); })
          .empty_shape({3, 0}),
      OpInfo("reshape (a view)", [](S s) { return tensor_list{s.normal({2, 3, 2})}; },
             [](T x) { return x[0].reshape({-1, 2}); }),
      OpInfo("reshape of a transpose (a copy)", [](S s) { return tensor_list{s.normal({2, 3})}; },
             [](T x) { return x[0].t().reshape({-1}); }),
      OpInfo("flatten", [](S s) { return tensor_list{s.normal({2, 3})}; }, [](T x) { return x[0].flatten(); }),
      OpInfo("transpose", [](S s) { return tensor_list{s.normal({2, 3, 2})}; },
             [](T x) { return x[0].transpose(0, 2); })
          .empty_shape({2, 3, 0}),
      OpInfo("t", [](S s) { return tensor_list{s.normal({2, 3})}; }, [](T x) { return x[0].t(); })
          .empty_shape({3, 0}),
      OpInfo("permute", [](S s) { return tensor_list{s.normal({2, 3, 2})}; },
             [](T x) { return x[0].permute({2, 0, 1}); })
          .empty_shape({2, 0, 3}),
      OpInfo("slice", [](S s) { return tensor_list{s.normal({3, 5})}; }, [](T x) { return x[0].slice(1, 1, 5, 2); }),
      OpInfo("slice, negative bounds", [](S s) { return tensor_list{s.normal({3, 5})}; },
             [](T x) { return x[0].slice(-1, -4, -1); }),
      OpInfo("slice of the leading dim", [](S s) { return tensor_list{s.normal({4, 3})}; },
             [](T x) { return x[0].slice(0, 1, 3); })
          .empty_shape({0, 3}),
      OpInfo("select", [](S s) { return tensor_list{s.normal({3, 4})}; }, [](T x) { return x[0].select(1, 2); }),
      OpInfo("select, negative index", [](S s) { return tensor_list{s.normal({3, 4})}; },
             [](T x) { return x[0].select(-1, -1); }),
      OpInfo("select of the leading dim", [](S s) { return tensor_list{s.normal({3, 4})}; },
             [](T x) { return x[0].select(0, 1); })
          .empty_error("select: index 1 is out of range for dimension 0 with size 0"),
      OpInfo("expand", [](S s) { return tensor_list{s.normal({3, 1})}; }, [](T x) { return x[0].expand({2, 3, 4}); })
          .empty_error("expand: the expanded size 3 must match the existing size 0"),
      OpInfo("expand, -1 keeps a size", [](S s) { return tensor_list{s.normal({3, 1})}; },
             [](T x) { return x[0].expand({-1, 4}); }),
      OpInfo("squeeze", [](S s) { return tensor_list{s.normal({3, 1, 2, 1})}; }, [](T x) { return x[0].squeeze(); }),
      OpInfo("squeeze a dim", [](S s) { return tensor_list{s.normal({3, 1, 2})}; },
             [](T x) { return x[0].squeeze(1); }),
      OpInfo("unsqueeze", [](S s) { return tensor_list{s.normal({3, 2})}; }, [](T x) { return x[0].unsqueeze(-1); }),
      OpInfo("unsqueeze at the front", [](S s) { return tensor_list{s.normal({3, 2})}; },
             [](T x) { return x[0].unsqueeze(0); })
          .empty_shape({1, 0, 2}),

      // ---- more views (ops/views.cpp) and joins (ops/joins.cpp) ----
      OpInfo("narrow", [](S s) { return tensor_list{s.normal({3, 4, 2})}; }, [](T x) { return x[0].narrow(1, 1, 2); }),
      OpInfo("flatten over dims", [](S s) { return tensor_list{s.normal({2, 3, 2})}; },
             [](T x) { return flatten(x[0], 1); }),
      OpInfo("unflatten", [](S s) { return tensor_list{s.normal({2, 6})}; },
             [](T x) { return x[0].unflatten(1, {3, -1}); }),
      OpInfo("movedim", [](S s) { return tensor_list{s.normal({2, 3, 4})}; },
             [](T x) { return movedim(x[0], {0, 2}, {2, 0}); })
          .empty_shape({4, 3, 0}),
      OpInfo("swapaxes", [](S s) { return tensor_list{s.normal({2, 3, 4})}; }, [](T x) { return swapaxes(x[0], 0, 1); })
          .empty_shape({3, 0, 4}),
      OpInfo("mT", [](S s) { return tensor_list{s.normal({2, 3, 4})}; }, [](T x) { return x[0].mT(); }),
      OpInfo("chunk", [](S s) { return tensor_list{s.normal({3, 5})}; }, [](T x) { return chunk(x[0], 2, 1)[1]; }),
      OpInfo("split with sizes, rejoined in another order", [](S s) { return tensor_list{s.normal({3, 5})}; },
             [](T x) {
               const tensor_list parts = split(x[0], {2, 0, 3}, 1);
               return cat({parts[2], parts[0]}, 1);
             }),
      OpInfo("unbind and stack", [](S s) { return tensor_list{s.normal({2, 3, 4})}; },
             [](T x) { return stack(unbind(x[0], 2), 0); })
          .empty_shape({4, 0, 3}),
      OpInfo("cat", [](S s) { return tensor_list{s.normal({2, 3}), s.normal({2, 1}), s.normal({2, 2})}; },
             [](T x) { return cat({x[0], x[1], x[2]}, 1); }),
      OpInfo("cat along dim 0", [](S s) { return tensor_list{s.normal({2, 3}), s.normal({1, 3})}; },
             [](T x) { return cat({x[0], x[1]}, 0); })
          .no_empty(),
      OpInfo("stack", [](S s) { return tensor_list{s.normal({2, 3}), s.normal({2, 3})}; },
             [](T x) { return stack({x[0], x[1]}, 2); }),
      OpInfo("repeat", [](S s) { return tensor_list{s.normal({2, 3})}; }, [](T x) { return x[0].repeat({2, 1, 2}); })
          .empty_shape({2, 0, 6}),
      OpInfo("flip", [](S s) { return tensor_list{s.normal({2, 3, 4})}; }, [](T x) { return flip(x[0], {0, 2}); }),
      OpInfo("tril", [](S s) { return tensor_list{s.normal({3, 4})}; }, [](T x) { return tril(x[0], -1); }),
      OpInfo("triu, batched", [](S s) { return tensor_list{s.normal({2, 3, 4})}; }, [](T x) { return triu(x[0], 1); }),

      // ---- indexing (ops/indexing.cpp) ----
      OpInfo("gather", [](S s) { return tensor_list{s.normal({4, 5}), s.indices({0, 3, 1, 2, 0, 1, 1, 3, 2, 0, 3, 2, 0, 1, 3}, {3, 5})}; },
             [](T x) { return gather(x[0], 0, x[1]); })
          .no_empty(),
      OpInfo("index_select", [](S s) { return tensor_list{s.normal({4, 5}), s.indices({1, 3, 1, 0, 1}, {5})}; },
             [](T x) { return index_select(x[0], 1, x[1]); })
          .empty_shape({0, 5}),
      OpInfo("index_add", [](S s) { return tensor_list{s.normal({4, 5}), s.indices({1, 3, 1, 0}, {4}), s.normal({4, 4})}; },
             [](T x) { return index_add(x[0], 1, x[1], x[2], 1.5); })
          .no_empty(),
      OpInfo("scatter_add, repeated positions",
             [](S s) { return tensor_list{s.normal({4, 5}), s.indices({0, 3, 1, 2, 0, 1, 1, 3, 2, 0, 3, 3, 0, 1, 0}, {3, 5}), s.normal({3, 5})}; },
             [](T x) { return scatter_add(x[0], 0, x[1], x[2]); })
          .no_empty(),
      OpInfo("scatter, distinct positions",
             [](S s) { return tensor_list{s.normal({4, 5}), s.indices({0, 3, 1, 2, 0, 1, 1, 3, 0, 3, 3, 2, 0, 1, 1}, {3, 5}), s.normal({3, 5})}; },
             [](T x) { return scatter(x[0], 0, x[1], x[2]); })
          .no_empty(),
      OpInfo("embedding", [](S s) { return tensor_list{s.normal({6, 3}), s.indices({2, 5, 2, 0, 4, 2}, {2, 3})}; },
             [](T x) { return embedding(x[0], x[1]); })
          .no_empty(),
      OpInfo("topk values", [](S s) { return tensor_list{s.normal({4, 5})}; },
             [](T x) { return std::get<0>(topk(x[0], 3, 1)); }),

      // ---- copies (ops/copy.cpp, ops/views.cpp) ----
      OpInfo("to_dtype(float64)", [](S s) { return tensor_list{s.normal({2, 3})}; },
             [](T x) { return to_dtype(x[0], kFloat64); }),
      OpInfo("to_dtype(float32) and back", [](S s) { return tensor_list{s.normal({2, 3})}; },
             [](T x) { return to_dtype(to_dtype(x[0], kFloat32), x[0].dtype()); })
          .gradcheck_options(through_float32_options()),
      // On the CPU a no-op; from the GPU a copy whose gradient goes back across.
      OpInfo("to_device(cpu)", [](S s) { return tensor_list{s.normal({2, 3})}; },
             [](T x) { return to_device(x[0], kCPU); }),
      OpInfo("clone", [](S s) { return tensor_list{s.normal({2, 3})}; }, [](T x) { return x[0].clone(); }),
      OpInfo("contiguous of a transpose", [](S s) { return tensor_list{s.normal({2, 3})}; },
             [](T x) { return x[0].t().contiguous(); })
          .empty_shape({3, 0}),
  };
  return rows;
}

}  // namespace test
}  // namespace minigrad
