#pragma once
// The reductions on the GPU (cuda/reduce.cu), called by ops/reduce.cpp. Plain C++: tensors
// come in, and the launchers work out the pointers, sizes and strides the kernels take.
//
// Each output is contiguous and holds the kept dims of x in order: keepdim or not, the
// memory is the same. The launchers run on x's device and its current stream.
#include <cstdint>
#include <vector>

#include <minigrad/core/tensor.h>

namespace minigrad {
namespace cuda {

// out = the sum of x over the dims marked in `reduced`, divided by `divisor` (1 for a sum,
// the element count for a mean; a mean of nothing is 0 / 0 = NaN). float32 and float64
// accumulate in double (the CPU kernel too, except that it adds float32 in runs of 8 in
// float first, where the conversions would cost it a third); float16 and bfloat16 load natively and
// accumulate in float; int64 and bool accumulate in uint64 (wrapping around on overflow,
// as the CPU does), and out is int64.
void sum_reduce(const Tensor& x, const std::vector<bool>& reduced, double divisor, const Tensor& out);

// values and indices (int64) = the maximum of x along `dim` (of size at least 1) and its
// position along dim: the first maximum, and a NaN beats every number (kernels/reduce_combine.h,
// the rule the CPU kernel uses, so both backends pick the same element).
void max_reduce(const Tensor& x, int64_t dim, const Tensor& values, const Tensor& indices);

}  // namespace cuda
}  // namespace minigrad
