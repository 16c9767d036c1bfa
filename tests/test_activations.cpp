// The activations as Functions: ReLU (ops/relu.cpp) and GELU (ops/gelu.cpp), their
// backward Functions (ReluBackward, GeluBackward) and the derivatives beyond the first.
//
// GELU is also checked against its composite twin: the same formula built from primitive
// ops (mul, add, erf; tanh, pow) and differentiated by the tape. The fused Function must
// agree with it in value and in gradient.
#include <cmath>
#include <limits>
#include <string>

#include "tests/elementwise_test_helpers.h"

using namespace minigrad;
using namespace minigrad::test;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
const double kPi = std::acos(-1.0);

// ---- references on plain doubles ----

double relu_reference(double v) { return v > 0 ? v : (std::isnan(v) ? v : 0.0); }

// x * Phi(x), with Phi written through erfc (an identity: Phi(x) = erfc(-x / sqrt 2) / 2),
// so the reference is not the kernel's expression.
double gelu_exact_reference(double v) { return 0.5 * v * std::erfc(-v / std::sqrt(2.0)); }

double gelu_tanh_reference(double v) {
  return 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / kPi) * (v + 0.044715 * v * v * v)));
}

// d/dx x Phi(x) = Phi(x) + x phi(x).
double gelu_exact_derivative_reference(double v) {
  const double cdf = 0.5 * std::erfc(-v / std::sqrt(2.0));
  const double pdf = std::exp(-0.5 * v * v) / std::sqrt(2.0 * kPi);
  return cdf + v * pdf;
}

// ---- composite twins: the same formulas from primitive ops, differentiated by the tape ----

Tensor gelu_exact_composite(const Tensor& x) { return 0.5 * x * (1.0 + erf(x / std::sqrt(2.0))); }

Tensor gelu_tanh_composite(const Tensor& x) {
  return 0.5 * x * (1.0 + tanh(std::sqrt(2.0 / kPi) * (x + 0.044715 * pow(x, 3.0))));
}

Tensor gelu_exact(const Tensor& x) { return gelu(x, GeluApproximation::None); }
Tensor gelu_tanh(const Tensor& x) { return gelu(x, GeluApproximation::Tanh); }

// gelu''(x) for both forms, on plain doubles. Exact: phi(x) (2 - x^2). Tanh: the tanh
// form's x * s(x) with s = (1 + tanh(u)) / 2 written through tanh this time, differentiated
// twice by hand: s' = (1 - t^2) u' / 2, s'' = ((1 - t^2) u'' - 2 t (1 - t^2) u'^2) / 2, and
// (x s)'' = 2 s' + x s''.
double gelu_exact_second_derivative_reference(double v) {
  return std::exp(-0.5 * v * v) / std::sqrt(2.0 * kPi) * (2.0 - v * v);
}
double gelu_tanh_second_derivative_reference(double v) {
  const double c = std::sqrt(2.0 / kPi);
  const double t = std::tanh(c * (v + 0.044715 * v * v * v));
  const double du = c * (1.0 + 3.0 * 0.044715 * v * v);
  const double d2u = c * 6.0 * 0.044715 * v;
  const double ds = 0.5 * (1.0 - t * t) * du;
  const double d2s = 0.5 * ((1.0 - t * t) * d2u - 2.0 * t * (1.0 - t * t) * du * du);
  return 2.0 * ds + v * d2s;
}

// The gradient of op at x for the incoming gradient g, recorded (create_graph): the output
// of op's backward Function, a function of x and of g. Under gradcheck's finite differences
// (run without grad mode, on plain tensors) x becomes a leaf again and grad mode is turned on
// for the call, so the recorded gradient is computed the same way in both passes.
Tensor recorded_gradient(const UnaryOp& op, const Tensor& x, const Tensor& g) {
  AutoGradMode enable(true);
  const Tensor input = x.requires_grad() ? x : x.detach().requires_grad_();
  return autograd::grad({op(input)}, {input}, {g}, std::nullopt, /*create_graph=*/true)[0];
}

