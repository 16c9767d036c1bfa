#pragma once
// Every elementwise kernel minigrad has, listed once for both backends: a functor of
// kernels/elementwise_functors.h and the element types it runs on (the output's, then each
// input's). The list is read three times:
//
//   ops/cpu_loops.h      elementwise_map refuses, at compile time and in every build, a
//                        functor and types that are not listed (is_listed_elementwise below);
//   cuda/elementwise_*.cu  a CUDA build compiles the engine for exactly the listed entries,
//                        one group per file so that the four files compile in parallel;
//   cuda/no_cuda_backend.cpp  a CPU-only build defines the same entries as stubs that raise
//                        "... has no CUDA backend in this build".
//
// So a new elementwise op is one functor plus one line here, and forgetting the line is a
// compile error of the op's own file on every machine, with or without a GPU.
//
// An entry is X(Functor, out_t, in_t...), with out_t = elementwise::TwoOutputs<A, B> for a
// functor that returns two values. MG_FLOATING_UNARY(X, F), MG_FLOATING_BINARY(X, F) and
// MG_FLOATING_TERNARY(X, F) are shorthands for the four floating types, the output of the
// inputs' type; MG_FLOATING_TEST(X, F) the same with a bool output.
#include <cstdint>
#include <type_traits>

#include <minigrad/core/dtype.h>
#include <minigrad/kernels/dropout.h>
#include <minigrad/kernels/elementwise_functors.h>

#define MG_FLOATING_UNARY(X, F) \
  X(F, float, float)            \
  X(F, double, double)          \
  X(F, Half, Half)              \
  X(F, BFloat16, BFloat16)
#define MG_FLOATING_BINARY(X, F)   \
  X(F, float, float, float)        \
  X(F, double, double, double)     \
  X(F, Half, Half, Half)           \
  X(F, BFloat16, BFloat16, BFloat16)
#define MG_FLOATING_TERNARY(X, F)           \
  X(F, float, float, float, float)          \
  X(F, double, double, double, double)      \
  X(F, Half, Half, Half, Half)              \
  X(F, BFloat16, BFloat16, BFloat16, BFloat16)
// A test of each value of a floating tensor, with a bool result (isinf).
#define MG_FLOATING_TEST(X, F) \
  X(F, bool, float)            \
  X(F, bool, double)           \
  X(F, bool, Half)             \
  X(F, bool, BFloat16)

// neg, exp, log, sqrt, erf, tanh, sigmoid, abs, pow, clamp; rsqrt, log1p, expm1, sin, cos,
// sign, floor, pow(scalar, tensor). (square is pow(x, 2) and reciprocal 1 / x: no kernels
// of their own.)
#define MG_ELEMENTWISE_MATH_KERNELS(X)              \
  MG_FLOATING_UNARY(X, elementwise::Neg)            \
  MG_FLOATING_UNARY(X, elementwise::Exp)            \
  MG_FLOATING_UNARY(X, elementwise::Log)            \
  MG_FLOATING_UNARY(X, elementwise::Sqrt)           \
  MG_FLOATING_UNARY(X, elementwise::Erf)            \
  MG_FLOATING_UNARY(X, elementwise::Tanh)           \
  MG_FLOATING_UNARY(X, elementwise::Sigmoid)        \
  MG_FLOATING_UNARY(X, elementwise::Abs)            \
  MG_FLOATING_UNARY(X, elementwise::PowScalar)      \
  MG_FLOATING_BINARY(X, elementwise::Pow)           \
  MG_FLOATING_UNARY(X, elementwise::Clamp)          \
  MG_FLOATING_UNARY(X, elementwise::Rsqrt)          \
  MG_FLOATING_UNARY(X, elementwise::Log1p)          \
  MG_FLOATING_UNARY(X, elementwise::Expm1)          \
  MG_FLOATING_UNARY(X, elementwise::Sin)            \
  MG_FLOATING_UNARY(X, elementwise::Cos)            \
  MG_FLOATING_UNARY(X, elementwise::Sign)           \
  MG_FLOATING_UNARY(X, elementwise::Floor)          \
  MG_FLOATING_UNARY(X, elementwise::ScalarPow)

