#pragma once
// The formulas of the elementwise ops, one functor each, written once for both backends
// ("one definition of each formula"). The CPU loops (ops/cpu_loops.h) and the
// CUDA engine (cuda/elementwise.cuh) call the same operator(), so the two evaluate the same
// expression in the same order and differ only where the math library does (a few ulps of
// exp, erf, tanh, pow).
//
// Each functor is called with values already in their compute type (compute_t below):
// float and double as themselves, float16 and bfloat16 as float. A functor returns its
// result in that type, and the caller rounds it to the output's dtype once, at the store.
// Scalars an op takes (pow's exponent, clamp's limits, x + 2.5) are kept as double and
// converted to the compute type where they are used, as `T(scalar)`: a float32 op meets
// the scalar rounded to float, as ops.h promises.
//
// Math functions are called unqualified after `using std::exp;` (and erf, tanh, ...): on
// the host that picks std::exp's float or double overload, in CUDA device code the same
// call resolves to CUDA's device exp, which is likewise overloaded for float and double.
//
// Why functors and not lambdas: the CUDA kernels are compiled by nvcc in cuda/*.cu and
// instantiated there for each formula, so each formula needs a name that both compilers see.
#include <cmath>
#include <cstdint>
#include <type_traits>

#include <minigrad/core/dtype.h>
#include <minigrad/core/macros.h>
#include <minigrad/kernels/gelu_math.h>

