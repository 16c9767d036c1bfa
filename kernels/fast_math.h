#pragma once
// Two primitives of the float formulas that run at the bandwidth limit on the GPU (GELU in
// both forms, kernels/gelu_math.h): 2^v and 1/v. Each means the same on both backends; each
// compiles to the cheapest instruction that gives it to float's own accuracy.
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
// Host code and double keep the exact operations: the CPU reference and float64's
// gradcheck see plain 1/v and std::exp2, and the two backends differ by an ulp or two in
// float, as they already do wherever a math library is involved.
#include <cmath>
#include <type_traits>

#include "core/macros.h"

namespace minigrad {
namespace fast_math {

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

}  // namespace fast_math
}  // namespace minigrad
