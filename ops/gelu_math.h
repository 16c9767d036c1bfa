#pragma once
// GELU and its derivative, written once for every backend (DESIGN.md: "one definition of
// each formula"). The CPU kernels in ops/gelu.cpp and the CUDA kernels include this same
// header, so the two backends evaluate the same expression in the same order.
//
// GELU(x) = x * Phi(x), where Phi is the standard normal CDF: the input scaled by the
// probability that a standard normal variable is below it.
//
// Each function is a template on the scalar type T (float or double): float16 and bfloat16
// are computed in float, as every elementwise kernel in minigrad does. The math functions
// are called unqualified after `using std::erf;` (and tanh, exp): on the host that picks
// std::erf's float or double overload; in CUDA device code the same call resolves to
// CUDA's device erf, which is likewise overloaded for float and double.
#include <cmath>

#include "core/macros.h"

namespace minigrad {
namespace gelu_math {

// 1/sqrt(2): Phi(x) = (1 + erf(x / sqrt(2))) / 2, and multiplying beats dividing.
constexpr double kInvSqrt2 = 0.70710678118654752440;
// 1/sqrt(2*pi): the normalizing constant of the standard normal density phi.
constexpr double kInvSqrt2Pi = 0.39894228040143267794;
// sqrt(2/pi) and 0.044715: the constants of the tanh approximation (Hendrycks & Gimpel,
// 2016), which matches erf's curve to about 1e-3 with one tanh instead of one erf.
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kTanhCubicCoeff = 0.044715;

// Phi(x), the standard normal CDF.
template <typename T>
MG_HOST_DEVICE T normal_cdf(T x) {
  using std::erf;
  return T(0.5) * (T(1) + erf(x * T(kInvSqrt2)));
}

// phi(x) = exp(-x^2 / 2) / sqrt(2*pi), the standard normal density (Phi's derivative).
template <typename T>
MG_HOST_DEVICE T normal_pdf(T x) {
  using std::exp;
  return T(kInvSqrt2Pi) * exp(T(-0.5) * x * x);
}

// Exact GELU: 0.5 * x * (1 + erf(x / sqrt(2))) = x * Phi(x).
template <typename T>
MG_HOST_DEVICE T gelu_exact(T x) {
  return x * normal_cdf(x);
}

// d/dx [x * Phi(x)] = Phi(x) + x * phi(x), by the product rule.
template <typename T>
MG_HOST_DEVICE T gelu_exact_derivative(T x) {
  return normal_cdf(x) + x * normal_pdf(x);
}

// The argument of tanh in the approximation: u(x) = sqrt(2/pi) * (x + 0.044715 x^3).
template <typename T>
MG_HOST_DEVICE T gelu_tanh_inner(T x) {
  return T(kSqrt2OverPi) * (x + T(kTanhCubicCoeff) * x * x * x);
}

// Tanh-approximated GELU: 0.5 * x * (1 + tanh(u(x))).
template <typename T>
MG_HOST_DEVICE T gelu_tanh(T x) {
  using std::tanh;
  return T(0.5) * x * (T(1) + tanh(gelu_tanh_inner(x)));
}

// d/dx [0.5 x (1 + tanh u)] = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) u'(x),
// with u'(x) = sqrt(2/pi) * (1 + 3 * 0.044715 x^2). tanh u is computed once, for both terms.
template <typename T>
MG_HOST_DEVICE T gelu_tanh_derivative(T x) {
  using std::tanh;
  const T tanh_u = tanh(gelu_tanh_inner(x));
  const T du_dx = T(kSqrt2OverPi) * (T(1) + T(3 * kTanhCubicCoeff) * x * x);
  return T(0.5) * (T(1) + tanh_u) + T(0.5) * x * (T(1) - tanh_u * tanh_u) * du_dx;
}

}  // namespace gelu_math
}  // namespace minigrad
