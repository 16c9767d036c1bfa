#pragma once
// The elementwise engine of a build without CUDA: each entry of a list of elementwise
// kernels defined to raise "<op>: this op has no CUDA backend in this build". Included by
// cuda/no_cuda_backend.cpp for the library's list (kernels/elementwise_list.h), and by a
// program's own stub file for the functors it lists itself (tests/elementwise_test_kernels_stub.cpp).
#include <minigrad/cuda/elementwise.h>

namespace minigrad {
namespace cuda {

[[noreturn]] void raise_no_cuda_backend(const char* op);  // cuda/no_cuda_backend.cpp

template <typename F, typename out_t, typename... in_t>
void ElementwiseKernel<F, out_t, in_t...>::launch(const char* op, const Tensor&, const Tensor*, const Inputs&,
                                                   const F&) {
  raise_no_cuda_backend(op);
}

}  // namespace cuda
}  // namespace minigrad

// The stub of one entry, written inside namespace minigrad::cuda (as MG_INSTANTIATE_ELEMENTWISE).
#define MG_STUB_ELEMENTWISE(F, ...) template struct ElementwiseKernel<F, __VA_ARGS__>;
