#pragma once
// The primitives of the float formulas that run at the bandwidth limit on the GPU (GELU in
// both forms, kernels/gelu_math.h; the softmax rows): 2^v and 1/v, and log2(v) once a row.
// Each means the same on both backends; each compiles to the cheapest instruction that gives
// it to float's own accuracy.
//
// Why they exist: a bf16 GELU on an H200 has about 30 instructions per element to spend
// before it stops running at the copy rate (kernels/gelu_math.h counts them). In device code
// without --use_fast_math, `1.0f / v` is an IEEE division, about ten instructions with a
// branch to a slow path, and exp2f adds scaling around the hardware's exp2 so that results
// below 2^-126 come out as denormals. The multifunction unit (MUFU) does either in one
// instruction: rcp.approx.ftz.f32 (about 1 ulp) and ex2.approx.ftz.f32 (about 2 ulp),
// both flushing denormals to zero. For GELU that trade changes nothing that float can
// show: measured on an H200 (docs/perf-notes.md), the worst GELU error over [-10, 10]
// against float64 stayed 4.2e-7 (GELU' 3.1e-7); of 2^27 random bf16 inputs every forward
// output kept its bits and 0.002% of the backward's moved by one bf16 ulp; the forward
// kernel went from 0.87-0.89 to 0.96-0.97 of the copy rate on the same memory path.
//
// Host code keeps IEEE 1/v, and double keeps std::exp2 (float64's gradcheck and references
// see the exact operations). Host float exp2 and exp are the polynomial forms below
// (exp2_float, exp_float): std::exp2f is a call into libm that no loop vectorizes (glibc's
// vector variants are declared only under -ffast-math), and a GELU or softmax loop that
// calls it per element runs at a tenth of the memory bandwidth. The two backends differ by an
// ulp or two in float, as they already do wherever a math library is involved.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include <minigrad/core/macros.h>

namespace minigrad {
namespace fast_math {

// ---- host float exp2 and exp, in plain arithmetic a loop vectorizes ----
// v = k + f with k the nearest integer and |f| <= 1/2; 2^f = e^(f ln 2) from the Taylor
// series of e^r to degree 7 (|r| <= 0.35: truncation error below 6e-9, a tenth of float's
// rounding); 2^k written straight into a float's exponent bits. Measured
// against float64 over [-150, 128]: within 2 ulp of the exact value (docs/perf-notes.md).

// p * 2^k for an integer k in [-252, 254]: two factors 2^(k/2) and 2^(k - k/2), each a normal
// float, so that the product overflows to inf or rounds into the denormals as 2^k would.
inline float scale_by_power_of_two(float p, int k) {
  const int k1 = k / 2;
  const int k2 = k - k1;
  const int32_t bits1 = (k1 + 127) << 23;
  const int32_t bits2 = (k2 + 127) << 23;
  float s1, s2;
  std::memcpy(&s1, &bits1, sizeof s1);
  std::memcpy(&s2, &bits2, sizeof s2);
  return p * s1 * s2;
}

// e^r for |r| <= ln(2)/2 (a little more is fine): the Taylor series sum of r^j / j! to
// degree 7, by Horner's rule.
inline float exp_taylor(float r) {
  constexpr float c2 = 1.0f / 2, c3 = float(1.0 / 6), c4 = float(1.0 / 24), c5 = float(1.0 / 120),
                  c6 = float(1.0 / 720), c7 = float(1.0 / 5040);
  return 1.0f + r * (1.0f + r * (c2 + r * (c3 + r * (c4 + r * (c5 + r * (c6 + r * c7))))));
}

// Rounds |v| < 2^22 to the nearest integer (ties to even): adding 1.5 * 2^23 pushes the
// fraction bits out of the float, subtracting it brings the rounded value back. Plain
// arithmetic, so it vectorizes on every x86-64 (SSE2 has no rounding instruction).
inline float round_to_integer(float v) {
  constexpr float kShifter = 12582912.0f;  // 1.5 * 2^23
  return (v + kShifter) - kShifter;
}

inline float exp2_float(float v) {
  // Beyond [-160, 160] the result is 0 or inf anyway; the clamp keeps k in range. A NaN v
  // fails both comparisons: it is clamped to -160 and restored at the end.
  const float c = v > -160.0f ? (v < 160.0f ? v : 160.0f) : -160.0f;
  const float k = round_to_integer(c);
  constexpr float kLn2 = 0.69314718055994530942f;
  const float r = scale_by_power_of_two(exp_taylor((c - k) * kLn2), static_cast<int>(k));
  return v != v ? v : r;
}

// e^v = 2^(v log2 e). The product v * log2(e) would round away the low bits of a large v, so
// the reduction is Cody and Waite's: k = round(v log2 e), then r = v - k ln 2 with ln 2 split
// into a part exact in float times any such k (kLn2High) and the rest (kLn2Low), |r| <= ln(2)/2,
// and e^r by the same polynomial.
inline float exp_float(float v) {
  constexpr float kLog2e = 1.44269504088896340736f;
  constexpr float kLn2High = 0.693145751953125f;  // ln 2 to 16 bits: k * kLn2High is exact
  constexpr float kLn2Low = 1.42860682030941723212e-6f;
  const float c = v > -110.0f ? (v < 110.0f ? v : 110.0f) : -110.0f;
  const float k = round_to_integer(c * kLog2e);
  const float r = (c - k * kLn2High) - k * kLn2Low;
  return v != v ? v : scale_by_power_of_two(exp_taylor(r), static_cast<int>(k));
}

// 2^v. Results below 2^-126 are 0 on the GPU in float (a denormal on the host).
template <typename T>
MG_HOST_DEVICE T fast_exp2(T v) {
#ifdef __CUDA_ARCH__
  if constexpr (std::is_same_v<T, float>) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
    return r;
  } else {
    return exp2(v);
  }
#else
  if constexpr (std::is_same_v<T, float>)
    return exp2_float(v);
  else
    return std::exp2(v);
#endif
}

// 1 / v. Callers pass v >= 1 (no denormal inputs to flush); 1 / inf is 0 on both backends.
template <typename T>
MG_HOST_DEVICE T fast_reciprocal(T v) {
#ifdef __CUDA_ARCH__
  if constexpr (std::is_same_v<T, float>) {
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
    return r;
  } else {
    return T(1) / v;
  }
#else
  return T(1) / v;
#endif
}

// log2(v) for v >= 1 (a softmax row's sum of exponentials): on the GPU in float the
// multifunction unit's lg2.approx.ftz.f32, absolute error about 2^-22, where log2f is some
// forty instructions; IEEE log2 on the host and in double. Only the GPU's row kernels call it,
// once a row.
template <typename T>
MG_HOST_DEVICE T fast_log2(T v) {
#ifdef __CUDA_ARCH__
  if constexpr (std::is_same_v<T, float>) {
    float r;
    asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
    return r;
  } else {
    return log2(v);
  }
#else
  return std::log2(v);
#endif
}

}  // namespace fast_math
}  // namespace minigrad
