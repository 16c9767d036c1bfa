#pragma once
// The values of rand and randn, one element at a time, for the CPU loop (ops/random.cpp)
// and the CUDA kernel (cuda/random.cu): element i of a random tensor is a pure function of
// (seed, offset, i) through Philox (kernels/philox.h), so both devices draw the same numbers
// whatever the launch shape. rand gives the same bits on both (integer math and exact
// scalings); randn's Box-Muller goes through log, sqrt, cos and sin in double, where the
// host's and CUDA's math libraries may differ by an ulp or so.
//
// T, the tensor's element type, decides how many Philox words an element takes: a double
// takes two words (53 bits), every other floating type one (24 bits).
#include <cmath>
#include <cstdint>
#include <type_traits>

#include <minigrad/core/dtype.h>
#include <minigrad/core/macros.h>
#include <minigrad/kernels/philox.h>

namespace minigrad {
namespace random_values {

// Uniform [0, 1): element i takes word i % 4 of Philox block i / 4 (a double: words
// 2 (i % 2) and 2 (i % 2) + 1 of block i / 2).
template <typename T>
MG_HOST_DEVICE double uniform(uint64_t seed, uint64_t offset, uint64_t i) {
  if constexpr (std::is_same_v<T, double>) {
    const philox::Uint4 block = philox::random_block(seed, offset, i / 2);
    const int lane = static_cast<int>(i % 2) * 2;
    return philox::uniform_double(philox::word(block, lane), philox::word(block, lane + 1));
  } else {
    const philox::Uint4 block = philox::random_block(seed, offset, i / 4);
    return static_cast<double>(philox::uniform_float(philox::word(block, static_cast<int>(i % 4))));
  }
}

// Standard normal by Box-Muller: each pair of uniforms (u1, u2) gives two normals, element
// 2k the cosine and 2k + 1 the sine of pair k. The pair's uniforms come from Philox block
// k / 2 (two words of it, one each) or, for a double, block k (all four words).
template <typename T>
MG_HOST_DEVICE double normal(uint64_t seed, uint64_t offset, uint64_t i) {
  using std::cos;
  using std::log;
  using std::sin;
  using std::sqrt;
  constexpr double kTwoPi = 6.283185307179586;
  const uint64_t pair = i / 2;
  double u1, u2;
  if constexpr (std::is_same_v<T, double>) {
    const philox::Uint4 b = philox::random_block(seed, offset, pair);
    u1 = philox::uniform_double(b.x, b.y);
    u2 = philox::uniform_double(b.z, b.w);
  } else {
    const philox::Uint4 b = philox::random_block(seed, offset, pair / 2);
    const int lane = static_cast<int>(pair % 2) * 2;
    u1 = philox::uniform_float(philox::word(b, lane));
    u2 = philox::uniform_float(philox::word(b, lane + 1));
  }
  const double radius = sqrt(-2.0 * log(1.0 - u1));  // 1 - u1 is in (0, 1]: log is finite
  return (i % 2 == 0) ? radius * cos(kTwoPi * u2) : radius * sin(kTwoPi * u2);
}

// A drawn double as the element stored: rounded once, the half types through float (as
// every creation function of core/creation.cpp stores a double).
template <typename T>
MG_HOST_DEVICE T to_element(double v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
    return T(static_cast<float>(v));
  else
    return static_cast<T>(v);
}

}  // namespace random_values
}  // namespace minigrad
