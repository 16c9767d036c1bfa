// GELU, in the seed tutorial's shape: forward saves the input, backward computes
// grad * gelu'(x) from it. Both formulas live in ops/gelu_math.h (wrapped as functors in
// ops/elementwise_functors.h), shared with the CUDA kernel, so every backend computes the
// same expression.
//
// The seed wrote backward as five separate tensor ops (exp, square, divide, erf, multiply),
// each a pass over memory. Here backward is one kernel: a single pass reading grad and x
// and writing the result. Its composite twin, built from mul/add/erf (or tanh/pow), is in
// tests/test_activations.cpp, and the two agree in value and gradient.
#include "autograd/function.h"
#include "ops/cpu_loops.h"
#include "ops/ops.h"

namespace minigrad {
namespace {

const char* approximation_name(GeluApproximation approximate) {
  return approximate == GeluApproximation::Tanh ? "tanh" : "none";  // PyTorch's spelling
}

struct GELU : Function<GELU> {
  static Tensor forward(Context& ctx, const Tensor& x, GeluApproximation approximate) {
    Tensor out = approximate == GeluApproximation::Tanh ? unary_float_op("gelu", x, elementwise::GeluTanh{})
                                                        : unary_float_op("gelu", x, elementwise::GeluExact{});
    ctx.save_for_backward({x});
    ctx.saved_data["approximate"] = approximation_name(approximate);
    return out;
  }

  // One fused kernel over (grad, x). It is not itself built from differentiable ops, so
  // the tape cannot differentiate this backward again (no double backward for gelu).
  static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
    const Tensor x = ctx.saved_tensors()[0];
    const Tensor& grad = grad_outputs[0];
    const bool tanh_form = ctx.saved_data["approximate"].toString() == "tanh";
    Tensor grad_x = tanh_form ? binary_float_op("gelu_backward", grad, x, elementwise::GeluTanhBackward{})
                              : binary_float_op("gelu_backward", grad, x, elementwise::GeluExactBackward{});
    return {grad_x, Tensor()};
  }
};

}  // namespace

Tensor gelu(const Tensor& x, GeluApproximation approximate) { return GELU::apply(x, approximate); }

}  // namespace minigrad
