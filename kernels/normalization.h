#pragma once
// The per-element formulas of the row normalizations (layer_norm, rms_norm, layer_norm_gelu),
// written once for the CPU loops (ops/normalization.cpp) and the CUDA kernels
// (cuda/normalization.cu). A row is normalized with its statistics (mean and rstd =
// 1 / sqrt(var + eps); rms_norm has no mean), then scaled and shifted, then passed
// through the epilogue:
//   xhat = (x - mean) * rstd      (rms_norm: x * rstd)
//   z    = xhat * w + b
//   y    = act(z)                 (identity, or GELU in either form)
// The backward recomputes xhat and z from the saved statistics and needs act'(z).
// T is float or double (the half types compute in float).
#include <type_traits>

#include <minigrad/core/macros.h>
#include <minigrad/kernels/gelu_math.h>

namespace minigrad {
namespace normalization {

enum class NormKind { Layer, RMS };  // subtract the mean or not
enum class Epilogue { Identity, GeluExact, GeluTanh };

template <NormKind kKind, typename T>
MG_HOST_DEVICE T normalized(T x, T mean, T rstd) {
  if constexpr (kKind == NormKind::Layer)
    return (x - mean) * rstd;
  else
    return x * rstd;
}

template <Epilogue kEpilogue, typename T>
MG_HOST_DEVICE T activate(T z) {
  if constexpr (kEpilogue == Epilogue::GeluExact)
    return gelu_math::gelu_exact(z);
  else if constexpr (kEpilogue == Epilogue::GeluTanh)
    return gelu_math::gelu_tanh(z);
  else
    return z;
}

// act'(z), 1 for the identity.
template <Epilogue kEpilogue, typename T>
MG_HOST_DEVICE T activate_derivative(T z) {
  if constexpr (kEpilogue == Epilogue::GeluExact)
    return gelu_math::gelu_exact_derivative(z);
  else if constexpr (kEpilogue == Epilogue::GeluTanh)
    return gelu_math::gelu_tanh_derivative(z);
  else
    return T(1);
}

// dx from the row's two sums over its n elements, sum(dxhat) and sum(dxhat * xhat):
//   layer_norm: dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))
//   rms_norm:   dx = rstd * (dxhat - xhat * mean(dxhat * xhat))
// (rms_norm has no mean to differentiate through, so no mean(dxhat) term.) Taken as
//   dx = rstd * dxhat + (xhat * a + c),  a = -rstd * mean(dxhat * xhat),  c = -rstd * mean(dxhat)
// with a and c formed once a row: two multiply-adds an element, where the form above takes a
// subtraction, a multiply-add and a multiply.
template <NormKind kKind, typename T>
struct InputGradient {
  T rstd;
  T a;
  T c;

  MG_HOST_DEVICE InputGradient(T rstd, T sum_dxhat, T sum_dxhat_xhat, T n)
      : rstd(rstd), a(-rstd * (sum_dxhat_xhat / n)), c(kKind == NormKind::Layer ? -rstd * (sum_dxhat / n) : T(0)) {}

  MG_HOST_DEVICE T operator()(T dxhat, T xhat) const {
    if constexpr (kKind == NormKind::Layer)
      return rstd * dxhat + (xhat * a + c);
    else
      return rstd * dxhat + xhat * a;
  }
};

// Calls f(kind, epilogue), both as std::integral_constant, for a runtime choice: the one
// place that turns the choice into template arguments, for either backend. rms_norm has
// no GELU form, so only four variants are compiled.
template <typename F>
void with_norm_variant(NormKind kind, Epilogue epilogue, F&& f) {
  using Layer = std::integral_constant<NormKind, NormKind::Layer>;
  using RMS = std::integral_constant<NormKind, NormKind::RMS>;
  if (kind == NormKind::RMS) return f(RMS{}, std::integral_constant<Epilogue, Epilogue::Identity>{});
  switch (epilogue) {
    case Epilogue::Identity: return f(Layer{}, std::integral_constant<Epilogue, Epilogue::Identity>{});
    case Epilogue::GeluExact: return f(Layer{}, std::integral_constant<Epilogue, Epilogue::GeluExact>{});
    case Epilogue::GeluTanh: return f(Layer{}, std::integral_constant<Epilogue, Epilogue::GeluTanh>{});
  }
}

}  // namespace normalization
}  // namespace minigrad
