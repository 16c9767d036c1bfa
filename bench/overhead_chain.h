#pragma once
// The chain both overhead benchmarks time (bench_overhead on the CPU, bench_gpu on the GPU):
// kChainLength small ops, four at a time, y * 0.5 + offset, then * 2 - 2 * offset.
// Multiplying by powers of two is exact, so the chain maps x back to x with gradient exactly
// 1, and neither values nor gradients drift into denormals however long it is.
#include <minigrad/minigrad.h>

namespace minigrad {
namespace bench {

constexpr int kChainLength = 2000;

inline Tensor run_chain(const Tensor& x, const Tensor& offset, const Tensor& twice_offset) {
  Tensor y = x;
  for (int i = 0; i < kChainLength; i += 4) {
    y = y * 0.5;
    y = y + offset;
    y = y * 2.0;
    y = y - twice_offset;
  }
  return y;
}

}  // namespace bench
}  // namespace minigrad
