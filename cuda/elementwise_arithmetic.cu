// The CUDA kernels of the arithmetic ops (add, sub, mul, div with broadcasting, their
// tensor-scalar forms) and of the in-place updates (add_, mul_, masked_fill_): the
// elementwise engine (cuda/elementwise.cuh) instantiated for their functors.
#include "cuda/elementwise.cuh"

namespace minigrad {
namespace cuda {

MG_ELEMENTWISE_BINARY_FLOATING(elementwise::Add)
MG_ELEMENTWISE_BINARY_FLOATING(elementwise::Sub)
MG_ELEMENTWISE_BINARY_FLOATING(elementwise::Mul)
MG_ELEMENTWISE_BINARY_FLOATING(elementwise::Div)
MG_ELEMENTWISE_UNARY_FLOATING(elementwise::AddScalar)
MG_ELEMENTWISE_UNARY_FLOATING(elementwise::SubScalar)
MG_ELEMENTWISE_UNARY_FLOATING(elementwise::MulScalar)
MG_ELEMENTWISE_UNARY_FLOATING(elementwise::DivScalar)
MG_ELEMENTWISE_UNARY_FLOATING(elementwise::ScalarSub)
MG_ELEMENTWISE_UNARY_FLOATING(elementwise::ScalarDiv)

// In-place updates also take int64 tensors (add_, mul_), and masked_fill_ every dtype.
MG_ELEMENTWISE_BINARY_FLOATING(elementwise::AddScaled)
MG_ELEMENTWISE_BINARY(int64_t, int64_t, int64_t, elementwise::AddScaled)
MG_ELEMENTWISE_BINARY(int64_t, int64_t, int64_t, elementwise::Mul)
MG_ELEMENTWISE_UNARY(int64_t, int64_t, elementwise::AddScalar)
MG_ELEMENTWISE_UNARY(int64_t, int64_t, elementwise::MulScalar)
MG_ELEMENTWISE_BINARY(float, float, bool, elementwise::MaskedFill)
MG_ELEMENTWISE_BINARY(double, double, bool, elementwise::MaskedFill)
MG_ELEMENTWISE_BINARY(Half, Half, bool, elementwise::MaskedFill)
MG_ELEMENTWISE_BINARY(BFloat16, BFloat16, bool, elementwise::MaskedFill)
MG_ELEMENTWISE_BINARY(int64_t, int64_t, bool, elementwise::MaskedFill)
MG_ELEMENTWISE_BINARY(bool, bool, bool, elementwise::MaskedFill)

}  // namespace cuda
}  // namespace minigrad
