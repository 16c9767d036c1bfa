// maximum and minimum of two tensors, and clamp with tensor bounds: elementwise picks
// between tensors, with broadcasting.
//
// Their gradients follow which input was picked. maximum(a, b) passes the output's gradient
// to a where a > b and to b where b > a; at a tie (a == b) the derivative is undefined, and
// each input gets half, as PyTorch does: the two halves sum to the gradient of the value
// both inputs share, and neither input is preferred. clamp(x, min, max) passes it to x where
// min <= x <= max (a tie goes to x, as in clamp with scalar bounds), to min where x < min
// and to max where x > max. Each gradient is written with where, so both ops are twice
// differentiable: the second derivative is 0 (the first is piecewise constant in the inputs).
#include <limits>
#include <optional>

#include <minigrad/autograd/function.h>
#include <minigrad/ops/cpu_loops.h>
#include <minigrad/ops/ops.h>

namespace minigrad {
namespace {

Tensor zero_scalar_like(const Tensor& t) { return zeros({}, t.options()); }

// The gradient of one input of maximum or minimum: none where the other input was picked
// (`lost`), half where the two are equal (`tied`), all of it elsewhere. NaN compares false
// both ways, so where either input is NaN both get the whole gradient (PyTorch's rule).
Tensor picked_share(const Tensor& grad, const Tensor& lost, const Tensor& tied, const Shape& input_sizes) {
  return sum_to(where(lost, zero_scalar_like(grad), where(tied, mul(grad, 0.5), grad)), input_sizes);
}

// The gradients of maximum (is_maximum) or minimum, from the saved inputs a and b.
tensor_list pick_gradients(Context& ctx, const Tensor& grad, bool is_maximum) {
  const tensor_list saved = ctx.saved_tensors();
  const Tensor& a = saved[0];
  const Tensor& b = saved[1];
  const Tensor tied = eq(a, b);
  // a lost where b was picked: b > a for maximum, b < a for minimum.
  const Tensor a_lost = is_maximum ? lt(a, b) : gt(a, b);
  const Tensor b_lost = is_maximum ? lt(b, a) : gt(b, a);
  return {ctx.needs_input_grad(0) ? picked_share(grad, a_lost, tied, a.sizes()) : Tensor(),
          ctx.needs_input_grad(1) ? picked_share(grad, b_lost, tied, b.sizes()) : Tensor()};
}

struct Maximum : Function<Maximum> {
  static Tensor forward(Context& ctx, const Tensor& a, const Tensor& b) {
    Tensor out = binary_float_op("maximum", a, b, elementwise::Maximum{});
    ctx.save_for_backward({a, b});
    return out;
  }
  static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
    return pick_gradients(ctx, grad_outputs[0], /*is_maximum=*/true);
  }
};

struct Minimum : Function<Minimum> {
  static Tensor forward(Context& ctx, const Tensor& a, const Tensor& b) {
    Tensor out = binary_float_op("minimum", a, b, elementwise::Minimum{});
    ctx.save_for_backward({a, b});
    return out;
  }
  static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
    return pick_gradients(ctx, grad_outputs[0], /*is_maximum=*/false);
  }
};

// min(max(x, lo), hi), all three broadcast. A bound left out is a 0-d infinity (see clamp
// below), which needs no gradient.
struct ClampTensors : Function<ClampTensors> {
  static Tensor forward(Context& ctx, const Tensor& x, const Tensor& lo, const Tensor& hi) {
    check_floating("clamp", "self", x);
    check_same_dtype("clamp", "self", x, "min", lo);
    check_same_dtype("clamp", "self", x, "max", hi);
    check_same_device("clamp", "self", x, "min", lo);
    check_same_device("clamp", "self", x, "max", hi);
    const Shape out_sizes = broadcast_shapes(x.sizes(), broadcast_shapes(lo.sizes(), hi.sizes(), "clamp"), "clamp");
    Tensor out = empty(out_sizes, x.options());
    dispatch_floating(x.dtype(), [&](auto tag) {
      using scalar_t = decltype(tag);
      elementwise_map<scalar_t, scalar_t, scalar_t, scalar_t>("clamp", out, x, lo, hi, elementwise::ClampTensors{});
    });
    ctx.save_for_backward({x, lo, hi});
    return out;
  }
  static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
    const Tensor& grad = grad_outputs[0];
    const tensor_list saved = ctx.saved_tensors();
    const Tensor& x = saved[0];
    const Tensor& lo = saved[1];
    const Tensor& hi = saved[2];
    const Tensor zero = zero_scalar_like(grad);
    const Tensor above_lo = ge(x, lo);
    const Tensor below_hi = le(x, hi);
    Tensor grad_x, grad_lo, grad_hi;
    if (ctx.needs_input_grad(0)) grad_x = sum_to(where(above_lo, where(below_hi, grad, zero), zero), x.sizes());
    if (ctx.needs_input_grad(1)) grad_lo = sum_to(where(above_lo, zero, grad), lo.sizes());
    if (ctx.needs_input_grad(2)) grad_hi = sum_to(where(below_hi, zero, grad), hi.sizes());
    return {grad_x, grad_lo, grad_hi};
  }
};

}  // namespace

Tensor maximum(const Tensor& a, const Tensor& b) { return Maximum::apply(a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return Minimum::apply(a, b); }

// An undefined Tensor in an optional counts as left out, as None does in PyTorch.
Tensor clamp(const Tensor& x, const std::optional<Tensor>& min, const std::optional<Tensor>& max) {
  const bool has_min = min.has_value() && min->defined();
  const bool has_max = max.has_value() && max->defined();
  MG_CHECK(has_min || has_max, "clamp: at least one of 'min' and 'max' must be given, got neither");
  check_defined("clamp", "self", x);
  check_floating("clamp", "self", x);
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const TensorOptions like_x = x.options();
  return ClampTensors::apply(x, has_min ? *min : full({}, -kInf, like_x), has_max ? *max : full({}, kInf, like_x));
}
Tensor clamp_min(const Tensor& x, const Tensor& min) { return clamp(x, min, std::nullopt); }
Tensor clamp_max(const Tensor& x, const Tensor& max) { return clamp(x, std::nullopt, max); }

// The member forms (core/tensor.h).
Tensor Tensor::maximum(const Tensor& other) const { return minigrad::maximum(*this, other); }
Tensor Tensor::minimum(const Tensor& other) const { return minigrad::minimum(*this, other); }
Tensor Tensor::clamp(const std::optional<Tensor>& min, const std::optional<Tensor>& max) const {
  return minigrad::clamp(*this, min, max);
}
Tensor Tensor::clamp_min(const Tensor& min) const { return minigrad::clamp_min(*this, min); }
Tensor Tensor::clamp_max(const Tensor& max) const { return minigrad::clamp_max(*this, max); }

}  // namespace minigrad
