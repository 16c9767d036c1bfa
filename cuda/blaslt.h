#pragma once
// GEMMs with an epilogue, through cuBLASLt (cuda/blaslt.cpp), called by ops/linear.cpp.
// Plain C++; on the current stream of the tensors' device.
//
// An epilogue is work the GEMM does on its output tile while the tile is still in
// registers: adding a bias, applying GELU, or summing the tile for a bias gradient. Done
// there, it costs no pass over memory; done as its own op after the GEMM, it reads and
// writes the whole output once more. cuBLASLt's GELU is the tanh form.
#include <cstdint>

#include <minigrad/core/tensor.h>

namespace minigrad {
namespace cuda {

enum class GemmEpilogue {
  None,
  Bias,           // out = a b + bias, bias [n] added to every row
  Gelu,           // out = gelu_tanh(a b); aux = a b where aux is given (the pre-activation the
                  // backward needs: a forward that records nothing passes none and writes less)
  GeluBias,       // out = gelu_tanh(a b + bias); aux = a b + bias where aux is given
  DGelu,          // out = (a b) * gelu_tanh'(aux)
  DGeluBiasGrad,  // out = (a b) * gelu_tanh'(aux); bias [n] = out summed over its rows (no op uses
                  // it: slower than DGelu then BiasGradOfA on dW's GEMM, docs/perf-notes.md)
  BiasGradOfA,    // out = a b; bias [m] = a summed along k (its row sums), read as the GEMM reads a
};

// out [m, n] = a [m, k] x b [k, n], then the epilogue. a and b are 2-D, row-major or
// transposed views (as matmul reads them in place), of out's dtype; out, aux and bias are
// contiguous. Returns false, having done nothing, where cuBLASLt has no kernel for the case
// (a dtype or epilogue it does not offer, an alignment it needs): the caller then runs the
// GEMM and the epilogue's op separately.
bool gemm_with_epilogue(const Tensor& a, const Tensor& b, const Tensor& out, GemmEpilogue epilogue,
                        const Tensor& bias = Tensor(), const Tensor& aux = Tensor());

// How many calls returned false since the program started: the tests check that the cases
// cuBLASLt should serve take the fused path.
int64_t gemm_with_epilogue_fallbacks();

}  // namespace cuda
}  // namespace minigrad
