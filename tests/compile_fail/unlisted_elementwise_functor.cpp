// Must NOT compile: an elementwise op whose functor is missing from kernels/elementwise_list.h.
// The test elementwise_list_refuses_unlisted_functor builds this file and passes only when the
// compiler stops with the list's static_assert, in every build (with or without CUDA), so a
// forgotten CUDA kernel can never reach a link step, or a user.
#include <minigrad/ops/cpu_loops.h>

namespace minigrad {

struct NotInTheList {
  template <typename T>
  MG_HOST_DEVICE T operator()(T v) const { return v; }
};

Tensor not_in_the_list(const Tensor& x) { return unary_float_op("not_in_the_list", x, NotInTheList{}); }

}  // namespace minigrad
