#pragma once
// softmax and log_softmax on the GPU (cuda/softmax.cu), called by ops/softmax.cpp: row
// kernels along the last dim of contiguous tensors (ops/softmax.cpp moves any other dim
// last with a copy). Plain C++; on the current stream of the tensors' device.
#include <minigrad/core/tensor.h>

namespace minigrad {
namespace cuda {

// y = softmax(x), or log_softmax(x) when `log`, along the last dim. x and y contiguous, of
// one shape and one floating dtype. float16/bfloat16 load natively and compute in float.
void softmax_rows(const Tensor& x, const Tensor& y, bool log);

// The backward in one pass, from the forward's output y and its gradient grad (both
// contiguous, y's shape and dtype):
//   softmax:     grad_input = y * (grad - sum(grad * y))
//   log_softmax: grad_input = grad - exp(y) * sum(grad)
void softmax_backward_rows(const Tensor& grad, const Tensor& y, const Tensor& grad_input, bool log);

}  // namespace cuda
}  // namespace minigrad
