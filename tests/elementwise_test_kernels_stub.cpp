// The test-only functors of tests/elementwise_test_functors.h in a build without CUDA: the
// same entries as tests/elementwise_test_kernels.cu, defined as stubs that raise (the CUDA
// test cases that would call them are skipped).
#include <minigrad/cuda/elementwise_stub.h>
#include "tests/elementwise_test_functors.h"

namespace minigrad {
namespace cuda {

MG_TEST_ELEMENTWISE_KERNELS(MG_STUB_ELEMENTWISE)

}  // namespace cuda
}  // namespace minigrad