// add, sub, mul, div (broadcasting) and their tensor-scalar forms; the in-place updates
// add_ and mul_ (which also take int64 tensors) and masked_fill_ (every dtype, also serving
// the out-of-place masked_fill); maximum, minimum, clamp with tensor bounds, lerp.
#define MG_ELEMENTWISE_ARITHMETIC_KERNELS(X)               \
  MG_FLOATING_BINARY(X, elementwise::Add)                  \
  MG_FLOATING_BINARY(X, elementwise::Sub)                  \
  MG_FLOATING_BINARY(X, elementwise::Mul)                  \
  MG_FLOATING_BINARY(X, elementwise::Div)                  \
  MG_FLOATING_UNARY(X, elementwise::AddScalar)             \
  MG_FLOATING_UNARY(X, elementwise::SubScalar)             \
  MG_FLOATING_UNARY(X, elementwise::MulScalar)             \
  MG_FLOATING_UNARY(X, elementwise::DivScalar)             \
  MG_FLOATING_UNARY(X, elementwise::ScalarSub)             \
  MG_FLOATING_UNARY(X, elementwise::ScalarDiv)             \
  MG_FLOATING_BINARY(X, elementwise::AddScaled)            \
  X(elementwise::AddScaled, int64_t, int64_t, int64_t)     \
  X(elementwise::Mul, int64_t, int64_t, int64_t)           \
  X(elementwise::AddScalar, int64_t, int64_t)              \
  X(elementwise::MulScalar, int64_t, int64_t)              \
  X(elementwise::MaskedFill, float, float, bool)           \
  X(elementwise::MaskedFill, double, double, bool)         \
  X(elementwise::MaskedFill, Half, Half, bool)             \
  X(elementwise::MaskedFill, BFloat16, BFloat16, bool)     \
  X(elementwise::MaskedFill, int64_t, int64_t, bool)       \
  X(elementwise::MaskedFill, bool, bool, bool)             \
  MG_FLOATING_BINARY(X, elementwise::Maximum)              \
  MG_FLOATING_BINARY(X, elementwise::Minimum)              \
  MG_FLOATING_TERNARY(X, elementwise::ClampTensors)        \
  MG_FLOATING_BINARY(X, elementwise::LerpScalar)           \
  MG_FLOATING_TERNARY(X, elementwise::Lerp)

// The comparisons (tensor-tensor and tensor-scalar, every dtype, a bool result) and where;
// the bitwise ops on bool and int64 (the logical ops run on them, their operands made bool
// by ne(x, 0)); isinf, isfinite and isclose on the floating types.
#define MG_COMPARISON_KERNELS_FOR(X, T, Compare) \
  X(elementwise::Compare, bool, T, T)            \
  X(elementwise::CompareWithScalar<elementwise::Compare>, bool, T)
#define MG_COMPARISON_KERNELS(X, Compare)              \
  MG_COMPARISON_KERNELS_FOR(X, float, Compare)         \
  MG_COMPARISON_KERNELS_FOR(X, double, Compare)        \
  MG_COMPARISON_KERNELS_FOR(X, Half, Compare)          \
  MG_COMPARISON_KERNELS_FOR(X, BFloat16, Compare)      \
  MG_COMPARISON_KERNELS_FOR(X, int64_t, Compare)       \
  MG_COMPARISON_KERNELS_FOR(X, bool, Compare)
