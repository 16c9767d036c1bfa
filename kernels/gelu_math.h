#pragma once
// GELU and its derivative, written once for every backend ("one definition of each
// formula"). The CPU loops and the CUDA kernels call these same functions (through the
// functors of kernels/elementwise_functors.h), so the two backends evaluate the same
// expression in the same order.
//
// GELU(x) = x * Phi(x), where Phi is the standard normal CDF: the input scaled by the
// probability that a standard normal variable is below it.
//
// Each function is a template on the scalar type T, float or double: float16 and bfloat16
// are computed in float, as every elementwise kernel in minigrad does. The math functions
// are called unqualified after `using std::erf;` (and fabs): on the host that picks the
// std:: overload for float or double; in CUDA device code the same call resolves to CUDA's
// device function, likewise overloaded for float and double.
//
// Why float and double take different roads to Phi (normal_cdf below): double is the
// reference (gradcheck, the composite twin to 1e-12) and uses erf. Float is what runs at
// the bandwidth limit on the GPU, where each instruction counts: bf16 GELU moves 4 bytes
// per element, so at 4.8 TB/s an H200 has about 30 instructions per element for all of the
// work (132 SMs x 128 lanes x 1.98 GHz = 33e12 per second, over 1.2e12 elements per
// second). CUDA's erff alone compiles to about 30 (two polynomials chosen by selects, each
// coefficient a select), and bf16 GELU built on it ran at 0.55 of the copy rate. Float uses
// a one-polynomial approximation of the tail instead (see upper_tail), as accurate as float
// itself, whose exponential and reciprocal are one instruction each on the GPU
// (kernels/fast_math.h): 18 instructions an element in all in the bf16 kernel's SASS (40 with
// IEEE division and exp2f), and bf16 GELU runs at 0.99 of the copy rate on an H200. The
// limits at the infinities (at_most and without_infinities below) add one min instruction
// to the forward, and two or three to each backward.
#include <cfloat>
#include <cmath>
#include <type_traits>

#include <minigrad/core/macros.h>
#include <minigrad/kernels/fast_math.h>

