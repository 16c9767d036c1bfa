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
    // `v < 0 ? 0 : v` rather than `v > 0 ? v : 0`: a NaN input stays NaN (both
    // comparisons are false for NaN), so a bad value upstream is not silently zeroed.
    Tensor out = unary_float_op("relu", x, [](auto v) { return v < 0 ? decltype(v)(0) : v; });
    ctx.save_for_backward({x});
    return out;
  }

  // d relu / dx is 1 where x > 0 and 0 where x < 0; at exactly 0 we take 0, as PyTorch does.
  // where() rather than grad * mask, so an Inf or NaN gradient in a masked-out element
  // gives 0 and not Inf * 0 = NaN.
  static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
    const Tensor x = ctx.saved_tensors()[0];
    const Tensor& grad = grad_outputs[0];
    return {where(gt(x, 0.0), grad, zeros_like(grad))};
  }
};

}  // namespace

Tensor relu(const Tensor& x) { return ReLU::apply(x); }

}  // namespace minigrad
