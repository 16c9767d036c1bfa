// Arithmetic with NumPy broadcasting: add, sub, mul, div, their tensor-scalar forms, and
// rsub / rdiv (scalar on the left).
//
// Each op is a Function: forward runs the kernel (a functor of kernels/elementwise_functors.h
// handed to binary_float_op or unary_float_op, which run it on the input's device),
// backward turns the output's gradient into the inputs' gradients with the public ops.
// Broadcasting in forward means summing in backward: an input of shape [3] added to one of
// shape [2, 3] was used twice, so its gradient is the sum of the two rows of the output's
// gradient (sum_to does that).
#include <minigrad/autograd/function.h>
#include <minigrad/ops/cpu_loops.h>
#include <minigrad/ops/ops.h>

namespace minigrad {
namespace {

// The gradient of an input that was broadcast to the output's shape: summed back down to
// the input's own shape. Undefined when that input needs no gradient, so no work is done.
Tensor input_grad(const Context& ctx, size_t input, const Tensor& grad_of_output, const Shape& input_sizes) {
  if (!ctx.needs_input_grad(input)) return Tensor();
  return sum_to(grad_of_output, input_sizes);
}

// Add and Sub need only the inputs' shapes in backward (the derivative is +-1), so they
// keep the shapes, not the tensors: the inputs' memory can be freed after forward.
struct InputSizes {
  Shape self_sizes;
  Shape other_sizes;
};
void save_input_sizes(Context& ctx, const Tensor& a, const Tensor& b) {
  ctx.state<InputSizes>() = {a.sizes(), b.sizes()};
}

// The scalar of the tensor-scalar ops whose derivative depends on it.
struct ScalarArgument {
  double scalar = 0.0;
};

// ---- tensor (op) tensor ----

struct Add : Function<Add> {
  using State = InputSizes;
  static Tensor forward(Context& ctx, const Tensor& a, const Tensor& b) {
    Tensor out = binary_float_op("add", a, b, elementwise::Add{});
    save_input_sizes(ctx, a, b);
    return out;
  }
  static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
    const Tensor& grad = grad_outputs[0];
    const State& sizes = ctx.state<State>();
    return {input_grad(ctx, 0, grad, sizes.self_sizes), input_grad(ctx, 1, grad, sizes.other_sizes)};
  }
};

struct Sub : Function<Sub> {
  using State = InputSizes;
  static Tensor forward(Context& ctx, const Tensor& a, const Tensor& b) {
    Tensor out = binary_float_op("sub", a, b, elementwise::Sub{});
    save_input_sizes(ctx, a, b);
    return out;
  }
  static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
    const Tensor& grad = grad_outputs[0];
    Tensor grad_b = ctx.needs_input_grad(1) ? neg(grad) : Tensor();
    const State& sizes = ctx.state<State>();
    return {input_grad(ctx, 0, grad, sizes.self_sizes), input_grad(ctx, 1, grad_b, sizes.other_sizes)};
  }
};

// d(a*b)/da = b and d(a*b)/db = a: each input's gradient needs the other input.
struct Mul : Function<Mul> {
  static Tensor forward(Context& ctx, const Tensor& a, const Tensor& b) {
    Tensor out = binary_float_op("mul", a, b, elementwise::Mul{});
    ctx.save_for_backward({a, b});
    return out;
  }
  static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
    const Tensor& grad = grad_outputs[0];
    const tensor_list saved = ctx.saved_tensors();
    const Tensor& a = saved[0];
    const Tensor& b = saved[1];
    return {ctx.needs_input_grad(0) ? sum_to(mul(grad, b), a.sizes()) : Tensor(),
            ctx.needs_input_grad(1) ? sum_to(mul(grad, a), b.sizes()) : Tensor()};
  }
};

// d(a/b)/da = 1/b and d(a/b)/db = -a/b^2 = -(1/b) * (a/b): both share grad/b.
struct Div : Function<Div> {
  static Tensor forward(Context& ctx, const Tensor& a, const Tensor& b) {
    Tensor out = binary_float_op("div", a, b, elementwise::Div{});
    ctx.save_for_backward({a, b});
    return out;
  }
  static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
    const tensor_list saved = ctx.saved_tensors();
    const Tensor& a = saved[0];
    const Tensor& b = saved[1];
    const Tensor grad_over_b = div(grad_outputs[0], b);
    return {ctx.needs_input_grad(0) ? sum_to(grad_over_b, a.sizes()) : Tensor(),
            ctx.needs_input_grad(1) ? sum_to(neg(mul(grad_over_b, div(a, b))), b.sizes()) : Tensor()};
  }
};

