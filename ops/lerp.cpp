// lerp(start, end, weight) = start + weight * (end - start): linear interpolation, with a
// scalar weight or a tensor one, all operands broadcast (an exponential moving average of
// parameters is p.lerp(p_new, 0.01)).
//
// The kernel computes it from the nearer end (kernels/elementwise_functors.h, lerp_value),
// so weight 0 and weight 1 give start and end exactly. The gradients are those of the
// written formula: d/dstart = 1 - weight, d/dend = weight, d/dweight = end - start, written
// with public ops (lerp is twice differentiable).
#include <minigrad/autograd/function.h>
#include <minigrad/ops/cpu_loops.h>
#include <minigrad/ops/ops.h>

namespace minigrad {
namespace {

// The arguments' checks, with LibTorch's names for them: self (the start), end, weight.
void check_lerp_operand(const Tensor& start, const char* arg, const Tensor& t) {
  check_defined("lerp", arg, t);
  check_floating("lerp", arg, t);
  check_same_dtype("lerp", "self", start, arg, t);
  check_same_device("lerp", "self", start, arg, t);
}

struct LerpScalar : Function<LerpScalar> {
  struct State {
    Shape start_sizes;
    Shape end_sizes;
    double weight = 0.0;
  };
  static Tensor forward(Context& ctx, const Tensor& start, const Tensor& end, double weight) {
    check_defined("lerp", "self", start);
    check_floating("lerp", "self", start);
    check_lerp_operand(start, "end", end);
    Tensor out = binary_float_op("lerp", start, end, elementwise::LerpScalar{weight});
    ctx.state<State>() = {start.sizes(), end.sizes(), weight};
    return out;
  }
  static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
    const Tensor& grad = grad_outputs[0];
    const State& s = ctx.state<State>();
    return {ctx.needs_input_grad(0) ? sum_to(mul(grad, 1.0 - s.weight), s.start_sizes) : Tensor(),
            ctx.needs_input_grad(1) ? sum_to(mul(grad, s.weight), s.end_sizes) : Tensor(), Tensor()};
  }
};

struct LerpTensor : Function<LerpTensor> {
  static Tensor forward(Context& ctx, const Tensor& start, const Tensor& end, const Tensor& weight) {
    check_defined("lerp", "self", start);
    check_floating("lerp", "self", start);
    check_lerp_operand(start, "end", end);
    check_lerp_operand(start, "weight", weight);
    const Shape out_sizes =
        broadcast_shapes(start.sizes(), broadcast_shapes(end.sizes(), weight.sizes(), "lerp"), "lerp");
    Tensor out = empty(out_sizes, start.options());
    dispatch_floating(start.dtype(), [&](auto tag) {
      using scalar_t = decltype(tag);
      elementwise_map<scalar_t, scalar_t, scalar_t, scalar_t>("lerp", out, start, end, weight, elementwise::Lerp{});
    });
    ctx.save_for_backward({start, end, weight});
    return out;
  }
  static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
    const Tensor& grad = grad_outputs[0];
    const tensor_list saved = ctx.saved_tensors();
    const Tensor& start = saved[0];
    const Tensor& end = saved[1];
    const Tensor& weight = saved[2];
    Tensor grad_start, grad_end, grad_weight;
    if (ctx.needs_input_grad(0)) grad_start = sum_to(mul(grad, rsub(1.0, weight)), start.sizes());
    if (ctx.needs_input_grad(1)) grad_end = sum_to(mul(grad, weight), end.sizes());
    if (ctx.needs_input_grad(2)) grad_weight = sum_to(mul(grad, sub(end, start)), weight.sizes());
    return {grad_start, grad_end, grad_weight};
  }
};

}  // namespace

Tensor lerp(const Tensor& start, const Tensor& end, double weight) { return LerpScalar::apply(start, end, weight); }
Tensor lerp(const Tensor& start, const Tensor& end, const Tensor& weight) {
  return LerpTensor::apply(start, end, weight);
}

// The member forms (core/tensor.h).
Tensor Tensor::lerp(const Tensor& end, double weight) const { return minigrad::lerp(*this, end, weight); }
Tensor Tensor::lerp(const Tensor& end, const Tensor& weight) const { return minigrad::lerp(*this, end, weight); }

}  // namespace minigrad
