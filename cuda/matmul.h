#pragma once
// matmul on the GPU through cuBLAS (cuda/matmul.cpp), called by ops/matmul.cpp. Plain C++.
#include <minigrad/core/tensor.h>

namespace minigrad {
namespace cuda {

// out[batch..., m, n] = a[..., m, k] x b[..., k, n]: a and b are matrices or batches of them
// whose batch dims broadcast to out's; out is contiguous, of a's dtype (one of the four
// floating ones; a and b share it). Row-major or transposed operands (a .t() or
// .transpose(-1, -2) view) and broadcast batch dims (stride 0) are read in place; anything
// else is made contiguous first. On the current stream of the tensors' device.
void matmul(const Tensor& a, const Tensor& b, const Tensor& out);

// Whether float32 matmuls may use TF32 tensor cores (10-bit mantissas, about 8x the float32
// rate): off unless asked for, as in PyTorch (torch.backends.cuda.matmul.allow_tf32).
// float16, bfloat16 and float64 are not affected.
void set_matmul_allow_tf32(bool allow);
bool matmul_allow_tf32();

}  // namespace cuda
}  // namespace minigrad