namespace minigrad {

// The type an element is computed in: float16 and bfloat16 in float (they have no
// arithmetic of their own, and rounding once at the end keeps the error within the
// output's own half-ulp), every other type as itself.
template <typename T>
struct compute_type {
  using type = T;
};
template <>
struct compute_type<Half> {
  using type = float;
};
template <>
struct compute_type<BFloat16> {
  using type = float;
};
template <typename T>
using compute_t = typename compute_type<T>::type;

namespace elementwise {

// ---- conventions both backends honour (ops/cpu_loops.h, cuda/elementwise.cuh) ----
//
// The element's index. A functor that declares
//   static constexpr bool kTakesIndex = true;
// is called as f(index, values...), index the row-major linear index of the OUTPUT element
// (an int64_t in [0, out.numel())), whatever the strides of the operands: the element at
// out[i][j] of a [rows, cols] output is index i * cols + j. Masks that depend on the
// position (a dropout mask drawn from Philox for element i, a causal mask) are written this
// way. Every other functor is called as f(values...): the choice is made at compile time
// (call_functor below), so a functor without the flag costs nothing more.
//
// Two outputs. A functor that returns OutputPair<A, B> writes two tensors of the output's
// shape in one pass: `first` to the first output, `second` to the second, each rounded to
// its own dtype (sin and cos of one input; an update and a mask). The CPU and CUDA entry
// points are elementwise_map2 (ops/cpu_loops.h) and cuda::launch_elementwise2, and the
// entry of kernels/elementwise_list.h names its outputs as TwoOutputs<A, B>.

template <typename F, typename = void>
struct takes_index : std::false_type {};
template <typename F>
struct takes_index<F, std::void_t<decltype(F::kTakesIndex)>> : std::bool_constant<F::kTakesIndex> {};
template <typename F>
constexpr bool takes_index_v = takes_index<F>::value;

// f(index, values...) for a functor that takes the index, f(values...) for any other.
template <typename F, typename... Args>
MG_HOST_DEVICE auto call_functor(const F& f, int64_t index, Args... values) {
  if constexpr (takes_index_v<F>) {
    return f(index, values...);
  } else {
    (void)index;
    return f(values...);
  }
}

// The two results of a two-output functor, in its compute types.
template <typename A, typename B>
struct OutputPair {
  A first;
  B second;
};
template <typename T>
struct is_output_pair : std::false_type {};
template <typename A, typename B>
struct is_output_pair<OutputPair<A, B>> : std::true_type {};

// The output element types of a map, as kernels/elementwise_list.h names them: one type
// for a map with one output, TwoOutputs<A, B> for a functor that returns an OutputPair
// (first stored as A, second as B). output_types<...>::second is NoOutput for one output.
struct NoOutput {};
template <typename A, typename B>
struct TwoOutputs {};
template <typename T>
struct output_types {
  using first = T;
  using second = NoOutput;
};
template <typename A, typename B>
struct output_types<TwoOutputs<A, B>> {
  using first = A;
  using second = B;
};

// Signed integer overflow is undefined behaviour in C++; PyTorch's int64 arithmetic wraps
// around (two's complement: INT64_MAX + 1 is INT64_MIN). The in-place updates that take
// int64 tensors (add_, mul_) compute through these: in uint64_t for a signed integer type,
// where wrapping is defined, converted back (modular in every compiler minigrad supports,
// and by the standard since C++20); every other type as itself.
template <typename T>
MG_HOST_DEVICE T wrapping_add(T a, T b) {
  if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}
template <typename T>
MG_HOST_DEVICE T wrapping_mul(T a, T b) {
  if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b;
  }
}

// ---- arithmetic (ops/binary.cpp) ----

struct Add {
  template <typename T>
  MG_HOST_DEVICE T operator()(T a, T b) const { return a + b; }
};
struct Sub {
  template <typename T>
  MG_HOST_DEVICE T operator()(T a, T b) const { return a - b; }
};
struct Mul {
  template <typename T>
  MG_HOST_DEVICE T operator()(T a, T b) const { return wrapping_mul(a, b); }
};
struct Div {
  template <typename T>
  MG_HOST_DEVICE T operator()(T a, T b) const { return a / b; }
};

// The scalar of an int64 update is a whole number in int64's range (ops/inplace.cpp checks),
// so T(scalar) is exact there.
struct AddScalar {
  double scalar;
  template <typename T>
  MG_HOST_DEVICE T operator()(T v) const { return wrapping_add(v, T(scalar)); }
};
struct SubScalar {
  double scalar;
  template <typename T>
  MG_HOST_DEVICE T operator()(T v) const { return v - T(scalar); }
};
struct MulScalar {
  double scalar;
  template <typename T>
  MG_HOST_DEVICE T operator()(T v) const { return wrapping_mul(v, T(scalar)); }
};
// Not MulScalar with 1/scalar: x / 3 and x * (1/3) round differently.
struct DivScalar {
  double scalar;
  template <typename T>
  MG_HOST_DEVICE T operator()(T v) const { return v / T(scalar); }
};
// scalar - v and scalar / v: the scalar on the left.
struct ScalarSub {
  double scalar;
  template <typename T>
  MG_HOST_DEVICE T operator()(T v) const { return T(scalar) - v; }
};
struct ScalarDiv {
  double scalar;
  template <typename T>
  MG_HOST_DEVICE T operator()(T v) const { return T(scalar) / v; }
};

// ---- math (ops/unary.cpp) ----

struct Neg {
  template <typename T>
  MG_HOST_DEVICE T operator()(T v) const { return -v; }
};
struct Exp {
  template <typename T>
  MG_HOST_DEVICE T operator()(T v) const {
    using std::exp;
    return exp(v);
  }
};
struct Log {
  template <typename T>
  MG_HOST_DEVICE T operator()(T v) const {
    using std::log;
    return log(v);
  }
};
struct Sqrt {
  template <typename T>
  MG_HOST_DEVICE T operator()(T v) const {
    using std::sqrt;
    return sqrt(v);
  }
};
struct Erf {
  template <typename T>
  MG_HOST_DEVICE T operator()(T v) const {
    using std::erf;
    return erf(v);
  }
};
struct Tanh {
  template <typename T>
  MG_HOST_DEVICE T operator()(T v) const {
    using std::tanh;
    return tanh(v);
  }
};
// 1 / (1 + exp(-v)). For v -> -inf, exp(-v) overflows to inf and the quotient is 0: the
// right limit.
struct Sigmoid {
  template <typename T>
  MG_HOST_DEVICE T operator()(T v) const {
    using std::exp;
    return T(1) / (T(1) + exp(-v));
  }
};
// fabs, not v < 0 ? -v : v, which would keep the sign of -0.0.
struct Abs {
  template <typename T>
  MG_HOST_DEVICE T operator()(T v) const {
    using std::fabs;
    return fabs(v);
  }
};
struct Pow {
  template <typename T>
  MG_HOST_DEVICE T operator()(T v, T exponent) const {
    using std::pow;
    return pow(v, exponent);
  }
};
struct PowScalar {
  double exponent;
  template <typename T>
  MG_HOST_DEVICE T operator()(T v) const {
    using std::pow;
    return pow(v, T(exponent));
  }
};
// min(max(v, lo), hi), PyTorch's definition: NaN stays NaN (both comparisons are false),
// and lo > hi gives hi everywhere.
struct Clamp {
  double min;
  double max;
  template <typename T>
  MG_HOST_DEVICE T operator()(T v) const {
    const T at_least_min = v < T(min) ? T(min) : v;
    return at_least_min > T(max) ? T(max) : at_least_min;
  }
};

// ---- activations (ops/relu.cpp, ops/gelu.cpp, ops/softplus.cpp) ----

// `v < 0 ? 0 : v` rather than `v > 0 ? v : 0`: a NaN input stays NaN (both comparisons
// are false for NaN), so a bad value upstream is not silently zeroed.
struct Relu {
  template <typename T>
  MG_HOST_DEVICE T operator()(T v) const { return v < T(0) ? T(0) : v; }
};
// PyTorch's threshold_backward: 0 where x <= 0 (at exactly 0 too), the gradient elsewhere,
// which includes a NaN x (NaN <= 0 is false): a NaN upstream is not hidden by a zero
// gradient. A select, not grad * (x > 0): an Inf or NaN gradient in a masked-out element
// gives 0, not Inf * 0 = NaN.
struct ReluBackward {
  template <typename T>
  MG_HOST_DEVICE T operator()(T grad, T x) const { return x <= T(0) ? T(0) : grad; }
};
struct GeluExact {
  template <typename T>
  MG_HOST_DEVICE T operator()(T v) const { return gelu_math::gelu_exact(v); }
};
struct GeluTanh {
  template <typename T>
  MG_HOST_DEVICE T operator()(T v) const { return gelu_math::gelu_tanh(v); }
};
struct GeluExactBackward {
  template <typename T>
  MG_HOST_DEVICE T operator()(T grad, T x) const { return grad * gelu_math::gelu_exact_derivative(x); }
};
struct GeluTanhBackward {
  template <typename T>
  MG_HOST_DEVICE T operator()(T grad, T x) const { return grad * gelu_math::gelu_tanh_derivative(x); }
};

// softplus(x) = log(1 + exp(beta x)) / beta, a smooth relu; x itself where beta x >
// threshold, as PyTorch defines it (there the two agree to float precision, and exp would
// overflow). log1p(exp(bx)) keeps the tiny values of the left tail, where 1 + exp(bx)
// would round to 1.
struct Softplus {
  double beta;
  double threshold;
  template <typename T>
  MG_HOST_DEVICE T operator()(T v) const {
    using std::exp;
    using std::log1p;
    const T bx = T(beta) * v;
    return bx > T(threshold) ? v : log1p(exp(bx)) / T(beta);
  }
};
// d softplus / dx = sigmoid(beta x), written 1 / (1 + exp(-bx)), which is 0 in the far left
// tail (exp overflows to inf) where exp(bx) / (1 + exp(bx)) would be inf / inf = NaN on the
// right; 1 where beta x > threshold (the forward is x there).
struct SoftplusBackward {
  double beta;
  double threshold;
  template <typename T>
  MG_HOST_DEVICE T operator()(T grad, T x) const {
    using std::exp;
    const T bx = T(beta) * x;
    return bx > T(threshold) ? grad : grad / (T(1) + exp(-bx));
  }
};

// ---- comparisons and where (ops/compare.cpp) ----
// Every dtype: float16 and bfloat16 compare as the float they stand for (their compute type).

struct Equal {
  template <typename T>
  MG_HOST_DEVICE bool operator()(T a, T b) const { return a == b; }
};
struct NotEqual {
  template <typename T>
  MG_HOST_DEVICE bool operator()(T a, T b) const { return a != b; }
};
struct Less {
  template <typename T>
  MG_HOST_DEVICE bool operator()(T a, T b) const { return a < b; }
};
struct LessEqual {
  template <typename T>
  MG_HOST_DEVICE bool operator()(T a, T b) const { return a <= b; }
};
struct Greater {
  template <typename T>
  MG_HOST_DEVICE bool operator()(T a, T b) const { return a > b; }
};
struct GreaterEqual {
  template <typename T>
  MG_HOST_DEVICE bool operator()(T a, T b) const { return a >= b; }
};

// x (compare) rhs. A floating tensor meets rhs in its compute type, and the caller has
// already rounded rhs to the tensor's dtype (so a float16 tensor holding 0.1 is eq 0.1);
// an int64 or bool tensor compares in double, so lt(i, 2.5) means i < 2.5 and not i < 2
// (exact for integers up to 2^53).
template <typename Compare>
struct CompareWithScalar {
  double rhs;
  template <typename T>
  MG_HOST_DEVICE bool operator()(T x) const {
    if constexpr (std::is_integral_v<T>)
      return Compare()(static_cast<double>(x), rhs);
    else
      return Compare()(x, static_cast<T>(rhs));
  }
};

// condition ? a : b. Only moves values, so it serves every dtype.
struct Select {
  template <typename T>
  MG_HOST_DEVICE T operator()(bool condition, T a, T b) const { return condition ? a : b; }
};

// ---- in-place updates (ops/inplace.cpp); self is the first argument ----

// self + alpha * other (add_ with alpha); int64 wraps around, in both steps.
struct AddScaled {
  double alpha;
  template <typename T>
  MG_HOST_DEVICE T operator()(T self, T other) const { return wrapping_add(self, wrapping_mul(T(alpha), other)); }
};
// value where mask, self elsewhere. A double value meets bool as value != 0.
struct MaskedFill {
  double value;
  template <typename T>
  MG_HOST_DEVICE T operator()(T self, bool mask) const { return mask ? static_cast<T>(value) : self; }
};
struct Fill {
  double value;
  template <typename T>
  MG_HOST_DEVICE T operator()(T) const { return static_cast<T>(value); }
};

// ---- more elementwise: math (ops/unary.cpp) ----

// 1 / sqrt(v), the same expression on both backends (CUDA's rsqrt is an approximation that
// can differ from it in the last bit).
struct Rsqrt {
  template <typename T>
  MG_HOST_DEVICE T operator()(T v) const {
    using std::sqrt;
    return T(1) / sqrt(v);
  }
};
// log(1 + v) and exp(v) - 1 without the cancellation of the written-out forms near v = 0,
// where 1 + v rounds away v's low bits and exp(v) - 1 loses its leading digits.
struct Log1p {
  template <typename T>
  MG_HOST_DEVICE T operator()(T v) const {
    using std::log1p;
    return log1p(v);
  }
};
struct Expm1 {
  template <typename T>
  MG_HOST_DEVICE T operator()(T v) const {
    using std::expm1;
    return expm1(v);
  }
};
struct Sin {
  template <typename T>
  MG_HOST_DEVICE T operator()(T v) const {
    using std::sin;
    return sin(v);
  }
};
struct Cos {
  template <typename T>
  MG_HOST_DEVICE T operator()(T v) const {
    using std::cos;
    return cos(v);
  }
};
// -1, 0 or 1, written (0 < v) - (v < 0) as PyTorch writes it: 0 for both zeros, and 0 for
// NaN too (both comparisons are false), where NumPy's sign gives NaN.
struct Sign {
  template <typename T>
  MG_HOST_DEVICE T operator()(T v) const { return T(int(T(0) < v) - int(v < T(0))); }
};
struct Floor {
  template <typename T>
  MG_HOST_DEVICE T operator()(T v) const {
    using std::floor;
    return floor(v);
  }
};
// base^v: pow with the scalar as the base (pow(2.0, x)).
struct ScalarPow {
  double base;
  template <typename T>
  MG_HOST_DEVICE T operator()(T v) const {
    using std::pow;
    return pow(T(base), v);
  }
};

// ---- more elementwise: maximum, minimum, clamp with tensor bounds, lerp (ops/minmax.cpp, ops/lerp.cpp) ----

// The larger (smaller) of a and b, and NaN when either is NaN, as PyTorch's maximum and
// minimum propagate it: a NaN a is taken by the first test, a NaN b because a > b is false.
struct Maximum {
  template <typename T>
  MG_HOST_DEVICE T operator()(T a, T b) const { return (a != a || a > b) ? a : b; }
};
struct Minimum {
  template <typename T>
  MG_HOST_DEVICE T operator()(T a, T b) const { return (a != a || a < b) ? a : b; }
};
// min(max(v, lo), hi) elementwise, with NaN in any of the three giving NaN; lo > hi gives hi.
struct ClampTensors {
  template <typename T>
  MG_HOST_DEVICE T operator()(T v, T lo, T hi) const { return Minimum()(Maximum()(v, lo), hi); }
};

// start + weight * (end - start), as PyTorch computes it: from start for |weight| < 0.5 and
// back from end otherwise, so that weight 0 gives start and weight 1 gives end exactly (the
// one-sided form can miss end by an ulp).
template <typename T>
MG_HOST_DEVICE T lerp_value(T start, T end, T weight) {
  using std::fabs;
  const T difference = end - start;
  return fabs(weight) < T(0.5) ? start + weight * difference : end - difference * (T(1) - weight);
}
struct LerpScalar {
  double weight;
  template <typename T>
  MG_HOST_DEVICE T operator()(T start, T end) const { return lerp_value(start, end, T(weight)); }
};
struct Lerp {
  template <typename T>
  MG_HOST_DEVICE T operator()(T start, T end, T weight) const { return lerp_value(start, end, weight); }
};

// ---- more elementwise: activations (ops/activations.cpp) ----

// x * sigmoid(x), written x / (1 + exp(-x)) as PyTorch writes it: one division, and the far
// left tail goes to -0 (exp overflows to inf) rather than through 0 * x.
struct Silu {
  template <typename T>
  MG_HOST_DEVICE T operator()(T v) const {
    using std::exp;
    return v / (T(1) + exp(-v));
  }
};
// v where v > 0, slope * v elsewhere; a NaN stays NaN (NaN * slope).
struct LeakyRelu {
  double negative_slope;
  template <typename T>
  MG_HOST_DEVICE T operator()(T v) const { return v > T(0) ? v : v * T(negative_slope); }
};
// v where v > 0, alpha (exp(v) - 1) elsewhere; expm1 keeps the small values near 0.
struct Elu {
  double alpha;
  template <typename T>
  MG_HOST_DEVICE T operator()(T v) const {
    using std::expm1;
    return v > T(0) ? v : T(alpha) * expm1(v);
  }
};

// ---- more elementwise: bool and bitwise ops, tests of values (ops/logical.cpp) ----

// On bool and int64. For bool, a & b is computed in int (C++ promotes bools) and converted
// back: false or true.
struct BitwiseAnd {
  template <typename T>
  MG_HOST_DEVICE T operator()(T a, T b) const { return static_cast<T>(a & b); }
};
struct BitwiseOr {
  template <typename T>
  MG_HOST_DEVICE T operator()(T a, T b) const { return static_cast<T>(a | b); }
};
struct BitwiseXor {
  template <typename T>
  MG_HOST_DEVICE T operator()(T a, T b) const { return static_cast<T>(a ^ b); }
};
// ~v flips every bit of an integer; a bool's one bit is !v (~true would be the int -2).
struct BitwiseNot {
  template <typename T>
  MG_HOST_DEVICE T operator()(T v) const {
    if constexpr (std::is_same_v<T, bool>)
      return !v;
    else
      return ~v;
  }
};
// Floating types only; int64 and bool hold no infinity (ops/logical.cpp answers for them).
struct IsInf {
  template <typename T>
  MG_HOST_DEVICE bool operator()(T v) const {
    using std::fabs;
    return fabs(v) == T(INFINITY);
  }
};
// Neither NaN (v == v is false only for NaN) nor infinite.
struct IsFinite {
  template <typename T>
  MG_HOST_DEVICE bool operator()(T v) const {
    using std::fabs;
    return v == v && fabs(v) != T(INFINITY);
  }
};
// |a - b| <= atol + rtol * |b|, PyTorch's isclose: equal values are close (infinities of one
// sign included), a NaN is close only to a NaN and only with equal_nan, and an infinite
// difference is never close (an infinity and a finite value, or opposite infinities).
struct IsClose {
  double rtol;
  double atol;
  bool equal_nan;
  template <typename T>
  MG_HOST_DEVICE bool operator()(T a, T b) const {
    using std::fabs;
    if (a == b) return true;
    if (a != a || b != b) return equal_nan && a != a && b != b;
    const T difference = fabs(a - b);
    return difference != T(INFINITY) && difference <= T(atol) + T(rtol) * fabs(b);
  }
};

}  // namespace elementwise
}  // namespace minigrad