// The checks of a twice-differentiable activation, on x and on the same values laid out
// non-contiguously: gradcheck of its backward Function in both arguments (x and the
// incoming gradient), gradgradcheck of the op, and gradgradcheck of the backward itself
// (third derivatives: the backward's backward is built from differentiable ops too).
void check_higher_derivatives(const UnaryOp& op, const Tensor& x64) {
  for (const Tensor& x : {x64, noncontiguous_copy(x64)}) {
    const Tensor g = randn64(x.sizes());
    auto backward_fn = [&](const tensor_list& in) { return recorded_gradient(op, in[0], in[1]); };
    CHECK_GRADCHECK(backward_fn, (tensor_list{leaf(x), leaf(g)}));
    CHECK_GRADGRADCHECK([&](const tensor_list& in) { return op(in[0]); }, tensor_list{leaf(x)});
    CHECK_GRADGRADCHECK(backward_fn, (tensor_list{leaf(x), leaf(g)}));
  }
}

// The name of the Function that recorded t (its grad_fn), "" for none.
std::string recorded_by(const Tensor& t) { return t.grad_fn() ? t.grad_fn()->name() : std::string(); }

}  // namespace

// ---------------------------------------------------------------------------------------
// ReLU

TEST_CASE("relu: the tutorial's example, relu([1, -2, 3]).sum() backward gives [1, 0, 1]") {
  Tensor x = tensor({1.0f, -2.0f, 3.0f}).requires_grad_();
  Tensor loss = relu(x).sum();
  loss.backward();
  CHECK(relu(x).to_vector<double>() == std::vector<double>{1, 0, 3});
  CHECK(x.grad().to_vector<double>() == std::vector<double>{1, 0, 1});
}

TEST_CASE("relu: values in every floating dtype, NaN kept, empty tensors, integer input refused") {
  manual_seed(11);
  check_forward_all_dtypes(relu, relu_reference, randn64({3, 4}));
  const Tensor specials = from_vector<double>({kNaN, kInf, -kInf, -0.0, 2.0}, {5});
  CHECK_ALLCLOSE(relu(specials), reference_map(specials, relu_reference), 0.0, 0.0);
  CHECK(relu(zeros({0, 3})).sizes() == Shape{0, 3});
  CHECK_THROWS_CONTAINING(relu(arange(3)), "relu: ");
  CHECK_THROWS_CONTAINING(relu(arange(3)), "'self'");
}

TEST_CASE("relu: gradcheck away from 0, contiguous and not; gradient 0 at exactly 0") {
  manual_seed(12);
  check_unary_gradients(relu, reference_map(randn64({3, 4}), [](double v) { return away_from_kinks(v, {0.0}); }));
  Tensor x = from_vector<double>({-1.0, 0.0, 1.0}, {3}).requires_grad_();
  relu(x).sum().backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{0, 0, 1});
}

TEST_CASE("relu: backward sees an input modified in place after forward saved it") {
  Tensor x = from_vector<double>({1.0, -2.0}, {2}).requires_grad_();
  Tensor y = relu(x).sum();
  const uint64_t version = x.version();
  {
    NoGradGuard no_grad;
    x.mul_(-1.0);  // flips which side of 0 each element is on: the saved input is stale
  }
  CHECK(x.version() == version + 1);
  CHECK_THROWS_CONTAINING(y.backward(), "modified by an in-place op");
}

// ---------------------------------------------------------------------------------------
// GELU

TEST_CASE("gelu: values of both forms against the reference in every floating dtype") {
  manual_seed(13);
  const Tensor x = randn64({3, 4}) * 2.0;
  check_forward_all_dtypes(gelu_exact, gelu_exact_reference, x);
  check_forward_all_dtypes(gelu_tanh, gelu_tanh_reference, x);
  // The tanh form approximates the exact one to within about 1e-3 (Hendrycks & Gimpel).
  CHECK_ALLCLOSE(gelu_tanh(x), gelu_exact(x), 0.0, 1e-3);
}

