// Elementwise math: neg, exp, log, sqrt, erf, tanh, sigmoid, abs, pow, clamp; square, rsqrt,
// reciprocal, log1p, expm1, sin, cos, sign, floor, pow(scalar, tensor), clamp with optional bounds.
//
// Each op is a Function whose forward is one formula (a functor of kernels/elementwise_functors.h)
// handed to unary_float_op, which runs it on the input's device (float32 and float64
// computed directly, float16/bfloat16 in float), and whose backward is the
// derivative written with the public ops. What forward saves is whatever makes the
// derivative cheapest: exp, sqrt, tanh, sigmoid, rsqrt and expm1 have derivatives that are
// simple functions of their own output (exp' = exp, tanh' = 1 - tanh^2, ...), so they save the
// output and backward recomputes nothing expensive; the others save the input.
#include <cmath>
#include <limits>
#include <optional>

#include <minigrad/autograd/function.h>
#include <minigrad/ops/cpu_loops.h>
#include <minigrad/ops/ops.h>

namespace minigrad {
namespace {

// 2/sqrt(pi): d/dx erf(x) = 2/sqrt(pi) * exp(-x^2).
constexpr double kTwoOverSqrtPi = 1.12837916709551257390;

// `values` where `keep` is true and 0 elsewhere (broadcasting). where(), not values * mask:
// a masked-out Inf or NaN must give 0, and Inf * 0 would be NaN.
Tensor keep_where(const Tensor& keep, const Tensor& values) { return where(keep, values, zeros_like(values)); }

struct Neg : Function<Neg> {
  static Tensor forward(Context&, const Tensor& x) {
    return unary_float_op("neg", x, elementwise::Neg{});
  }
  static tensor_list backward(Context&, tensor_list grad_outputs) { return {neg(grad_outputs[0])}; }
};

struct Exp : Function<Exp> {
  static Tensor forward(Context& ctx, const Tensor& x) {
    Tensor out = unary_float_op("exp", x, elementwise::Exp{});
    ctx.save_for_backward({out});
    return out;
  }
  static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
    return {mul(grad_outputs[0], ctx.saved_tensors()[0])};
  }
};

struct Log : Function<Log> {
  static Tensor forward(Context& ctx, const Tensor& x) {
    Tensor out = unary_float_op("log", x, elementwise::Log{});
    ctx.save_for_backward({x});
    return out;
  }
  static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
    return {div(grad_outputs[0], ctx.saved_tensors()[0])};
  }
};

// d/dx sqrt(x) = 1 / (2 sqrt(x)).
struct Sqrt : Function<Sqrt> {
  static Tensor forward(Context& ctx, const Tensor& x) {
    Tensor out = unary_float_op("sqrt", x, elementwise::Sqrt{});
    ctx.save_for_backward({out});
    return out;
  }
  static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
    return {div(grad_outputs[0], mul(ctx.saved_tensors()[0], 2.0))};
  }
};

struct Erf : Function<Erf> {
  static Tensor forward(Context& ctx, const Tensor& x) {
    Tensor out = unary_float_op("erf", x, elementwise::Erf{});
    ctx.save_for_backward({x});
    return out;
  }
  static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
    const Tensor x = ctx.saved_tensors()[0];
    return {mul(grad_outputs[0], mul(exp(neg(mul(x, x))), kTwoOverSqrtPi))};
  }
};

// d/dx tanh(x) = 1 - tanh(x)^2.
struct Tanh : Function<Tanh> {
  static Tensor forward(Context& ctx, const Tensor& x) {
    Tensor out = unary_float_op("tanh", x, elementwise::Tanh{});
    ctx.save_for_backward({out});
    return out;
  }
  static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
    const Tensor out = ctx.saved_tensors()[0];
    return {mul(grad_outputs[0], rsub(1.0, mul(out, out)))};
  }
};

// sigmoid(x) = 1 / (1 + exp(-x)); its derivative is sigmoid(x) * (1 - sigmoid(x)).
struct Sigmoid : Function<Sigmoid> {
  static Tensor forward(Context& ctx, const Tensor& x) {
    Tensor out = unary_float_op("sigmoid", x, elementwise::Sigmoid{});
    ctx.save_for_backward({out});
    return out;
  }
  static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
    const Tensor out = ctx.saved_tensors()[0];
    return {mul(grad_outputs[0], mul(out, rsub(1.0, out)))};
  }
};

