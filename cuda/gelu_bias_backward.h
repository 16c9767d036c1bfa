#pragma once
// linear_gelu's backward on the GPU (cuda/gelu_bias_backward.cu), called by ops/linear.cpp:
// gelu' applied to the incoming gradient and the bias gradient, the sum of the result's rows,
// in one pass. Plain C++; on the current stream of the tensors' device.
#include <minigrad/core/tensor.h>
#include <minigrad/ops/ops.h>  // GeluApproximation

namespace minigrad {
namespace cuda {

// grad and pre: contiguous [rows, n] of one floating dtype on one CUDA device. Writes
// d_pre ([rows, n], the same dtype) = grad * gelu'(pre), with the bits gelu_backward gives,
// and d_bias ([n], the same dtype) = d_pre summed over the rows: accumulated in float (double
// for float64) from the values before their rounding to the dtype, in a fixed order, so the
// same bits on every run. Returns false, having done nothing, where the rows cannot be read as
// 16-byte vectors (n not a multiple of a vector's elements, or a pointer not 16-byte aligned):
// the caller then runs the ops instead.
bool gelu_backward_and_bias_grad(const Tensor& grad, const Tensor& pre, GeluApproximation approximate,
                                 const Tensor& d_pre, const Tensor& d_bias);

}  // namespace cuda
}  // namespace minigrad