TEST_CASE("gelu: gradient values against the derivative Phi(x) + x phi(x)") {
  manual_seed(14);
  Tensor x = leaf(randn64({3, 4}) * 2.0);
  gelu_exact(x).sum().backward();
  CHECK_ALLCLOSE(x.grad(), reference_map(x, gelu_exact_derivative_reference), 1e-12, 1e-14);
}

TEST_CASE("gelu: gradcheck of both forms, contiguous and not") {
  manual_seed(15);
  check_unary_gradients(gelu_exact, randn64({3, 4}) * 2.0);
  check_unary_gradients(gelu_tanh, randn64({3, 4}) * 2.0);
}

TEST_CASE("gelu matches its composite twin in value and gradient (float64, 1e-12)") {
  manual_seed(16);
  const Tensor tails = from_vector<double>({-8.0, -4.5, 4.5, 8.0}, {4});
  const Tensor in_tail_row = from_vector<double>({0, 0, 1}, {3, 1}).to(kBool);
  const Tensor values = where(in_tail_row, tails, randn64({3, 4}) * 2.0);
  const std::vector<std::pair<UnaryOp, UnaryOp>> pairs = {{gelu_exact, gelu_exact_composite},
                                                          {gelu_tanh, gelu_tanh_composite}};
  for (const auto& [fused, composite] : pairs) {
    Tensor x_fused = leaf(values);
    Tensor x_composite = leaf(values);
    const Tensor upstream = randn64({3, 4});  // a non-uniform gradient from above
    const Tensor y_fused = fused(x_fused);
    const Tensor y_composite = composite(x_composite);
    CHECK_ALLCLOSE(y_fused, y_composite, 1e-12, 1e-12);
    y_fused.backward(upstream);
    y_composite.backward(upstream);
    CHECK_ALLCLOSE(x_fused.grad(), x_composite.grad(), 1e-12, 1e-12);
    // The fused op is one node on the tape (the twin is a chain of them).
    CHECK(y_fused.grad_fn()->name().find("GELU") != std::string::npos);
  }
}

TEST_CASE("gelu: float32 agrees with float64; half types run through float; NaN and Inf propagate") {
  manual_seed(17);
  const Tensor x = randn64({3, 4}) * 2.0;
  CHECK_ALLCLOSE(gelu_exact(x.to(kFloat32)), gelu_exact(x), 1e-5, 1e-6);
  CHECK_ALLCLOSE(gelu_tanh(x.to(kFloat32)), gelu_tanh(x), 1e-5, 1e-6);
  const Tensor specials = from_vector<double>({kNaN, kInf, -kInf}, {3});
  // gelu(NaN) = NaN, gelu(inf) = inf, and gelu(-inf) = 0, the limit (the composite twin's
  // -inf * 0 is NaN there).
  const Tensor expected = from_vector<double>({kNaN, kInf, 0.0}, {3});
  CHECK_ALLCLOSE(gelu_exact(specials), expected, 0.0, 0.0);
  CHECK_ALLCLOSE(gelu_tanh(specials), expected, 0.0, 0.0);

  for (DType dt : {kFloat16, kBFloat16}) {
    INFO("dtype: " << std::string(dtype_name(dt)));
    Tensor h = leaf(x.to(dt));
    gelu_exact(h).sum().backward();
    CHECK(h.grad().dtype() == dt);
    CHECK_ALLCLOSE(h.grad(), reference_map(h, gelu_exact_derivative_reference), 2e-2, 1e-2);
  }
}

TEST_CASE("gelu: empty tensors, integer input refused, the approximation is kept for backward") {
  Tensor empty_input = zeros({0, 3}, kFloat64).requires_grad_();
  const Tensor y = gelu_tanh(empty_input);
  CHECK(y.sizes() == Shape{0, 3});
  y.sum().backward();
  CHECK(empty_input.grad().sizes() == Shape{0, 3});
  CHECK_THROWS_CONTAINING(gelu(arange(3)), "gelu: ");
  CHECK_THROWS_CONTAINING(gelu(arange(3), GeluApproximation::Tanh), "'self'");

  // The two forms' slopes differ at 1.5 by about 3e-3; backward must use the forward's form.
  Tensor x = from_vector<double>({1.5}, {1}).requires_grad_();
  gelu_tanh(x).sum().backward();
  Tensor x_twin = from_vector<double>({1.5}, {1}).requires_grad_();
  gelu_tanh_composite(x_twin).sum().backward();
  CHECK_ALLCLOSE(x.grad(), x_twin.grad(), 1e-12, 1e-14);
}

