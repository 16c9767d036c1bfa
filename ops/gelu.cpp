// GELU as a custom Function: forward saves the input, backward computes grad * gelu'(x)
// from it. Both formulas live in kernels/gelu_math.h (wrapped as functors in
// kernels/elementwise_functors.h), shared with the CUDA kernel, so every backend computes the
// same expression.
//
// Written with the public ops, backward would be five separate tensor ops (exp, square,
// divide, erf, multiply), each a pass over memory. Here it is one kernel: a single pass
// reading grad and x and writing the result. Its composite twin, built from mul/add/erf
// (or tanh/pow), is in tests/test_activations.cpp, and the two agree in value and gradient.
//
// A backward calls only Functions, so the fused kernel is a Function of its own
// (GeluBackward), whose backward is written with the public ops: gelu is differentiable
// any number of times, and the hot first backward stays one kernel.
#include <minigrad/autograd/function.h>
#include <minigrad/ops/cpu_loops.h>
#include <minigrad/ops/ops.h>

namespace minigrad {
namespace {

using gelu_math::kInvSqrt2Pi;      // phi's constant, 1/sqrt(2*pi)
using gelu_math::kSqrt2OverPi;     // the tanh form's constants
using gelu_math::kTanhCubicCoeff;

// Beyond |x| = 40 both forms are flat to every floating type's precision: phi(40) =
// exp(-800) / sqrt(2 pi) is below the smallest double, and the tanh form's sigmoid is
// exactly 0 or 1. The second derivatives clamp x there, so that an infinite x gives their
// limit 0 instead of inf * 0 = NaN (clamp keeps NaN, and its gradient is 0 outside).
constexpr double kFlatBeyond = 40.0;

// gelu''(x) for the exact form, from the public ops (so it is differentiable again):
// d/dx [Phi(x) + x phi(x)] = phi(x) + phi(x) + x phi'(x), and phi'(x) = -x phi(x), so
// gelu''(x) = phi(x) (2 - x^2).
Tensor gelu_exact_second_derivative(const Tensor& x) {
  const Tensor xc = clamp(x, -kFlatBeyond, kFlatBeyond);
  const Tensor x_squared = xc * xc;
  const Tensor pdf = exp(x_squared * -0.5) * kInvSqrt2Pi;
  return pdf * rsub(2.0, x_squared);
}

// gelu''(x) for the tanh form. With u = c (x + k x^3), s = sigmoid(2u), a = 2u' =
// 2c (1 + 3k x^2) and w = s (1 - s) = s' / a:
//   gelu'  = s + x w a
//   gelu'' = w a + w a + x (w' a + w a'),  w' = w a (1 - 2s),  a' = 12 c k x
//          = w (2a + x (a^2 (1 - 2s) + a')).
// 1 - s is sigmoid(-2u), not 1 - s, which cancels to 0 where s rounds to 1. The products
// keep w (tiny in the tails) first, so that half types do not overflow a^2 x.
Tensor gelu_tanh_second_derivative(const Tensor& x) {
  const Tensor xc = clamp(x, -kFlatBeyond, kFlatBeyond);
  const Tensor x_squared = xc * xc;
  const Tensor two_u = xc * (x_squared * kTanhCubicCoeff + 1.0) * (2.0 * kSqrt2OverPi);
  const Tensor s = sigmoid(two_u);
  const Tensor w = s * sigmoid(-two_u);
  const Tensor a = (x_squared * (3.0 * kTanhCubicCoeff) + 1.0) * (2.0 * kSqrt2OverPi);
  const Tensor da_dx = xc * (12.0 * kSqrt2OverPi * kTanhCubicCoeff);
  const Tensor wa = w * a;
  return wa * 2.0 + xc * (wa * a * rsub(1.0, s * 2.0) + w * da_dx);
}

// grad * gelu'(x) in one kernel over (grad, x). It is linear in grad: d/dgrad is
// GeluBackward of the incoming gradient. d/dx is gg * grad * gelu''(x).
struct GeluBackward : Function<GeluBackward> {
  struct State {
    GeluApproximation approximate = GeluApproximation::None;
  };
  static Tensor forward(Context& ctx, const Tensor& grad, const Tensor& x, GeluApproximation approximate) {
    ctx.state<State>().approximate = approximate;
    ctx.save_for_backward({grad, x});
    return approximate == GeluApproximation::Tanh
               ? binary_float_op("gelu_backward", grad, x, elementwise::GeluTanhBackward{})
               : binary_float_op("gelu_backward", grad, x, elementwise::GeluExactBackward{});
  }
  static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
    const GeluApproximation approximate = ctx.state<State>().approximate;
    const tensor_list saved = ctx.saved_tensors();
    const Tensor& grad = saved[0];
    const Tensor& x = saved[1];
    const Tensor& grad_grad_input = grad_outputs[0];
    Tensor grad_grad, grad_x;
    if (ctx.needs_input_grad(0)) grad_grad = GeluBackward::apply(grad_grad_input, x, approximate);
    if (ctx.needs_input_grad(1)) {
      const Tensor second = approximate == GeluApproximation::Tanh ? gelu_tanh_second_derivative(x)
                                                                   : gelu_exact_second_derivative(x);
      grad_x = grad_grad_input * grad * second;
    }
    return {grad_grad, grad_x, Tensor()};
  }
};

struct GELU : Function<GELU> {
  struct State {
    GeluApproximation approximate = GeluApproximation::None;
  };
  static Tensor forward(Context& ctx, const Tensor& x, GeluApproximation approximate) {
    Tensor out = approximate == GeluApproximation::Tanh ? unary_float_op("gelu", x, elementwise::GeluTanh{})
                                                        : unary_float_op("gelu", x, elementwise::GeluExact{});
    ctx.save_for_backward({x});
    ctx.state<State>().approximate = approximate;
    return out;
  }
  static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
    const Tensor x = ctx.saved_tensors()[0];
    return {GeluBackward::apply(grad_outputs[0], x, ctx.state<State>().approximate), Tensor()};
  }
};

}  // namespace

Tensor gelu(const Tensor& x, GeluApproximation approximate) { return GELU::apply(x, approximate); }

Tensor gelu_backward(const Tensor& grad, const Tensor& x, GeluApproximation approximate) {
  return GeluBackward::apply(grad, x, approximate);
}

Tensor Tensor::gelu() const { return minigrad::gelu(*this); }
Tensor Tensor::gelu(GeluApproximation approximate) const { return minigrad::gelu(*this, approximate); }

}  // namespace minigrad
