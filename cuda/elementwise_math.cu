// The CUDA kernels of the elementwise math ops (neg, exp, log, sqrt, erf, tanh, sigmoid,
// abs, pow, clamp): the elementwise engine (cuda/elementwise.cuh) instantiated for their
// functors.
#include "cuda/elementwise.cuh"

namespace minigrad {
namespace cuda {

MG_ELEMENTWISE_UNARY_FLOATING(elementwise::Neg)
MG_ELEMENTWISE_UNARY_FLOATING(elementwise::Exp)
MG_ELEMENTWISE_UNARY_FLOATING(elementwise::Log)
MG_ELEMENTWISE_UNARY_FLOATING(elementwise::Sqrt)
MG_ELEMENTWISE_UNARY_FLOATING(elementwise::Erf)
MG_ELEMENTWISE_UNARY_FLOATING(elementwise::Tanh)
MG_ELEMENTWISE_UNARY_FLOATING(elementwise::Sigmoid)
MG_ELEMENTWISE_UNARY_FLOATING(elementwise::Abs)
MG_ELEMENTWISE_UNARY_FLOATING(elementwise::PowScalar)
MG_ELEMENTWISE_BINARY_FLOATING(elementwise::Pow)
MG_ELEMENTWISE_UNARY_FLOATING(elementwise::Clamp)

}  // namespace cuda
}  // namespace minigrad