// ---------------------------------------------------------------------------------------
// higher derivatives: each backward is a Function of its own, built from differentiable ops

TEST_CASE("relu: NaN inputs pass the gradient, as PyTorch's threshold_backward does") {
  // 0 where x <= 0 (exactly 0 included), the incoming gradient elsewhere: NaN <= 0 is false.
  Tensor x = from_vector<double>({kNaN, -1.0, 0.0, -0.0, 2.0, kInf, -kInf}, {7}).requires_grad_();
  const Tensor upstream = from_vector<double>({3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0}, {7});
  relu(x).backward(upstream);
  CHECK(x.grad().to_vector<double>() == std::vector<double>{3, 0, 0, 0, 3, 3, 0});
  // An Inf or NaN gradient where x < 0 still gives 0, not Inf * 0.
  Tensor y = from_vector<double>({-1.0, -2.0, 1.0}, {3}).requires_grad_();
  relu(y).backward(from_vector<double>({kInf, kNaN, kNaN}, {3}));
  const std::vector<double> grad = y.grad().to_vector<double>();
  CHECK(grad[0] == 0.0);
  CHECK(grad[1] == 0.0);
  CHECK(std::isnan(grad[2]));
  // Every floating dtype takes the same rule.
  for (DType dt : {kFloat32, kFloat16, kBFloat16}) {
    INFO("dtype: " << std::string(dtype_name(dt)));
    Tensor h = from_vector<double>({kNaN, -1.0, 2.0}, {3}).to(dt).requires_grad_();
    relu(h).sum().backward();
    CHECK(h.grad().to_vector<double>() == std::vector<double>{1, 0, 1});
  }
}

TEST_CASE("relu: the backward is the ReluBackward Function; second derivatives by gradcheck") {
  manual_seed(30);
  const Tensor values = reference_map(randn64({3, 4}), [](double v) { return away_from_kinks(v, {0.0}); });
  Tensor x = leaf(values);
  const Tensor g = randn64({3, 4});
  const Tensor dx = autograd::grad({relu(x)}, {x}, {g}, std::nullopt, /*create_graph=*/true)[0];
  CHECK(recorded_by(dx).find("ReluBackward") != std::string::npos);
  // d/dx of the gradient is 0 (relu is piecewise linear), and d/dg is the same mask.
  Tensor g_leaf = leaf(g);
  Tensor x2 = leaf(values);
  const Tensor dx2 = autograd::grad({relu(x2)}, {x2}, {g_leaf}, std::nullopt, true)[0];
  const tensor_list second = autograd::grad({dx2.sum()}, {x2, g_leaf});
  CHECK_ALLCLOSE(second[0], zeros({3, 4}, kFloat64), 0.0, 0.0);
  CHECK_ALLCLOSE(second[1], reference_map(values, [](double v) { return v > 0 ? 1.0 : 0.0; }), 0.0, 0.0);
  check_higher_derivatives(relu, values);
}

TEST_CASE("gelu: the backward is the GeluBackward Function; second and third derivatives by gradcheck") {
  manual_seed(31);
  for (const UnaryOp& op : {UnaryOp(gelu_exact), UnaryOp(gelu_tanh)}) {
    Tensor x = leaf(randn64({3, 4}) * 2.0);
    const Tensor dx = autograd::grad({op(x)}, {x}, {randn64({3, 4})}, std::nullopt, /*create_graph=*/true)[0];
    CHECK(recorded_by(dx).find("GeluBackward") != std::string::npos);
    check_higher_derivatives(op, randn64({3, 4}) * 2.0);
  }
}

