#pragma once
// The row normalizations on the GPU (cuda/normalization.cu), called by
// ops/normalization.cpp: each row of `hidden` contiguous elements is normalized, scaled,
// shifted and passed through the epilogue (kernels/normalization.h has the formulas).
// Plain C++; on the current stream of the tensors' device. `op` names the op in errors.
#include <cstdint>

#include <minigrad/core/tensor.h>
#include <minigrad/kernels/normalization.h>

namespace minigrad {
namespace cuda {

// x and y contiguous, of one shape and floating dtype, numel a multiple of hidden (> 0).
// weight and bias: [hidden] of x's dtype, or undefined (1 and 0). Writes the rows'
// statistics to mean (layer_norm only; undefined for rms_norm) and rstd, contiguous
// [rows] tensors of the accumulation type (float32 for the float types, float64 for float64).
void normalization_forward(const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias,
                           int64_t hidden, normalization::NormKind kind, normalization::Epilogue epilogue, double eps,
                           const Tensor& y, const Tensor& mean, const Tensor& rstd);

// The backward from grad (y's gradient, contiguous), x and the saved statistics. Each of
// grad_input ([x's shape]), grad_weight and grad_bias ([hidden], x's dtype) is written when
// defined and skipped when undefined. grad_weight and grad_bias are summed over the rows in
// a fixed order: the same bits on every run.
void normalization_backward(const char* op, const Tensor& grad, const Tensor& x, const Tensor& weight,
                            const Tensor& bias, const Tensor& mean, const Tensor& rstd, int64_t hidden,
                            normalization::NormKind kind, normalization::Epilogue epilogue, const Tensor& grad_input, const Tensor& grad_weight,
                            const Tensor& grad_bias);

}  // namespace cuda
}  // namespace minigrad