// d/dx |x| = sign(x), taken as 0 at x = 0 (as PyTorch does): the subgradient that leaves
// a parameter sitting exactly at 0 where it is.
struct Abs : Function<Abs> {
  static Tensor forward(Context& ctx, const Tensor& x) {
    Tensor out = unary_float_op("abs", x, elementwise::Abs{});
    ctx.save_for_backward({x});
    return out;
  }
  static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
    const Tensor x = ctx.saved_tensors()[0];
    return {mul(grad_outputs[0], sign(x))};
  }
};

// d/dx x^p = p * x^(p-1). For p = 0 the output is the constant 1 and the gradient is 0,
// also at x = 0, where the formula would give 0 * 0^-1 = 0 * inf = NaN.
// The backward is pow again (of p - 1), so the second derivative comes from the same rule.
struct PowScalar : Function<PowScalar> {
  struct State {
    double exponent = 0.0;
  };
  static Tensor forward(Context& ctx, const Tensor& x, double exponent) {
    Tensor out = unary_float_op("pow", x, elementwise::PowScalar{exponent});
    ctx.save_for_backward({x});
    ctx.state<State>().exponent = exponent;
    return out;
  }
  static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
    const Tensor x = ctx.saved_tensors()[0];
    const double exponent = ctx.state<State>().exponent;
    if (exponent == 0.0) return {zeros_like(x), Tensor()};
    return {mul(grad_outputs[0], mul(pow(x, exponent - 1.0), exponent)), Tensor()};
  }
};

// x^e with both broadcast. d/dx = e * x^(e-1); d/de = x^e * log(x). Two special points,
// defined as PyTorch defines them (pow_backward_self, pow_backward_exponent):
// - e = 0: x^0 = 1 is constant in x, so d/dx is 0, also at x = 0 where e * x^(e-1)
//   would be 0 * inf = NaN.
// - x = 0 and e >= 0: log(0) = -inf, but 0^e is flat in e for e > 0 (and 0^0 = 1 is taken
//   as flat too): d/de is 0 there, not 0 * -inf = NaN. For e < 0 the formula stands:
//   x^e * log(x) = inf * -inf = -inf.
struct PowTensor : Function<PowTensor> {
  static Tensor forward(Context& ctx, const Tensor& x, const Tensor& exponent) {
    // Checked here first so the messages call the second argument 'exponent', not 'other'.
    check_defined("pow", "self", x);
    check_defined("pow", "exponent", exponent);
    check_same_dtype("pow", "self", x, "exponent", exponent);
    Tensor out = binary_float_op("pow", x, exponent, elementwise::Pow{});
    ctx.save_for_backward({x, exponent, out});
    return out;
  }
  static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
    const Tensor& grad = grad_outputs[0];
    const tensor_list saved = ctx.saved_tensors();
    const Tensor& x = saved[0];
    const Tensor& exponent = saved[1];
    const Tensor& out = saved[2];
    Tensor grad_x, grad_exponent;
    if (ctx.needs_input_grad(0)) {
      const Tensor slope = keep_where(ne(exponent, 0.0), mul(exponent, pow(x, sub(exponent, 1.0))));
      grad_x = sum_to(mul(grad, slope), x.sizes());
    }
    if (ctx.needs_input_grad(1)) {
      // where((x == 0) & (e >= 0), 0, grad * x^e * log(x)), the & as two nested wheres.
      const Tensor by_formula = mul(grad, mul(out, log(x)));
      const Tensor zero = zeros({}, by_formula.options());
      const Tensor at_zero_base = where(ge(exponent, 0.0), zero, by_formula);
      grad_exponent = sum_to(where(eq(x, 0.0), at_zero_base, by_formula), exponent.sizes());
    }
    return {grad_x, grad_exponent};
  }
};

// clamp(x) = min(max(x, lo), hi) (NaN stays NaN). The gradient passes where lo <= x <= hi.
struct Clamp : Function<Clamp> {
  struct State {
    double min = 0.0;
    double max = 0.0;
  };
  static Tensor forward(Context& ctx, const Tensor& x, double min, double max) {
    Tensor out = unary_float_op("clamp", x, elementwise::Clamp{min, max});
    ctx.save_for_backward({x});
    ctx.state<State>() = {min, max};
    return out;
  }
  static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
    const Tensor x = ctx.saved_tensors()[0];
    const Tensor& grad = grad_outputs[0];
    const State& s = ctx.state<State>();
    const Tensor above_min = ge(x, s.min);
    const Tensor below_max = le(x, s.max);
    return {keep_where(above_min, keep_where(below_max, grad)), Tensor(), Tensor()};
  }
};