TEST_CASE("gelu: second derivative values of both forms, the tails and the infinities included") {
  manual_seed(32);
  const Tensor random = randn64({3, 4}) * 3.0;
  const Tensor tails = from_vector<double>({-60.0, -45.0, -30.0, -12.0, -6.0, 6.0, 12.0, 30.0, 45.0, 60.0}, {10});
  const std::vector<std::pair<UnaryOp, ScalarFn>> cases = {
      {gelu_exact, gelu_exact_second_derivative_reference}, {gelu_tanh, gelu_tanh_second_derivative_reference}};
  for (const auto& [op, reference] : cases) {
    for (const Tensor& values : {random, tails}) {
      Tensor x = leaf(values);
      const Tensor dx = autograd::grad({op(x).sum()}, {x}, {}, std::nullopt, true)[0];
      const Tensor d2x = autograd::grad({dx.sum()}, {x})[0];
      CHECK_ALLCLOSE(d2x, reference_map(values, reference), 1e-10, 1e-12);
    }
    // At +-inf the second derivative is 0, its limit (clamped inputs, not inf * 0), and a
    // NaN input gives NaN.
    Tensor specials = from_vector<double>({kInf, -kInf, kNaN}, {3}).requires_grad_();
    const Tensor dx = autograd::grad({op(specials).sum()}, {specials}, {}, std::nullopt, true)[0];
    const std::vector<double> d2x = autograd::grad({dx.sum()}, {specials})[0].to_vector<double>();
    CHECK(d2x[0] == 0.0);
    CHECK(d2x[1] == 0.0);
    CHECK(std::isnan(d2x[2]));
  }
}

TEST_CASE("relu and gelu backward Functions: empty, non-contiguous and half-type inputs") {
  manual_seed(33);
  const std::vector<UnaryOp> ops = {relu, gelu_exact, gelu_tanh};
  for (const UnaryOp& op : ops) {
    // Empty: the second derivative of an empty tensor is empty.
    Tensor empty_input = zeros({0, 3}, kFloat64).requires_grad_();
    const Tensor dx = autograd::grad({op(empty_input).sum()}, {empty_input}, {}, std::nullopt, true)[0];
    CHECK(dx.sizes() == Shape{0, 3});
    const Tensor d2x = autograd::grad({dx.sum()}, {empty_input}, {}, std::nullopt, false, /*allow_unused=*/true)[0];
    CHECK((!d2x.defined() || d2x.sizes() == Shape{0, 3}));

    // float16 and bfloat16: the double backward runs in the dtype and lands near float64's.
    const Tensor values = reference_map(randn64({4, 5}), [](double v) { return away_from_kinks(v, {0.0}); });
    Tensor x64 = leaf(values);
    const Tensor g64 = autograd::grad({op(x64).sum()}, {x64}, {}, std::nullopt, true)[0];
    const Tensor h64 = autograd::grad({(g64 * g64).sum()}, {x64})[0];
    for (DType dt : {kFloat16, kBFloat16}) {
      INFO("dtype: " << std::string(dtype_name(dt)));
      Tensor xh = leaf(values.to(dt));
      const Tensor gh = autograd::grad({op(xh).sum()}, {xh}, {}, std::nullopt, true)[0];
      CHECK(gh.dtype() == dt);
      const Tensor hh = autograd::grad({(gh * gh).sum()}, {xh})[0];
      CHECK(hh.dtype() == dt);
      CHECK_ALLCLOSE(hh.to(kFloat64), h64, 5e-2, 5e-2);
    }

    // A non-contiguous incoming gradient (an expand, as sum() hands back) and a transposed x.
    Tensor xt = leaf(noncontiguous_copy(values));
    const Tensor expanded = ones({1, 1}, kFloat64).expand({4, 5});
    const Tensor gt_ = autograd::grad({op(xt)}, {xt}, {expanded}, std::nullopt, true)[0];
    CHECK_ALLCLOSE(gt_, g64, 1e-12, 1e-14);
  }
}

