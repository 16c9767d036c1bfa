// The CUDA kernels of the activations (relu, gelu, softplus) and their backward: the elementwise engine (cuda/elementwise.cuh) compiled for
// their entries of kernels/elementwise_list.h.
#include <minigrad/cuda/elementwise.cuh>

namespace minigrad {
namespace cuda {

MG_ELEMENTWISE_ACTIVATION_KERNELS(MG_INSTANTIATE_ELEMENTWISE)

}  // namespace cuda
}  // namespace minigrad