#define MG_ELEMENTWISE_COMPARE_KERNELS(X)                     \
  MG_COMPARISON_KERNELS(X, Equal)                             \
  MG_COMPARISON_KERNELS(X, NotEqual)                          \
  MG_COMPARISON_KERNELS(X, Less)                              \
  MG_COMPARISON_KERNELS(X, LessEqual)                         \
  MG_COMPARISON_KERNELS(X, Greater)                           \
  MG_COMPARISON_KERNELS(X, GreaterEqual)                      \
  X(elementwise::Select, float, bool, float, float)           \
  X(elementwise::Select, double, bool, double, double)        \
  X(elementwise::Select, Half, bool, Half, Half)              \
  X(elementwise::Select, BFloat16, bool, BFloat16, BFloat16)  \
  X(elementwise::Select, int64_t, bool, int64_t, int64_t)     \
  X(elementwise::Select, bool, bool, bool, bool)              \
  X(elementwise::BitwiseAnd, bool, bool, bool)                \
  X(elementwise::BitwiseAnd, int64_t, int64_t, int64_t)       \
  X(elementwise::BitwiseOr, bool, bool, bool)                 \
  X(elementwise::BitwiseOr, int64_t, int64_t, int64_t)        \
  X(elementwise::BitwiseXor, bool, bool, bool)                \
  X(elementwise::BitwiseXor, int64_t, int64_t, int64_t)       \
  X(elementwise::BitwiseNot, bool, bool)                      \
  X(elementwise::BitwiseNot, int64_t, int64_t)                \
  MG_FLOATING_TEST(X, elementwise::IsInf)                     \
  MG_FLOATING_TEST(X, elementwise::IsFinite)                  \
  X(elementwise::IsClose, bool, float, float)                 \
  X(elementwise::IsClose, bool, double, double)               \
  X(elementwise::IsClose, bool, Half, Half)                   \
  X(elementwise::IsClose, bool, BFloat16, BFloat16)

// relu, gelu (both forms) and softplus, forward and backward; silu, leaky_relu and elu,
// forward only (their backward is written with public ops).
#define MG_ELEMENTWISE_ACTIVATION_KERNELS(X)            \
  MG_FLOATING_UNARY(X, elementwise::Relu)               \
  MG_FLOATING_BINARY(X, elementwise::ReluBackward)      \
  MG_FLOATING_UNARY(X, elementwise::GeluExact)          \
  MG_FLOATING_UNARY(X, elementwise::GeluTanh)           \
  MG_FLOATING_BINARY(X, elementwise::GeluExactBackward) \
  MG_FLOATING_BINARY(X, elementwise::GeluTanhBackward)  \
  MG_FLOATING_UNARY(X, elementwise::Softplus)           \
  MG_FLOATING_BINARY(X, elementwise::SoftplusBackward)  \
  MG_FLOATING_UNARY(X, elementwise::Silu)               \
  MG_FLOATING_UNARY(X, elementwise::LeakyRelu)          \
  MG_FLOATING_UNARY(X, elementwise::Elu)

// ---- dropout (ops/dropout.cpp): x or the gradient times the Philox keep-mask, scaled ----
#define MG_ELEMENTWISE_DROPOUT_KERNELS(X) MG_FLOATING_UNARY(X, elementwise::DropoutScale)
// ---- end of dropout ----

#define MG_ELEMENTWISE_KERNELS(X)        \
  MG_ELEMENTWISE_MATH_KERNELS(X)         \
  MG_ELEMENTWISE_ARITHMETIC_KERNELS(X)   \
  MG_ELEMENTWISE_COMPARE_KERNELS(X)      \
  MG_ELEMENTWISE_ACTIVATION_KERNELS(X)   \
  MG_ELEMENTWISE_DROPOUT_KERNELS(X)

namespace minigrad {

// is_listed_elementwise<F, out_t, in_t...>: whether an entry is listed. MG_LIST_ELEMENTWISE
// marks one, inside namespace minigrad: here for the library's list, and in a program's own
// header for the functors it adds (tests/elementwise_test_functors.h does).
template <typename F, typename out_t, typename... in_t>
struct is_listed_elementwise : std::false_type {};

#define MG_LIST_ELEMENTWISE(F, ...) \
  template <>                       \
  struct is_listed_elementwise<F, __VA_ARGS__> : std::true_type {};
MG_ELEMENTWISE_KERNELS(MG_LIST_ELEMENTWISE)

}  // namespace minigrad
