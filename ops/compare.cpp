// Comparisons (eq, ne, lt, le, gt, ge), where, and masked_fill out of place.
//
// Comparisons return bool tensors. They are not differentiable (a step function has
// gradient 0 almost everywhere and none at the step), so they are plain functions, not
// Functions: their outputs never require grad and nothing is recorded on the tape.
// They take every dtype, both operands of one dtype, with NumPy broadcasting.
//
// where(condition, a, b) picks elementwise and is differentiable in a and b: each gets
// the output's gradient where it was picked and 0 where it was not.
#include <type_traits>

#include <minigrad/autograd/function.h>
#include <minigrad/ops/cpu_loops.h>
#include <minigrad/ops/ops.h>

namespace minigrad {
namespace {

// tensor (cmp) tensor, broadcasting. `Compare` is one of the comparison functors.
template <typename Compare>
Tensor compare_tensors(const char* op, const Tensor& a, const Tensor& b) {
  check_defined(op, "self", a);
  check_defined(op, "other", b);
  check_same_device(op, "self", a, "other", b);
  check_same_dtype(op, "self", a, "other", b);
  Tensor out = empty(broadcast_shapes(a.sizes(), b.sizes(), op), TensorOptions(kBool).device(a.device()));
  dispatch_all(a.dtype(), [&](auto tag) {
    using scalar_t = decltype(tag);
    elementwise_map<bool, scalar_t, scalar_t>(op, out, a, b, Compare{});
  });
  return out;
}

// b rounded to the element type T where T is a floating type (as ops.h promises, "a double
// scalar takes the tensor's dtype": a float32 tensor holding 0.1f is eq(x, 0.1)), and kept
// as it is for int64 and bool, which compare in double (see CompareWithScalar).
template <typename T>
double scalar_for_comparison(double b) {
  if constexpr (std::is_integral_v<T>)
    return b;
  else
    return static_cast<double>(static_cast<compute_t<T>>(static_cast<T>(b)));
}

// tensor (cmp) scalar.
template <typename Compare>
Tensor compare_scalar(const char* op, const Tensor& a, double b) {
  check_defined(op, "self", a);
  Tensor out = empty(a.sizes(), TensorOptions(kBool).device(a.device()));
  dispatch_all(a.dtype(), [&](auto tag) {
    using scalar_t = decltype(tag);
    const elementwise::CompareWithScalar<Compare> compare{scalar_for_comparison<scalar_t>(b)};
    elementwise_map<bool, scalar_t>(op, out, a, compare);
  });
  return out;
}

// cond ? a : b. The kernel only moves elements, so it serves every dtype (no upcast).
struct Where : Function<Where> {
  struct State {
    Shape self_sizes;
    Shape other_sizes;
  };
  static Tensor forward(Context& ctx, const Tensor& condition, const Tensor& a, const Tensor& b) {
    check_defined("where", "condition", condition);
    check_defined("where", "self", a);
    check_defined("where", "other", b);
    MG_CHECK(condition.dtype() == kBool, "where: expected argument 'condition' to have dtype bool, got {}",
             condition.dtype());
    check_same_dtype("where", "self", a, "other", b);
    check_same_device("where", "condition", condition, "self", a);
    check_same_device("where", "self", a, "other", b);
    const Shape out_sizes =
        broadcast_shapes(condition.sizes(), broadcast_shapes(a.sizes(), b.sizes(), "where"), "where");
    Tensor out = empty(out_sizes, a.options());
    dispatch_all(a.dtype(), [&](auto tag) {
      using scalar_t = decltype(tag);
      elementwise_map<scalar_t, bool, scalar_t, scalar_t>("where", out, condition, a, b, elementwise::Select{});
    });
    ctx.save_for_backward({condition});
    ctx.state<State>() = {a.sizes(), b.sizes()};
    return out;
  }
  static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
    const Tensor& grad = grad_outputs[0];
    const Tensor condition = ctx.saved_tensors()[0];
    // One zero, broadcast by where to the gradient's shape: no zero-filled copy of grad.
    const Tensor zero = zeros({}, grad.options());
    const State& sizes = ctx.state<State>();
    Tensor grad_a, grad_b;
    if (ctx.needs_input_grad(1)) grad_a = sum_to(where(condition, grad, zero), sizes.self_sizes);
    if (ctx.needs_input_grad(2)) grad_b = sum_to(where(condition, zero, grad), sizes.other_sizes);
    return {Tensor(), grad_a, grad_b};
  }
};

// masked_fill out of place: value where mask, x elsewhere, x and mask broadcast to one shape
// (the in-place masked_fill_'s kernel, writing a new tensor). x gets the gradient where it
// was kept; the scalar value needs none.
struct MaskedFill : Function<MaskedFill> {
  struct State {
    Shape self_sizes;
  };
  static Tensor forward(Context& ctx, const Tensor& x, const Tensor& mask, double value) {
    check_defined("masked_fill", "self", x);
    check_defined("masked_fill", "mask", mask);
    MG_CHECK(mask.dtype() == kBool, "masked_fill: expected argument 'mask' to have dtype bool, got {}", mask.dtype());
    check_same_device("masked_fill", "self", x, "mask", mask);
    MG_CHECK(x.dtype() != kInt64 || fits_int64(value),
             "masked_fill: argument 'value' is {}, which an int64 tensor cannot hold", value);
    Tensor out = empty(broadcast_shapes(x.sizes(), mask.sizes(), "masked_fill"),
                       x.options());
    dispatch_all(x.dtype(), [&](auto tag) {
      using scalar_t = decltype(tag);
      elementwise_map<scalar_t, scalar_t, bool>("masked_fill", out, x, mask, elementwise::MaskedFill{value});
    });
    ctx.save_for_backward({mask});
    ctx.state<State>().self_sizes = x.sizes();
    return out;
  }
  static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
    const Tensor& grad = grad_outputs[0];
    const Tensor mask = ctx.saved_tensors()[0];
    const Tensor zero = zeros({}, grad.options());
    return {sum_to(where(mask, zero, grad), ctx.state<State>().self_sizes), Tensor(), Tensor()};
  }
};

