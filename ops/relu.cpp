// ReLU, written as the seed tutorial writes it: the first lesson in custom Functions.
//
//   class ReLU(torch.autograd.Function):
//       def forward(ctx, input):  ctx.save_for_backward(input); return input.clamp(min=0)
//       def backward(ctx, grad):  input, = ctx.saved_tensors; grad where input > 0 else 0
//
// The lesson: forward keeps what backward will need (here the input: the gradient depends
// on which side of 0 each element was on), and backward builds the input's gradient from
// it and the output's gradient. Skip the save_for_backward and backward has nothing to
// work with; the context's saved_tensors() then fails loudly instead of guessing.
#include "autograd/function.h"
#include "ops/cpu_loops.h"
#include "ops/ops.h"

namespace minigrad {
namespace {

struct ReLU : Function<ReLU> {
  static Tensor forward(Context& ctx, const Tensor& x) {
    Tensor out = unary_float_op("relu", x, elementwise::Relu{});  // NaN stays NaN
    ctx.save_for_backward({x});
    return out;
  }

  // d relu / dx is 1 where x > 0 and 0 where x < 0; at exactly 0 we take 0, as PyTorch does.
  // The seed writes this as where(x > 0, grad, 0): three passes over memory (the mask, the
  // zeros, the select). One kernel over (grad, x) does the same select in one pass, and an
  // Inf or NaN gradient in a masked-out element still gives 0, not Inf * 0 = NaN.
  static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
    const Tensor x = ctx.saved_tensors()[0];
    return {binary_float_op("relu_backward", grad_outputs[0], x, elementwise::ReluBackward{})};
  }
};

}  // namespace

Tensor relu(const Tensor& x) { return ReLU::apply(x); }

}  // namespace minigrad