// ---- more elementwise math ----

// d/dx x^(-1/2) = -x^(-3/2) / 2 = -out^3 / 2: from the output, as for sqrt.
struct Rsqrt : Function<Rsqrt> {
  static Tensor forward(Context& ctx, const Tensor& x) {
    Tensor out = unary_float_op("rsqrt", x, elementwise::Rsqrt{});
    ctx.save_for_backward({out});
    return out;
  }
  static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
    const Tensor out = ctx.saved_tensors()[0];
    return {mul(grad_outputs[0], mul(pow(out, 3.0), -0.5))};
  }
};

// d/dx log(1 + x) = 1 / (1 + x).
struct Log1p : Function<Log1p> {
  static Tensor forward(Context& ctx, const Tensor& x) {
    Tensor out = unary_float_op("log1p", x, elementwise::Log1p{});
    ctx.save_for_backward({x});
    return out;
  }
  static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
    return {div(grad_outputs[0], add(ctx.saved_tensors()[0], 1.0))};
  }
};

// d/dx (exp(x) - 1) = exp(x) = out + 1.
struct Expm1 : Function<Expm1> {
  static Tensor forward(Context& ctx, const Tensor& x) {
    Tensor out = unary_float_op("expm1", x, elementwise::Expm1{});
    ctx.save_for_backward({out});
    return out;
  }
  static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
    return {mul(grad_outputs[0], add(ctx.saved_tensors()[0], 1.0))};
  }
};

struct Sin : Function<Sin> {
  static Tensor forward(Context& ctx, const Tensor& x) {
    Tensor out = unary_float_op("sin", x, elementwise::Sin{});
    ctx.save_for_backward({x});
    return out;
  }
  static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
    return {mul(grad_outputs[0], cos(ctx.saved_tensors()[0]))};
  }
};

struct Cos : Function<Cos> {
  static Tensor forward(Context& ctx, const Tensor& x) {
    Tensor out = unary_float_op("cos", x, elementwise::Cos{});
    ctx.save_for_backward({x});
    return out;
  }
  static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
    return {mul(grad_outputs[0], neg(sin(ctx.saved_tensors()[0])))};
  }
};

// sign and floor are piecewise constant: gradient 0 wherever it is defined, taken as 0 at
// the steps too (as PyTorch does), so a model using them still runs backward.
struct Sign : Function<Sign> {
  static Tensor forward(Context&, const Tensor& x) { return unary_float_op("sign", x, elementwise::Sign{}); }
  static tensor_list backward(Context&, tensor_list grad_outputs) { return {zeros_like(grad_outputs[0])}; }
};

struct Floor : Function<Floor> {
  static Tensor forward(Context&, const Tensor& x) { return unary_float_op("floor", x, elementwise::Floor{}); }
  static tensor_list backward(Context&, tensor_list grad_outputs) { return {zeros_like(grad_outputs[0])}; }
};

// base^e, the scalar the base. d/de = base^e * log(base) = out * log(base). At base 0, as
// PyTorch defines it: 0^e is flat for e >= 0 (0 for e > 0, and 0^0 = 1 taken as flat), so
// the gradient is 0 there rather than 0 * -inf = NaN; for e < 0 the formula stands.
struct ScalarPow : Function<ScalarPow> {
  struct State {
    double base = 0.0;
  };
  static Tensor forward(Context& ctx, double base, const Tensor& exponent) {
    check_defined("pow", "exponent", exponent);
    check_floating("pow", "exponent", exponent);
    Tensor out = unary_float_op("pow", exponent, elementwise::ScalarPow{base});
    ctx.save_for_backward({exponent, out});
    ctx.state<State>().base = base;
    return out;
  }
  static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
    const tensor_list saved = ctx.saved_tensors();
    const Tensor& exponent = saved[0];
    const Tensor& out = saved[1];
    const double base = ctx.state<State>().base;
    const Tensor by_formula = mul(grad_outputs[0], mul(out, std::log(base)));
    if (base != 0.0) return {Tensor(), by_formula};
    const Tensor zero = zeros({}, by_formula.options());
    return {Tensor(), where(ge(exponent, 0.0), zero, by_formula)};
  }
};

}  // namespace