// A scalar branch of where, as a 0-d tensor of the other branch's dtype and device: where
// broadcasts it, so no tensor of the output's size is made for it.
Tensor where_scalar(double value, const char* arg, const Tensor& like) {
  MG_CHECK(like.dtype() != kInt64 || fits_int64(value),
           "where: argument '{}' is {}, which the int64 result cannot hold", arg, value);
  return scalar_tensor(value, like.options());
}

}  // namespace

Tensor eq(const Tensor& a, const Tensor& b) { return compare_tensors<elementwise::Equal>("eq", a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare_tensors<elementwise::NotEqual>("ne", a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare_tensors<elementwise::Less>("lt", a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return compare_tensors<elementwise::LessEqual>("le", a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare_tensors<elementwise::Greater>("gt", a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare_tensors<elementwise::GreaterEqual>("ge", a, b); }

Tensor eq(const Tensor& a, double b) { return compare_scalar<elementwise::Equal>("eq", a, b); }
Tensor ne(const Tensor& a, double b) { return compare_scalar<elementwise::NotEqual>("ne", a, b); }
Tensor lt(const Tensor& a, double b) { return compare_scalar<elementwise::Less>("lt", a, b); }
Tensor le(const Tensor& a, double b) { return compare_scalar<elementwise::LessEqual>("le", a, b); }
Tensor gt(const Tensor& a, double b) { return compare_scalar<elementwise::Greater>("gt", a, b); }
Tensor ge(const Tensor& a, double b) { return compare_scalar<elementwise::GreaterEqual>("ge", a, b); }

Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b) { return Where::apply(condition, a, b); }
Tensor where(const Tensor& condition, double a, const Tensor& b) {
  check_defined("where", "other", b);
  return where(condition, where_scalar(a, "self", b), b);
}
Tensor where(const Tensor& condition, const Tensor& a, double b) {
  check_defined("where", "self", a);
  return where(condition, a, where_scalar(b, "other", a));
}
Tensor where(const Tensor& condition, double a, double b) {
  check_defined("where", "condition", condition);
  const TensorOptions options = TensorOptions(kFloat32).device(condition.device());
  return where(condition, scalar_tensor(a, options), scalar_tensor(b, options));
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) { return MaskedFill::apply(x, mask, value); }
// A 0-d tensor value is where(mask, value, x): the value is broadcast, and its gradient is
// the sum of the output's gradient over the filled elements.
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Tensor& value) {
  check_defined("masked_fill", "self", x);
  check_defined("masked_fill", "mask", mask);
  check_defined("masked_fill", "value", value);
  MG_CHECK(value.dim() == 0, "masked_fill: expected argument 'value' to be a 0-d tensor, got shape {}",
           shape_str(value.sizes()));
  MG_CHECK(mask.dtype() == kBool, "masked_fill: expected argument 'mask' to have dtype bool, got {}", mask.dtype());
  check_same_dtype("masked_fill", "self", x, "value", value);
  check_same_device("masked_fill", "self", x, "mask", mask);
  check_same_device("masked_fill", "self", x, "value", value);
  return where(mask, value, x);
}

// The member forms (core/tensor.h).
Tensor Tensor::eq(const Tensor& other) const { return minigrad::eq(*this, other); }
Tensor Tensor::eq(double other) const { return minigrad::eq(*this, other); }
Tensor Tensor::ne(const Tensor& other) const { return minigrad::ne(*this, other); }
Tensor Tensor::ne(double other) const { return minigrad::ne(*this, other); }
Tensor Tensor::lt(const Tensor& other) const { return minigrad::lt(*this, other); }
Tensor Tensor::lt(double other) const { return minigrad::lt(*this, other); }
Tensor Tensor::le(const Tensor& other) const { return minigrad::le(*this, other); }
Tensor Tensor::le(double other) const { return minigrad::le(*this, other); }
Tensor Tensor::gt(const Tensor& other) const { return minigrad::gt(*this, other); }
Tensor Tensor::gt(double other) const { return minigrad::gt(*this, other); }
Tensor Tensor::ge(const Tensor& other) const { return minigrad::ge(*this, other); }
Tensor Tensor::ge(double other) const { return minigrad::ge(*this, other); }
Tensor Tensor::masked_fill(const Tensor& mask, double value) const { return minigrad::masked_fill(*this, mask, value); }
Tensor Tensor::masked_fill(const Tensor& mask, const Tensor& value) const {
  return minigrad::masked_fill(*this, mask, value);
}

}  // namespace minigrad
