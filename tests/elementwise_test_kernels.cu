// The test-only functors of tests/elementwise_test_functors.h compiled for the GPU, as a
// program compiles its own elementwise functors: the engine of cuda/elementwise.cuh for the
// entries of its own list. Linked into test_cuda_elementwise only (CMakeLists.txt).
#include <minigrad/cuda/elementwise.cuh>
#include "tests/elementwise_test_functors.h"

namespace minigrad {
namespace cuda {

MG_TEST_ELEMENTWISE_KERNELS(MG_INSTANTIATE_ELEMENTWISE)

}  // namespace cuda
}  // namespace minigrad