Tensor neg(const Tensor& x) { return Neg::apply(x); }
Tensor exp(const Tensor& x) { return Exp::apply(x); }
Tensor log(const Tensor& x) { return Log::apply(x); }
Tensor sqrt(const Tensor& x) { return Sqrt::apply(x); }
Tensor erf(const Tensor& x) { return Erf::apply(x); }
Tensor tanh(const Tensor& x) { return Tanh::apply(x); }
Tensor sigmoid(const Tensor& x) { return Sigmoid::apply(x); }
Tensor abs(const Tensor& x) { return Abs::apply(x); }
Tensor pow(const Tensor& x, double exponent) { return PowScalar::apply(x, exponent); }
Tensor pow(const Tensor& x, const Tensor& exponent) { return PowTensor::apply(x, exponent); }
Tensor clamp(const Tensor& x, double min, double max) { return Clamp::apply(x, min, max); }

// ---- more elementwise math ----
// square is pow(x, 2) and reciprocal is 1 / x, as PyTorch defines them: their kernels and
// gradients are pow's and rdiv's. The checks come first so that an error names the op called.
Tensor square(const Tensor& x) {
  check_defined("square", "self", x);
  check_floating("square", "self", x);
  return pow(x, 2.0);
}
Tensor rsqrt(const Tensor& x) { return Rsqrt::apply(x); }
Tensor reciprocal(const Tensor& x) {
  check_defined("reciprocal", "self", x);
  check_floating("reciprocal", "self", x);
  return rdiv(1.0, x);
}
Tensor log1p(const Tensor& x) { return Log1p::apply(x); }
Tensor expm1(const Tensor& x) { return Expm1::apply(x); }
Tensor sin(const Tensor& x) { return Sin::apply(x); }
Tensor cos(const Tensor& x) { return Cos::apply(x); }
Tensor sign(const Tensor& x) { return Sign::apply(x); }
Tensor floor(const Tensor& x) { return Floor::apply(x); }
Tensor pow(double base, const Tensor& exponent) { return ScalarPow::apply(base, exponent); }
// A missing bound is an infinite one: the same kernel and gradient as clamp(x, min, max).
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max) {
  MG_CHECK(min.has_value() || max.has_value(), "clamp: at least one of 'min' and 'max' must be given, got neither");
  constexpr double kInf = std::numeric_limits<double>::infinity();
  return clamp(x, min.value_or(-kInf), max.value_or(kInf));
}

// The member forms (core/tensor.h).
Tensor Tensor::neg() const { return minigrad::neg(*this); }
Tensor Tensor::exp() const { return minigrad::exp(*this); }
Tensor Tensor::log() const { return minigrad::log(*this); }
Tensor Tensor::sqrt() const { return minigrad::sqrt(*this); }
Tensor Tensor::erf() const { return minigrad::erf(*this); }
Tensor Tensor::tanh() const { return minigrad::tanh(*this); }
Tensor Tensor::sigmoid() const { return minigrad::sigmoid(*this); }
Tensor Tensor::abs() const { return minigrad::abs(*this); }
Tensor Tensor::pow(double exponent) const { return minigrad::pow(*this, exponent); }
Tensor Tensor::pow(const Tensor& exponent) const { return minigrad::pow(*this, exponent); }
Tensor Tensor::clamp(double min, double max) const { return minigrad::clamp(*this, min, max); }
Tensor Tensor::clamp_min(double min) const { return minigrad::clamp_min(*this, min); }
Tensor Tensor::clamp_max(double max) const { return minigrad::clamp_max(*this, max); }
Tensor Tensor::square() const { return minigrad::square(*this); }
Tensor Tensor::rsqrt() const { return minigrad::rsqrt(*this); }
Tensor Tensor::reciprocal() const { return minigrad::reciprocal(*this); }
Tensor Tensor::log1p() const { return minigrad::log1p(*this); }
Tensor Tensor::expm1() const { return minigrad::expm1(*this); }
Tensor Tensor::sin() const { return minigrad::sin(*this); }
Tensor Tensor::cos() const { return minigrad::cos(*this); }
Tensor Tensor::sign() const { return minigrad::sign(*this); }
Tensor Tensor::floor() const { return minigrad::floor(*this); }
Tensor Tensor::clamp(std::optional<double> min, std::optional<double> max) const {
  return minigrad::clamp(*this, min, max);
}

}  // namespace minigrad
