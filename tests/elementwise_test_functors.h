#pragma once
// Functors that exercise the elementwise conventions no op of the library uses yet (the
// output element's index, four inputs, two outputs: kernels/elementwise_functors.h), for
// test_elementwise.cpp (the CPU loops against a plain loop) and test_cuda_elementwise.cpp
// (CUDA against the CPU). They are listed the way a program lists its own elementwise
// functors: MG_TEST_ELEMENTWISE_KERNELS below, marked as listed here, compiled for the GPU
// in tests/elementwise_test_kernels.cu and as stubs without CUDA in
// tests/elementwise_test_kernels_stub.cpp.
#include <cmath>
#include <cstdint>

#include <minigrad/core/macros.h>
#include <minigrad/kernels/elementwise_functors.h>
#include <minigrad/kernels/elementwise_list.h>

namespace minigrad {
namespace test {

// x + index: every element learns where it is, in the output's row-major order.
struct AddIndex {
  static constexpr bool kTakesIndex = true;
  template <typename T>
  MG_HOST_DEVICE T operator()(int64_t index, T x) const { return x + static_cast<T>(index); }
};

// An AdamW-like step of four inputs: p - lr * m / (sqrt(v) + eps) - decay * g. Each input
// enters differently, so a swapped or misread operand changes the result.
struct FourInputStep {
  double lr;
  template <typename T>
  MG_HOST_DEVICE T operator()(T p, T g, T m, T v) const {
    using std::sqrt;
    return p - T(lr) * m / (sqrt(v) + T(1e-3)) - T(0.25) * g;
  }
};

// Two outputs of one input: sin x and cos x.
struct SinCos {
  template <typename T>
  MG_HOST_DEVICE elementwise::OutputPair<T, T> operator()(T x) const {
    using std::cos;
    using std::sin;
    return {sin(x), cos(x)};
  }
};

// Two outputs of different dtypes: x * k and the mask x > 0.
struct ScaleAndMask {
  double k;
  template <typename T>
  MG_HOST_DEVICE elementwise::OutputPair<T, bool> operator()(T x) const {
    return {x * T(k), x > T(0)};
  }
};

// Two inputs, two outputs, and the index: (a + b + index, a * b).
struct SumWithIndexAndProduct {
  static constexpr bool kTakesIndex = true;
  template <typename T>
  MG_HOST_DEVICE elementwise::OutputPair<T, T> operator()(int64_t index, T a, T b) const {
    return {a + b + static_cast<T>(index), a * b};
  }
};

}  // namespace test

#define MG_TEST_ELEMENTWISE_KERNELS(X)                                                  \
  MG_FLOATING_UNARY(X, test::AddIndex)                                                  \
  X(test::FourInputStep, float, float, float, float, float)                             \
  X(test::FourInputStep, double, double, double, double, double)                        \
  X(test::FourInputStep, Half, Half, Half, Half, Half)                                  \
  X(test::FourInputStep, BFloat16, BFloat16, BFloat16, BFloat16, BFloat16)              \
  X(test::SinCos, elementwise::TwoOutputs<float, float>, float)                         \
  X(test::SinCos, elementwise::TwoOutputs<double, double>, double)                      \
  X(test::SinCos, elementwise::TwoOutputs<Half, Half>, Half)                            \
  X(test::SinCos, elementwise::TwoOutputs<BFloat16, BFloat16>, BFloat16)                \
  X(test::ScaleAndMask, elementwise::TwoOutputs<float, bool>, float)                    \
  X(test::ScaleAndMask, elementwise::TwoOutputs<double, bool>, double)                  \
  X(test::ScaleAndMask, elementwise::TwoOutputs<BFloat16, bool>, BFloat16)              \
  X(test::SumWithIndexAndProduct, elementwise::TwoOutputs<float, float>, float, float)  \
  X(test::SumWithIndexAndProduct, elementwise::TwoOutputs<double, double>, double, double) \
  X(test::SumWithIndexAndProduct, elementwise::TwoOutputs<Half, Half>, Half, Half)      \
  X(test::SumWithIndexAndProduct, elementwise::TwoOutputs<BFloat16, BFloat16>, BFloat16, BFloat16)

MG_TEST_ELEMENTWISE_KERNELS(MG_LIST_ELEMENTWISE)

}  // namespace minigrad
