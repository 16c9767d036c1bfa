#pragma once
// The reductions on the GPU (cuda/reduce.cu), called by ops/reduce.cpp. Plain C++: tensors
// come in, and the launchers work out the pointers, sizes and strides the kernels take.
//
// Each output is contiguous and holds the kept dims of x in order: keepdim or not, the
// memory is the same. The launchers run on x's device and its current stream.
#include <cstdint>
#include <vector>

#include <minigrad/core/tensor.h>
#include <minigrad/kernels/reduce_combine.h>

namespace minigrad {
namespace cuda {

// out = the sum of x over the dims marked in `reduced`, divided by `divisor` (1 for a sum,
// the element count for a mean; a mean of nothing is 0 / 0 = NaN). float32 and float64
// accumulate in double (the CPU kernel too, except that it adds float32 in runs of 8 in
// float first, where the conversions would cost it a third); float16 and bfloat16 load natively and
// accumulate in float; int64 and bool accumulate in uint64 (wrapping around on overflow,
// as the CPU does), and out is int64.
void sum_reduce(const Tensor& x, const std::vector<bool>& reduced, double divisor, const Tensor& out);

// values and indices (int64) = the maximum (or minimum) of x over the dims marked in
// `reduced` (each of size at least 1) and its position among them (the row-major index over
// the reduced dims; for one dim, the index along it): the first extremum, and a NaN beats
// every number (kernels/reduce_combine.h, the rule the CPU kernel uses, so both backends
// pick the same element).
void extremum_reduce(const Tensor& x, const std::vector<bool>& reduced, Extremum kind, const Tensor& values,
                     const Tensor& indices);

// out = the product of x over the dims marked in `reduced` (1 where they hold no element),
// accumulated as sum_reduce accumulates; x is float32, float64 or int64 (wrapping around):
// ops/reduce.cpp hands float16/bfloat16 over as float32 and bool as int64.
void prod_reduce(const Tensor& x, const std::vector<bool>& reduced, const Tensor& out);

// out = the running sum of x (contiguous, read as [outer, length, inner]) along its middle
// dim, from the end when `reverse`; out is contiguous, of x's shape, int64 for int64 and
// bool inputs. Accumulates as sum_reduce does.
void cumsum(const Tensor& x, int64_t outer, int64_t length, int64_t inner, bool reverse, const Tensor& out);

}  // namespace cuda
}  // namespace minigrad
