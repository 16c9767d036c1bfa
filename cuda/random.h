#pragma once
// rand and randn drawn on the GPU: out's elements from the Philox stream (seed, offset), the
// same values the CPU draws (kernels/random.h has the formulas). out is a contiguous
// floating tensor on a GPU; the caller (ops/random.cpp) has reserved the stream.
#include <cstdint>

#include <minigrad/core/tensor.h>

namespace minigrad {
namespace cuda {

void fill_uniform(const Tensor& out, uint64_t seed, uint64_t offset);
void fill_normal(const Tensor& out, uint64_t seed, uint64_t offset);

}  // namespace cuda
}  // namespace minigrad