TEST_CASE("gelu at the infinities and in the far tails: the limits, not NaN, in every floating dtype") {
  // gelu(-inf) = 0, gelu(inf) = inf; gelu'(-inf) = 0, gelu'(inf) = 1. The tanh form's
  // derivative below x ~ -10.7 (float) or -21.5 (double) once computed exp(-2u) = inf, then
  // inf * 0 = NaN; huge |x| overflowed x * u'(x). Now both tails give the limits.
  const std::vector<double> xs = {-kInf, -1e30, -1e13, -1e5, -60.0, -30.0, -21.6, -15.0, -10.8, -10.0,
                                  10.0,  15.0,  30.0,  1e5,  1e13,  1e30,  kInf};
  const std::vector<std::pair<const char*, UnaryOp>> forms = {{"exact", gelu_exact}, {"tanh", gelu_tanh}};
  for (const auto& [name, op] : forms) {
    INFO("form: " << std::string(name));
    for (DType dt : {kFloat64, kFloat32, kFloat16, kBFloat16}) {
      INFO("dtype: " << std::string(dtype_name(dt)));
      Tensor x = from_vector<double>(xs, {static_cast<int64_t>(xs.size())}).to(dt).requires_grad_();
      const Tensor y = op(x);
      y.sum().backward();
      const std::vector<double> in = x.to_vector<double>();  // as rounded to the dtype
      const std::vector<double> out = y.to_vector<double>();
      const std::vector<double> slope = x.grad().to_vector<double>();
      for (size_t i = 0; i < in.size(); ++i) {
        INFO("x = " << in[i]);
        if (in[i] < 0) {
          // At x = -10 the true values are -7.6e-23 and -7.6e-22; beyond, smaller still.
          CHECK(std::abs(out[i]) < 1e-20);
          CHECK(std::abs(slope[i]) < 1e-20);
          if (in[i] < -1e4) {
            CHECK(out[i] == 0.0);
            CHECK(slope[i] == 0.0);
          }
        } else {
          CHECK(out[i] == in[i]);  // x * Phi(x) with Phi(x) = 1 exactly at these x
          CHECK(slope[i] == 1.0);
        }
      }
    }
  }
}

TEST_CASE("gelu: the tanh form's derivative is continuous where exp(-2u) overflows") {
  // Just above and below x ~ -10.7 in float and -21.5 in double, the derivative is tiny and
  // matches the double reference (long double where float64 itself underflows).
  auto tanh_derivative = [](long double v) {
    const long double c = std::sqrt(2.0L / 3.14159265358979323846L);
    const long double u = c * (v + 0.044715L * v * v * v);
    const long double s = 1.0L / (1.0L + std::exp(-2.0L * u));
    const long double w = s * (std::exp(-2.0L * u) * s);
    return static_cast<double>(s + v * w * 2.0L * c * (1.0L + 3.0L * 0.044715L * v * v));
  };
  for (const auto& [dt, points] : std::vector<std::pair<DType, std::vector<double>>>{
           {kFloat32, {-10.5, -10.6, -10.7, -10.75, -10.8, -11.0}}, {kFloat64, {-21.0, -21.4, -21.5, -21.6, -22.0}}}) {
    INFO("dtype: " << std::string(dtype_name(dt)));
    Tensor x = from_vector<double>(points, {static_cast<int64_t>(points.size())}).to(dt).requires_grad_();
    gelu_tanh(x).sum().backward();
    const std::vector<double> in = x.to_vector<double>();
    const std::vector<double> slope = x.grad().to_vector<double>();
    for (size_t i = 0; i < in.size(); ++i) {
      INFO("x = " << in[i]);
      CHECK(std::isfinite(slope[i]));
      const double expected = tanh_derivative(in[i]);
      // The float kernel's smallest results are denormal or flushed: an absolute tolerance.
      CHECK(std::abs(slope[i] - expected) <= 1e-3 * std::abs(expected) + (dt == kFloat32 ? 1e-37 : 1e-300));
    }
  }
}

// ---------------------------------------------------------------------------------------
// softplus: the worked example of docs/adding-an-op.md

