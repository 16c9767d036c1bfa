// The CUDA kernels of relu and gelu (both forms), forward and backward: the elementwise
// engine (cuda/elementwise.cuh) instantiated for their functors. Each backward is one
// kernel over (grad, x), one pass over memory.
#include "cuda/elementwise.cuh"

namespace minigrad {
namespace cuda {

MG_ELEMENTWISE_UNARY_FLOATING(elementwise::Relu)
MG_ELEMENTWISE_BINARY_FLOATING(elementwise::ReluBackward)
MG_ELEMENTWISE_UNARY_FLOATING(elementwise::GeluExact)
MG_ELEMENTWISE_UNARY_FLOATING(elementwise::GeluTanh)
MG_ELEMENTWISE_BINARY_FLOATING(elementwise::GeluExactBackward)
MG_ELEMENTWISE_BINARY_FLOATING(elementwise::GeluTanhBackward)

}  // namespace cuda
}  // namespace minigrad
