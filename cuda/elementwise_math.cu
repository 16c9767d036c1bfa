// The CUDA kernels of the elementwise math ops (neg, exp, log, sqrt, erf, tanh, sigmoid,
// abs, pow, clamp): the elementwise engine (cuda/elementwise.cuh) compiled for
// their entries of kernels/elementwise_list.h.
#include <minigrad/cuda/elementwise.cuh>

namespace minigrad {
namespace cuda {

MG_ELEMENTWISE_MATH_KERNELS(MG_INSTANTIATE_ELEMENTWISE)

}  // namespace cuda
}  // namespace minigrad