namespace {
// log(1 + e^(beta v)) / beta written through the identity log(1 + e^u) = max(u, 0) +
// log(1 + e^-|u|), not the kernel's expression; v itself above the threshold.
double softplus_reference(double v, double beta, double threshold) {
  const double u = beta * v;
  if (u > threshold) return v;
  return (std::max(u, 0.0) + std::log1p(std::exp(-std::fabs(u)))) / beta;
}
// sigmoid(beta v) through tanh: (1 + tanh(u / 2)) / 2.
double softplus_derivative_reference(double v, double beta, double threshold) {
  const double u = beta * v;
  return u > threshold ? 1.0 : 0.5 * (1.0 + std::tanh(0.5 * u));
}
Tensor softplus_default(const Tensor& x) { return softplus(x); }
Tensor softplus_beta2(const Tensor& x) { return softplus(x, 2.0, 3.0); }
Tensor softplus_composite(const Tensor& x, double beta) { return log(1.0 + exp(x * beta)) / beta; }
}  // namespace

TEST_CASE("softplus: values against the reference in every floating dtype, for two betas and thresholds") {
  manual_seed(40);
  const Tensor x = randn64({3, 4}) * 3.0;
  check_forward_all_dtypes(softplus_default, [](double v) { return softplus_reference(v, 1.0, 20.0); }, x);
  check_forward_all_dtypes(softplus_beta2, [](double v) { return softplus_reference(v, 2.0, 3.0); }, x);
  // Above the threshold the output is x itself, bit for bit; far left it is the tiny e^x.
  const Tensor tails = from_vector<double>({25.0, 1e4, -50.0, -745.0}, {4});
  CHECK_ALLCLOSE(softplus(tails), reference_map(tails, [](double v) { return softplus_reference(v, 1.0, 20.0); }),
                 1e-15, 0.0);
  CHECK(softplus(tails).to_vector<double>()[1] == 1e4);
  const Tensor specials = from_vector<double>({kNaN, kInf, -kInf}, {3});
  CHECK_ALLCLOSE(softplus(specials), from_vector<double>({kNaN, kInf, 0.0}, {3}), 0.0, 0.0);
}

TEST_CASE("softplus: gradient values, gradcheck contiguous and not, and the composite twin") {
  manual_seed(41);
  Tensor x = leaf(randn64({3, 4}) * 3.0);
  softplus(x, 2.0, 3.0).sum().backward();
  CHECK_ALLCLOSE(x.grad(), reference_map(x, [](double v) { return softplus_derivative_reference(v, 2.0, 3.0); }),
                 1e-12, 1e-14);
  // Away from the threshold, where the op is not differentiable (it switches formula).
  const Tensor away = reference_map(randn64({3, 4}) * 3.0, [](double v) { return away_from_kinks(v, {1.5}); });
  check_unary_gradients(softplus_default, away);
  check_unary_gradients(softplus_beta2, away);
  // The twin log(1 + exp(beta x)) / beta, differentiated by the tape (in range, where it is exact).
  Tensor a = leaf(randn64({3, 4}));
  Tensor b = leaf(a.detach());
  const Tensor upstream = randn64({3, 4});
  const Tensor y = softplus(a, 0.5);
  CHECK_ALLCLOSE(y, softplus_composite(b, 0.5), 1e-12, 1e-12);
  y.backward(upstream);
  softplus_composite(b, 0.5).backward(upstream);
  CHECK_ALLCLOSE(a.grad(), b.grad(), 1e-12, 1e-12);
  CHECK(y.grad_fn()->name().find("Softplus") != std::string::npos);
}

TEST_CASE("softplus: twice differentiable (gradgradcheck), and bad arguments are clear errors") {
  manual_seed(42);
  const Tensor x = reference_map(randn64({3, 4}) * 2.0, [](double v) { return away_from_kinks(v, {1.5}); });
  check_higher_derivatives(softplus_beta2, x);
  check_higher_derivatives(softplus_default, x);
  CHECK_THROWS_CONTAINING(softplus(arange(3)), "softplus: ");
  CHECK_THROWS_CONTAINING(softplus(randn({3}), 0.0), "softplus: beta must not be 0");
  CHECK(softplus(zeros({0, 3})).sizes() == Shape{0, 3});
}
