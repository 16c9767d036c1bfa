// The CUDA kernels of the arithmetic ops (add, sub, mul, div, their tensor-scalar forms)
// and of the in-place updates (add_, mul_, masked_fill_): the elementwise engine (cuda/elementwise.cuh) compiled for
// their entries of kernels/elementwise_list.h.
#include <minigrad/cuda/elementwise.cuh>

namespace minigrad {
namespace cuda {

MG_ELEMENTWISE_ARITHMETIC_KERNELS(MG_INSTANTIATE_ELEMENTWISE)

}  // namespace cuda
}  // namespace minigrad