namespace minigrad {
namespace gelu_math {

// 1/sqrt(2): Phi(x) = (1 + erf(x / sqrt(2))) / 2, and multiplying beats dividing.
constexpr double kInvSqrt2 = 0.70710678118654752440;
// 1/sqrt(2*pi): the normalizing constant of the standard normal density phi.
constexpr double kInvSqrt2Pi = 0.39894228040143267794;
// log2(e): exp(v) = exp2(v * log2(e)), and exp2 is one instruction on the GPU (MUFU.EX2).
constexpr double kLog2e = 1.44269504088896340736;
// sqrt(2/pi) and 0.044715: the constants of the tanh approximation (Hendrycks & Gimpel,
// 2016), which matches erf's curve to about 1e-3 with one tanh instead of one erf.
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kTanhCubicCoeff = 0.044715;

// The largest finite value of T (float or double). FLT_MAX and DBL_MAX, not numeric_limits,
// whose members device code cannot call.
template <typename T>
MG_HOST_DEVICE T max_finite() {
  if constexpr (std::is_same_v<T, float>)
    return FLT_MAX;
  else
    return DBL_MAX;
}

// Infinite inputs. Each formula below multiplies x by a factor that tends to 0 where x is
// infinite (Phi(x) at -inf, phi(x) at both ends), and inf * 0 is NaN where the limit is 0.
// Multiplying by x with its infinities replaced by the largest finite values gives the limit
// instead. The factor is exactly 0 there (long before: phi(x) underflows beyond |x| ~ 40),
// so no finite result changes; a NaN x stays NaN through the other factor (Phi(NaN) and
// phi(NaN) are NaN). One max (and one min) instruction: the bf16 kernels keep their budget.
//
// max(x, lo) and min(x, hi): one instruction each on the GPU (fmax, fmin). On the host a
// comparison and a select instead, which a loop vectorizes: x86 has no vector instruction
// with fmax's NaN rule (fmax(NaN, lo) = lo), so a loop calling fmax stays scalar. The two
// differ only for a NaN x, which the select keeps; every formula here multiplies it by
// another NaN factor anyway, so no result changes.
template <typename T>
MG_HOST_DEVICE T at_least(T x, T lo) {
#ifdef __CUDA_ARCH__
  using std::fmax;
  return fmax(x, lo);
#else
  return x < lo ? lo : x;
#endif
}
template <typename T>
MG_HOST_DEVICE T at_most(T x, T hi) {
#ifdef __CUDA_ARCH__
  using std::fmin;
  return fmin(x, hi);
#else
  return x > hi ? hi : x;
#endif
}
template <typename T>
MG_HOST_DEVICE T without_negative_infinity(T x) {
  return at_least(x, -max_finite<T>());
}
template <typename T>
MG_HOST_DEVICE T without_infinities(T x) {
  return at_most(at_least(x, -max_finite<T>()), max_finite<T>());
}

// exp(-x^2 / 2): the standard normal density without its constant.
template <typename T>
MG_HOST_DEVICE T gaussian(T x) {
  return fast_math::fast_exp2(T(-0.5 * kLog2e) * x * x);
}

// phi(x) = exp(-x^2 / 2) / sqrt(2*pi), the standard normal density (Phi's derivative).
template <typename T>
MG_HOST_DEVICE T normal_pdf(T x) {
  return T(kInvSqrt2Pi) * gaussian(x);
}

// The upper tail Q(a) = 1 - Phi(a) for a >= 0, given g = gaussian(a): Abramowitz & Stegun
// 26.2.17, Q(a) = phi(a) (b1 t + b2 t^2 + b3 t^3 + b4 t^4 + b5 t^5) with t = 1 / (1 + p a),
// absolute error below 7.5e-8, about float's own rounding of Phi near 1 (6e-8). In float
// over [-10, 10] it gives GELU to within 4.2e-7 (erff: 4.5e-7) and GELU' to within 3.1e-7
// (erff and expf: 1.5e-7). phi's constant 1/sqrt(2*pi) is folded into the coefficients b_i
// (computed in double, rounded once): one multiply an element fewer.
template <typename T>
MG_HOST_DEVICE T upper_tail(T a, T g) {
  constexpr double k = kInvSqrt2Pi;
  const T t = fast_math::fast_reciprocal(T(1) + T(0.2316419) * a);
  const T poly = T(k * 0.319381530) +
                 t * (T(k * -0.356563782) +
                      t * (T(k * 1.781477937) + t * (T(k * -1.821255978) + t * T(k * 1.330274429))));
  return g * (t * poly);
}

// Phi(x), the standard normal CDF. Phi(x) = 1 - Q(x) for x >= 0 and Q(-x) for x < 0 (the
// density is even). gaussian(x) is what the derivative's phi(x) needs too: computed by the
// same expression, the compiler evaluates it once for both.
template <typename T>
MG_HOST_DEVICE T normal_cdf(T x) {
  if constexpr (std::is_same_v<T, float>) {
    using std::fabs;
    const T tail = upper_tail(fabs(x), gaussian(x));
    return x >= T(0) ? T(1) - tail : tail;
  } else {
    using std::erf;
    return T(0.5) * (T(1) + erf(x * T(kInvSqrt2)));
  }
}

// Exact GELU: 0.5 * x * (1 + erf(x / sqrt(2))) = x * Phi(x). gelu(-inf) = 0, the limit.
//
// Float writes x * Phi(x) as max(x, 0) - |x| Q(|x|), which holds on both sides: for x >= 0
// it is x (1 - Q(x)), and for x < 0 it is x Q(-x) = x Phi(x) (the density is even). One
// max and one fused multiply-add, where choosing between 1 - Q and Q and then multiplying
// by x took a compare, a predicated subtraction, a max and a multiply. The infinities: Q is
// 0 there, and |x| capped at the largest finite value keeps |x| * 0 from being NaN, so
// gelu(inf) = inf and gelu(-inf) = 0. A NaN x gives a NaN Q, hence NaN.
template <typename T>
MG_HOST_DEVICE T gelu_exact(T x) {
  if constexpr (std::is_same_v<T, float>) {
    using std::fabs;
    const T a = fabs(x);
    return at_least(x, T(0)) - at_most(a, max_finite<T>()) * upper_tail(a, gaussian(x));
  } else {
    return without_negative_infinity(x) * normal_cdf(x);
  }
}

// d/dx [x * Phi(x)] = Phi(x) + x * phi(x), by the product rule: 1 at +inf, 0 at -inf.
template <typename T>
MG_HOST_DEVICE T gelu_exact_derivative(T x) {
  return normal_cdf(x) + without_infinities(x) * normal_pdf(x);
}

// The tanh approximation, 0.5 x (1 + tanh(u)) with u(x) = sqrt(2/pi) (x + 0.044715 x^3),
// computed as x * sigmoid(2u): 0.5 (1 + tanh(u)) = 1 / (1 + exp(-2u)) exactly, and one
// exp2 and one reciprocal cost a third of a tanh. It also keeps its relative accuracy in the
// left tail, where 1 + tanh(u) would cancel.
//
// s = sigmoid(2u) and e = exp(-2u), so s = 1 / (1 + e) and 1 - s = e * s (no cancellation
// either). Below x ~ -10.7 in float (-21.5 in double) e overflows to inf and s is 0: the
// right limit.
template <typename T>
struct TanhForm {
  T e;
  T s;
};
template <typename T>
MG_HOST_DEVICE TanhForm<T> gelu_tanh_sigmoid(T x) {
  const T u = T(kSqrt2OverPi) * x * (T(1) + T(kTanhCubicCoeff) * x * x);
  const T e = fast_math::fast_exp2(T(-2 * kLog2e) * u);
  return {e, fast_math::fast_reciprocal(T(1) + e)};
}

template <typename T>
MG_HOST_DEVICE T gelu_tanh(T x) {
  return without_negative_infinity(x) * gelu_tanh_sigmoid(x).s;
}

// d/dx [x s] = s + x w 2u'(x), with w = s (1 - s) and u'(x) = sqrt(2/pi) (1 + 3 * 0.044715 x^2).
//
// The tails, where the derivative is s itself (0 on the left, 1 on the right) and w is 0:
// - w = s * (e * s). Where e has overflowed to inf, s is 0 and e * s would be inf * 0 = NaN:
//   e capped at the largest finite value makes e * s = 0 there instead (one min
//   instruction), and w = 0, its limit. A NaN e (from a NaN x) is capped too, but s is NaN.
// - The second term is selected away where w is 0, not multiplied by it: x * u'(x) grows as
//   x^3 and reaches inf (x = +-inf, or |x| ~ 1e12 in float), and inf * 0 is NaN. A NaN w
//   (from a NaN x) is not 0, so NaN still gives NaN.
template <typename T>
MG_HOST_DEVICE T gelu_tanh_derivative(T x) {
  const TanhForm<T> f = gelu_tanh_sigmoid(x);
  const T w = f.s * (at_most(f.e, max_finite<T>()) * f.s);
  const T du_dx = T(kSqrt2OverPi) * (T(1) + T(3 * kTanhCubicCoeff) * x * x);
  return w == T(0) ? f.s : f.s + x * w * T(2) * du_dx;
}

}  // namespace gelu_math
}  // namespace minigrad
