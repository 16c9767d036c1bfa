// The CUDA kernels of dropout, forward and backward: the elementwise engine (cuda/elementwise.cuh)
// compiled for its entries of kernels/elementwise_list.h, in a file of their own so that it
// compiles in parallel with the other groups.
#include <minigrad/cuda/elementwise.cuh>

namespace minigrad {
namespace cuda {

MG_ELEMENTWISE_DROPOUT_KERNELS(MG_INSTANTIATE_ELEMENTWISE)

}  // namespace cuda
}  // namespace minigrad
