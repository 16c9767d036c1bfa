// The seed's activations as Functions: ReLU (ops/relu.cpp) and GELU (ops/gelu.cpp).
//
// GELU is also checked against its composite twin: the same formula built from primitive
// ops (mul, add, erf; tanh, pow) and differentiated by the tape. The fused Function must
// agree with it in value and in gradient.
#include <cmath>
#include <limits>

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

}  // namespace

// ---------------------------------------------------------------------------------------
// ReLU

TEST_CASE("relu: the seed's example, relu([1, -2, 3]).sum() backward gives [1, 0, 1]") {
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
  // gelu(inf) = inf, gelu(-inf) = -inf * 0 = NaN in the formula; both forms do the same as the twin.
  CHECK_ALLCLOSE(gelu_exact(specials), gelu_exact_composite(specials), 0.0, 0.0);
  CHECK_ALLCLOSE(gelu_tanh(specials), gelu_tanh_composite(specials), 0.0, 0.0);

  for (DType dt : {kFloat16, kBFloat16}) {
    INFO("dtype: " << dtype_name(dt));
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