// ---- tensor (op) scalar, and scalar (op) tensor ----
// The scalar is a double argument of forward: it needs no gradient, so backward returns
// Tensor() in its place. It takes the tensor's dtype (float32 math for float32 tensors).

struct AddScalar : Function<AddScalar> {
  static Tensor forward(Context&, const Tensor& x, double scalar) {
    return unary_float_op("add", x, elementwise::AddScalar{scalar});
  }
  static tensor_list backward(Context&, tensor_list grad_outputs) { return {grad_outputs[0], Tensor()}; }
};

struct SubScalar : Function<SubScalar> {
  static Tensor forward(Context&, const Tensor& x, double scalar) {
    return unary_float_op("sub", x, elementwise::SubScalar{scalar});
  }
  static tensor_list backward(Context&, tensor_list grad_outputs) { return {grad_outputs[0], Tensor()}; }
};

struct MulScalar : Function<MulScalar> {
  using State = ScalarArgument;
  static Tensor forward(Context& ctx, const Tensor& x, double scalar) {
    ctx.state<State>().scalar = scalar;
    return unary_float_op("mul", x, elementwise::MulScalar{scalar});
  }
  static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
    return {mul(grad_outputs[0], ctx.state<State>().scalar), Tensor()};
  }
};

struct DivScalar : Function<DivScalar> {
  using State = ScalarArgument;
  static Tensor forward(Context& ctx, const Tensor& x, double scalar) {
    ctx.state<State>().scalar = scalar;
    return unary_float_op("div", x, elementwise::DivScalar{scalar});
  }
  static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
    return {div(grad_outputs[0], ctx.state<State>().scalar), Tensor()};
  }
};

// scalar - x: the arguments keep the public function's order, so backward's gradient
// list does too (nothing for the scalar, then x's).
struct RSub : Function<RSub> {
  static Tensor forward(Context&, double scalar, const Tensor& x) {
    return unary_float_op("rsub", x, elementwise::ScalarSub{scalar});
  }
  static tensor_list backward(Context&, tensor_list grad_outputs) { return {Tensor(), neg(grad_outputs[0])}; }
};

// scalar / x, whose derivative is -scalar / x^2.
struct RDiv : Function<RDiv> {
  using State = ScalarArgument;
  static Tensor forward(Context& ctx, double scalar, const Tensor& x) {
    Tensor out = unary_float_op("rdiv", x, elementwise::ScalarDiv{scalar});
    ctx.save_for_backward({x});
    ctx.state<State>().scalar = scalar;
    return out;
  }
  static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
    const Tensor x = ctx.saved_tensors()[0];
    const double scalar = ctx.state<State>().scalar;
    return {Tensor(), mul(grad_outputs[0], rdiv(-scalar, mul(x, x)))};
  }
};

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) { return Add::apply(a, b); }
Tensor sub(const Tensor& a, const Tensor& b) { return Sub::apply(a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return Mul::apply(a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return Div::apply(a, b); }

Tensor add(const Tensor& a, double b) { return AddScalar::apply(a, b); }
Tensor sub(const Tensor& a, double b) { return SubScalar::apply(a, b); }
Tensor mul(const Tensor& a, double b) { return MulScalar::apply(a, b); }
Tensor div(const Tensor& a, double b) { return DivScalar::apply(a, b); }
Tensor rsub(double a, const Tensor& b) { return RSub::apply(a, b); }
Tensor rdiv(double a, const Tensor& b) { return RDiv::apply(a, b); }

// The member forms (core/tensor.h). alpha scales other first, as in LibTorch: two ops on the
// tape unless alpha is 1.
Tensor Tensor::add(const Tensor& other, double alpha) const {
  return alpha == 1.0 ? minigrad::add(*this, other) : minigrad::add(*this, minigrad::mul(other, alpha));
}
Tensor Tensor::add(double other) const { return minigrad::add(*this, other); }
Tensor Tensor::sub(const Tensor& other, double alpha) const {
  return alpha == 1.0 ? minigrad::sub(*this, other) : minigrad::sub(*this, minigrad::mul(other, alpha));
}
Tensor Tensor::sub(double other) const { return minigrad::sub(*this, other); }
Tensor Tensor::mul(const Tensor& other) const { return minigrad::mul(*this, other); }
Tensor Tensor::mul(double other) const { return minigrad::mul(*this, other); }
Tensor Tensor::div(const Tensor& other) const { return minigrad::div(*this, other); }
Tensor Tensor::div(double other) const { return minigrad::div(*this, other); }

}  // namespace minigrad
