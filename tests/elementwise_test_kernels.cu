// The CUDA instantiations of tests/elementwise_test_functors.h, linked into
// test_cuda_elementwise only (CMakeLists.txt): the library's own maps are instantiated in
// cuda/elementwise_*.cu, and these test-only functors are no part of it.
#include "cuda/elementwise.cuh"
#include "tests/elementwise_test_functors.h"

namespace minigrad {
namespace cuda {

#define MG_TEST_UNARY(T, F) \
  template void launch_elementwise<T, T, F>(const char*, const Tensor&, const Tensor&, const F&);
#define MG_TEST_FOUR_INPUTS(T, F)                                                                           \
  template void launch_elementwise<T, T, T, T, T, F>(const char*, const Tensor&, const Tensor&, const Tensor&, \
                                                     const Tensor&, const Tensor&, const F&);
#define MG_TEST_TWO_OUTPUTS(T0, T1, T, F) \
  template void launch_elementwise2<T0, T1, T, F>(const char*, const Tensor&, const Tensor&, const Tensor&, const F&);
#define MG_TEST_TWO_OUTPUTS_TWO_INPUTS(T, F)                                                                \
  template void launch_elementwise2<T, T, T, T, F>(const char*, const Tensor&, const Tensor&, const Tensor&, \
                                                   const Tensor&, const F&);

#define MG_TEST_FLOATING(M, ...) \
  M(float, __VA_ARGS__)          \
  M(double, __VA_ARGS__)         \
  M(Half, __VA_ARGS__)           \
  M(BFloat16, __VA_ARGS__)

MG_TEST_FLOATING(MG_TEST_UNARY, test::AddIndex)
MG_TEST_FLOATING(MG_TEST_FOUR_INPUTS, test::FourInputStep)
MG_TEST_TWO_OUTPUTS(float, float, float, test::SinCos)
MG_TEST_TWO_OUTPUTS(double, double, double, test::SinCos)
MG_TEST_TWO_OUTPUTS(Half, Half, Half, test::SinCos)
MG_TEST_TWO_OUTPUTS(BFloat16, BFloat16, BFloat16, test::SinCos)
MG_TEST_TWO_OUTPUTS(float, bool, float, test::ScaleAndMask)
MG_TEST_TWO_OUTPUTS(double, bool, double, test::ScaleAndMask)
MG_TEST_TWO_OUTPUTS(BFloat16, bool, BFloat16, test::ScaleAndMask)
MG_TEST_FLOATING(MG_TEST_TWO_OUTPUTS_TWO_INPUTS, test::SumWithIndexAndProduct)

}  // namespace cuda
}  // namespace minigrad
