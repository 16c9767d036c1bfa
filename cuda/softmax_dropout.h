#pragma once
// softmax_dropout on the GPU (cuda/softmax_dropout.cu), called by ops/dropout.cpp: row kernels
// along the last dim of a contiguous x (ops/dropout.cpp moves another dim last with a copy).
// Plain C++; on the current stream of the tensors' device.
#include <minigrad/core/shape.h>
#include <minigrad/core/tensor.h>
#include <minigrad/kernels/dropout.h>

namespace minigrad {
namespace cuda {

// What the kernels apply to the rows of x, besides x. Shapes and strides are those of the
// rows' tensor (x with the softmax dim last), one entry per dim.
struct SoftmaxDropoutRows {
  Shape sizes;
  // The index of each element in the row-major order of the caller's x, which decides its
  // dropout: sum of coordinate * index_strides. With the softmax dim already last it is the
  // element's own offset (index_strides are the contiguous strides).
  Shape index_strides;
  // Undefined, or bool (false masks out) or x's dtype (added), read at these strides (0 where
  // broadcast): never expanded to x's shape.
  Tensor mask;
  Shape mask_strides;
  double scale = 1.0;      // multiplies x before the mask is added
  bool is_causal = false;  // column j > row i of the last two dims masked out
  bool drop = false;       // false: y is P
  dropout_bits::Mask dropout;
};

// P = softmax(scale * x + mask) along the last dim (a fully masked row gives zeros) and
// y = P * keep / (1 - p_q) (y = P when rows.drop is false), and each row's log-sum-exp
// L = log(sum(exp(scale * x + mask))), +inf for a fully masked row, which the backward
// recomputes P from. x and y contiguous, of one shape and one floating dtype; log_sum_exp
// contiguous, one element a row, float (double for a double x). float16/bfloat16 compute in
// float.
void softmax_dropout_rows(const Tensor& x, const SoftmaxDropoutRows& rows, const Tensor& y,
                          const Tensor& log_sum_exp);

// grad_input = scale * P * (dP - sum(dP * P)), P = exp(scale * x + mask - L),
// dP = grad * keep / (1 - p_q), in one pass over grad and x (contiguous, of one shape and
// dtype) for rows of up to 4096 elements, two for longer ones.
void softmax_dropout_backward_rows(const Tensor& grad, const Tensor& x, const Tensor& log_sum_exp,
                                   const SoftmaxDropoutRows& rows, const Tensor& grad_input);

}  // namespace cuda
}  // namespace minigrad
