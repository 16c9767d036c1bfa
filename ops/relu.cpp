// ReLU, written the way a first lesson in custom Functions writes it:
//
//   class ReLU(torch.autograd.Function):
//       def forward(ctx, input):  ctx.save_for_backward(input); return input.clamp(min=0)
//       def backward(ctx, grad):  input, = ctx.saved_tensors; grad where input > 0 else 0
//
// The lesson: forward keeps what backward will need (here the input: the gradient depends
// on which side of 0 each element was on), and backward builds the input's gradient from
// it and the output's gradient. Skip the save_for_backward and backward has nothing to
// work with; the context's saved_tensors() then fails loudly instead of guessing.
//
// The second lesson: a backward calls only Functions. ReLU's backward is one kernel, so
// that kernel is a Function of its own (ReluBackward), with a backward of its own, and a
// backward run with create_graph records it like any op: relu is twice differentiable.
#include <minigrad/autograd/function.h>
#include <minigrad/ops/cpu_loops.h>
#include <minigrad/ops/ops.h>

namespace minigrad {
namespace {

// grad where x > 0, else 0 (a NaN x passes grad, as PyTorch's threshold_backward does).
// Written as where(x > 0, grad, 0) this is three passes over memory (the mask, the zeros,
// the select); one kernel over (grad, x) makes the same select in one pass, and an Inf or
// NaN gradient in a masked-out element still gives 0, not Inf * 0 = NaN.
//
// Its own derivatives: it is linear in grad, with the same mask (so d/dgrad is ReluBackward
// again, of the incoming gradient), and piecewise constant in x (d/dx is 0 wherever it is
// defined, as PyTorch takes it).
struct ReluBackward : Function<ReluBackward> {
  static Tensor forward(Context& ctx, const Tensor& grad, const Tensor& x) {
    ctx.save_for_backward({x});
    return binary_float_op("relu_backward", grad, x, elementwise::ReluBackward{});
  }
  static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
    const Tensor x = ctx.saved_tensors()[0];
    const Tensor& grad_grad_input = grad_outputs[0];
    return {ctx.needs_input_grad(0) ? ReluBackward::apply(grad_grad_input, x) : Tensor(),
            ctx.needs_input_grad(1) ? zeros_like(x) : Tensor()};
  }
};

struct ReLU : Function<ReLU> {
  static Tensor forward(Context& ctx, const Tensor& x) {
    Tensor out = unary_float_op("relu", x, elementwise::Relu{});  // NaN stays NaN
    ctx.save_for_backward({x});
    return out;
  }

  // d relu / dx is 1 where x > 0 and 0 where x < 0; at exactly 0 we take 0, as PyTorch does.
  static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
    const Tensor x = ctx.saved_tensors()[0];
    return {ReluBackward::apply(grad_outputs[0], x)};
  }
};

}  // namespace

Tensor relu(const Tensor& x) { return ReLU::apply(x); }

Tensor Tensor::relu() const { return minigrad::relu(*this); }

}  // namespace minigrad
