// softplus(x) = log(1 + exp(beta x)) / beta: a smooth relu, and the worked example of
// docs/adding-an-op.md. Every piece of an elementwise op is here or one file away:
//
//   kernels/elementwise_functors.h  the formulas, Softplus and SoftplusBackward, one
//                                   definition for the CPU loop and the CUDA kernel;
//   kernels/elementwise_list.h      the two functors over the four floating dtypes: the
//                                   list both backends compile (a missing entry is a
//                                   compile error of this file, in every build);
//   this file                       the Functions: forward, backward, and the backward's
//                                   own backward (softplus is twice differentiable);
//   ops/ops.h                       the public function.
#include <minigrad/autograd/function.h>
#include <minigrad/ops/cpu_loops.h>
#include <minigrad/ops/ops.h>

namespace minigrad {
namespace {

// grad * sigmoid(beta x), and grad where beta x > threshold: one kernel over (grad, x).
//
// Its own derivatives, for double backward: it is linear in grad (d/dgrad is the same
// kernel applied to the incoming gradient), and d/dx of grad * s(beta x) is
// grad * beta * s (1 - s), 0 where beta x > threshold (the forward is x there). That second
// part is written with ops on the tape, so it is differentiable in turn.
struct SoftplusBackward : Function<SoftplusBackward> {
  struct State {
    double beta;
    double threshold;
  };
  static Tensor forward(Context& ctx, const Tensor& grad, const Tensor& x, double beta, double threshold) {
    ctx.save_for_backward({grad, x});
    ctx.state<State>() = {beta, threshold};
    return binary_float_op("softplus_backward", grad, x, elementwise::SoftplusBackward{beta, threshold});
  }
  static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
    const tensor_list saved = ctx.saved_tensors();
    const Tensor& grad = saved[0];
    const Tensor& x = saved[1];
    const State& s = ctx.state<State>();
    const Tensor& grad_grad_input = grad_outputs[0];
    Tensor grad_grad, grad_x;
    if (ctx.needs_input_grad(0)) grad_grad = SoftplusBackward::apply(grad_grad_input, x, s.beta, s.threshold);
    if (ctx.needs_input_grad(1)) {
      const Tensor bx = x * s.beta;
      const Tensor sig = sigmoid(bx);
      const Tensor inside = grad_grad_input * grad * (sig * (1.0 - sig)) * s.beta;
      grad_x = where(gt(bx, s.threshold), zeros_like(inside), inside);
    }
    return {grad_grad, grad_x, Tensor(), Tensor()};
  }
};

struct Softplus : Function<Softplus> {
  struct State {
    double beta;
    double threshold;
  };
  static Tensor forward(Context& ctx, const Tensor& x, double beta, double threshold) {
    MG_CHECK(beta != 0.0, "softplus: beta must not be 0 (it divides), got {}", beta);
    Tensor out = unary_float_op("softplus", x, elementwise::Softplus{beta, threshold});
    ctx.save_for_backward({x});
    ctx.state<State>() = {beta, threshold};
    return out;
  }
  static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
    const Tensor x = ctx.saved_tensors()[0];
    const State& s = ctx.state<State>();
    return {SoftplusBackward::apply(grad_outputs[0], x, s.beta, s.threshold), Tensor(), Tensor()};
  }
};

}  // namespace

Tensor softplus(const Tensor& x, double beta, double threshold) { return Softplus::apply(x, beta, threshold); }

Tensor Tensor::softplus(double beta, double threshold) const { return minigrad::softplus(*this, beta, threshold); }

}  // namespace minigrad
