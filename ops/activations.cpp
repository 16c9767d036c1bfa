// silu, leaky_relu and elu: activations whose forward is one kernel (a functor of
// kernels/elementwise_functors.h) and whose backward is written with public ops, so each is
// twice differentiable without a backward Function of its own (compare relu.cpp and
// softplus.cpp, whose backward is one fused kernel and a Function). The cost is a few
// passes over memory in backward instead of one.
#include <minigrad/autograd/function.h>
#include <minigrad/ops/cpu_loops.h>
#include <minigrad/ops/ops.h>

namespace minigrad {
namespace {

// silu(x) = x * s with s = sigmoid(x); d/dx = s + x s (1 - s) = s (1 + x (1 - s)).
struct Silu : Function<Silu> {
  static Tensor forward(Context& ctx, const Tensor& x) {
    Tensor out = unary_float_op("silu", x, elementwise::Silu{});
    ctx.save_for_backward({x});
    return out;
  }
  static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
    const Tensor x = ctx.saved_tensors()[0];
    const Tensor s = sigmoid(x);
    return {mul(grad_outputs[0], mul(s, add(mul(x, rsub(1.0, s)), 1.0)))};
  }
};

// The gradient where x > 0, slope times it elsewhere (at x = 0 too, as PyTorch takes it).
// A select, not a product with a mask: an Inf gradient on one side stays out of the other.
struct LeakyRelu : Function<LeakyRelu> {
  struct State {
    double negative_slope = 0.0;
  };
  static Tensor forward(Context& ctx, const Tensor& x, double negative_slope) {
    Tensor out = unary_float_op("leaky_relu", x, elementwise::LeakyRelu{negative_slope});
    ctx.save_for_backward({x});
    ctx.state<State>().negative_slope = negative_slope;
    return out;
  }
  static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
    const Tensor x = ctx.saved_tensors()[0];
    const Tensor& grad = grad_outputs[0];
    return {where(gt(x, 0.0), grad, mul(grad, ctx.state<State>().negative_slope)), Tensor()};
  }
};

// d/dx alpha (exp(x) - 1) = alpha exp(x) = out + alpha where x <= 0, and 1 where x > 0.
// From the output: out + alpha stays finite where the unpicked alpha * exp(x) of a large
// positive x would overflow (and its double backward would meet 0 * inf = NaN).
struct Elu : Function<Elu> {
  struct State {
    double alpha = 0.0;
  };
  static Tensor forward(Context& ctx, const Tensor& x, double alpha) {
    Tensor out = unary_float_op("elu", x, elementwise::Elu{alpha});
    ctx.save_for_backward({x, out});
    ctx.state<State>().alpha = alpha;
    return out;
  }
  static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
    const tensor_list saved = ctx.saved_tensors();
    const Tensor& x = saved[0];
    const Tensor& out = saved[1];
    const Tensor& grad = grad_outputs[0];
    return {where(gt(x, 0.0), grad, mul(grad, add(out, ctx.state<State>().alpha))), Tensor()};
  }
};

}  // namespace

Tensor silu(const Tensor& x) { return Silu::apply(x); }
Tensor leaky_relu(const Tensor& x, double negative_slope) { return LeakyRelu::apply(x, negative_slope); }
Tensor elu(const Tensor& x, double alpha) { return Elu::apply(x, alpha); }

}  // namespace minigrad
