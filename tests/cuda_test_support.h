#pragma once
// Shared by the CUDA suites of the reductions, softmax, matmul and the views: each checks
// the CUDA kernels against the CPU kernels on the same values. Every TEST_CASE there is
// marked `* doctest::skip(!cuda_is_available())`, so a machine without a GPU skips it.
#include <vector>

#include "tests/test_support.h"

namespace minigrad {
namespace test {

constexpr Device kGpu = Device::cuda(0);

const std::vector<DType> kHalfDTypes = {kFloat16, kBFloat16};

// A leaf on the GPU holding x's values (x on the CPU), for a backward to fill its grad.
inline Tensor gpu_leaf(const Tensor& x) { return x.detach().to(kGpu).requires_grad_(); }

// What a float16/bfloat16 CUDA result is checked against: the CPU's float32 result on the
// same rounded inputs (the CUDA kernels load the half types and compute in float).
inline Tensor upcast(const Tensor& x) { return x.to(kFloat32); }

}  // namespace test
}  // namespace minigrad
