// Elementwise ops: arithmetic (ops/binary.cpp), math (ops/unary.cpp), comparisons and
// where (ops/compare.cpp), in-place updates (ops/inplace.cpp).
//
// Every expected value is computed in this file from plain doubles with std:: functions
// (tests/elementwise_test_helpers.h); every gradient is checked against finite differences.
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <minigrad/ops/cpu_loops.h>
#include "tests/elementwise_test_functors.h"
#include "tests/elementwise_test_helpers.h"

using namespace minigrad;
using namespace minigrad::test;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

using BinaryOp = std::function<Tensor(const Tensor&, const Tensor&)>;

// Input domains: each maps a standard-normal sample to where the op is defined and smooth.
double anywhere(double v) { return v; }
double positive(double v) { return std::abs(v) + 0.5; }
double away_from_zero(double v) { return v < 0 ? v - 0.5 : v + 0.5; }

// One elementwise op of one tensor, with its independent reference.
struct UnaryCase {
  const char* label;
  const char* op_name;  // what its error messages start with
  UnaryOp op;
  ScalarFn reference;
  ScalarFn domain;
};

std::vector<UnaryCase> unary_cases() {
  return {
      {"neg", "neg", [](const Tensor& x) { return neg(x); }, [](double v) { return -v; }, anywhere},
      {"operator-", "neg", [](const Tensor& x) { return -x; }, [](double v) { return -v; }, anywhere},
      {"exp", "exp", [](const Tensor& x) { return exp(x); }, [](double v) { return std::exp(v); }, anywhere},
      {"log", "log", [](const Tensor& x) { return log(x); }, [](double v) { return std::log(v); }, positive},
      {"sqrt", "sqrt", [](const Tensor& x) { return sqrt(x); }, [](double v) { return std::sqrt(v); }, positive},
      {"erf", "erf", [](const Tensor& x) { return erf(x); }, [](double v) { return std::erf(v); }, anywhere},
      {"tanh", "tanh", [](const Tensor& x) { return tanh(x); }, [](double v) { return std::tanh(v); }, anywhere},
      // sigmoid(v) = (1 + tanh(v/2)) / 2: an identity, not the kernel's 1 / (1 + exp(-v)).
      {"sigmoid", "sigmoid", [](const Tensor& x) { return sigmoid(x); },
       [](double v) { return 0.5 * (1.0 + std::tanh(0.5 * v)); }, anywhere},
      {"abs", "abs", [](const Tensor& x) { return abs(x); }, [](double v) { return std::abs(v); },
       [](double v) { return away_from_kinks(v, {0.0}); }},
      {"pow(x, 3)", "pow", [](const Tensor& x) { return pow(x, 3.0); }, [](double v) { return v * v * v; },
       anywhere},
      {"pow(x, 2.5)", "pow", [](const Tensor& x) { return pow(x, 2.5); },
       [](double v) { return std::pow(v, 2.5); }, positive},
      {"pow(x, -1.5)", "pow", [](const Tensor& x) { return pow(x, -1.5); },
       [](double v) { return std::pow(v, -1.5); }, positive},
      {"pow(x, 0)", "pow", [](const Tensor& x) { return pow(x, 0.0); }, [](double) { return 1.0; }, anywhere},
      {"clamp(x, -0.5, 0.5)", "clamp", [](const Tensor& x) { return clamp(x, -0.5, 0.5); },
       [](double v) { return std::isnan(v) ? v : std::min(std::max(v, -0.5), 0.5); },
       [](double v) { return away_from_kinks(v, {-0.5, 0.5}); }},
      {"clamp_min(x, 0.2)", "clamp", [](const Tensor& x) { return clamp_min(x, 0.2); },
       [](double v) { return std::isnan(v) ? v : std::max(v, 0.2); },
       [](double v) { return away_from_kinks(v, {0.2}); }},
      {"clamp_max(x, -0.1)", "clamp", [](const Tensor& x) { return clamp_max(x, -0.1); },
       [](double v) { return std::isnan(v) ? v : std::min(v, -0.1); },
       [](double v) { return away_from_kinks(v, {-0.1}); }},
      {"add(x, 2.5)", "add", [](const Tensor& x) { return add(x, 2.5); }, [](double v) { return v + 2.5; },
       anywhere},
      {"x + 2.5 and 2.5 + x", "add", [](const Tensor& x) { return (x + 2.5) + (2.5 + x); },
       [](double v) { return 2.0 * (v + 2.5); }, anywhere},
      {"sub(x, 2.5)", "sub", [](const Tensor& x) { return sub(x, 2.5); }, [](double v) { return v - 2.5; },
       anywhere},
      {"mul(x, -1.5)", "mul", [](const Tensor& x) { return mul(x, -1.5); }, [](double v) { return v * -1.5; },
       anywhere},
      {"div(x, 3)", "div", [](const Tensor& x) { return div(x, 3.0); }, [](double v) { return v / 3.0; },
       anywhere},
      {"rsub(2, x)", "rsub", [](const Tensor& x) { return rsub(2.0, x); }, [](double v) { return 2.0 - v; },
       anywhere},
      {"2 - x", "rsub", [](const Tensor& x) { return 2.0 - x; }, [](double v) { return 2.0 - v; }, anywhere},
      {"rdiv(2, x)", "rdiv", [](const Tensor& x) { return rdiv(2.0, x); }, [](double v) { return 2.0 / v; },
       away_from_zero},
      {"2 / x", "rdiv", [](const Tensor& x) { return 2.0 / x; }, [](double v) { return 2.0 / v; },
       away_from_zero},
  };
}

// A random [3, 4] float64 tensor in the case's domain.
Tensor unary_input(const UnaryCase& c) { return reference_map(randn64({3, 4}), c.domain); }

// One elementwise op of two broadcast tensors.
struct BinaryCase {
  const char* op_name;
  BinaryOp op;
  ScalarFn2 reference;
  ScalarFn domain_a;
  ScalarFn domain_b;
};

std::vector<BinaryCase> binary_cases() {
  return {
      {"add", [](const Tensor& a, const Tensor& b) { return add(a, b); },
       [](double a, double b) { return a + b; }, anywhere, anywhere},
      {"sub", [](const Tensor& a, const Tensor& b) { return a - b; }, [](double a, double b) { return a - b; },
       anywhere, anywhere},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }, [](double a, double b) { return a * b; },
       anywhere, anywhere},
      {"div", [](const Tensor& a, const Tensor& b) { return a / b; }, [](double a, double b) { return a / b; },
       anywhere, away_from_zero},
      {"pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); },
       [](double a, double b) { return std::pow(a, b); }, positive, anywhere},
  };
}

// Pairs of shapes that broadcast: equal, a trailing vector, both sides stretched, a 0-d.
const std::vector<std::pair<Shape, Shape>>& broadcast_shape_pairs() {
  static const std::vector<std::pair<Shape, Shape>> pairs = {
      {{3, 4}, {3, 4}}, {{3, 4}, {4}}, {{3, 1}, {1, 4}}, {{}, {3, 4}}, {{2, 1, 3}, {4, 1}}};
  return pairs;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// one-tensor ops (and the tensor-scalar arithmetic)

TEST_CASE("unary ops and scalar arithmetic: values against std:: in every floating dtype") {
  manual_seed(1);
  for (const UnaryCase& c : unary_cases()) {
    INFO("op: " << c.label);
    check_forward_all_dtypes(c.op, c.reference, unary_input(c));
  }
}

TEST_CASE("unary ops and scalar arithmetic: gradcheck, contiguous and non-contiguous") {
  manual_seed(2);
  for (const UnaryCase& c : unary_cases()) {
    INFO("op: " << c.label);
    check_unary_gradients(c.op, unary_input(c));
  }
}

TEST_CASE("unary ops: NaN, infinities and zeros map as in the reference") {
  const Tensor specials = from_vector<double>({kNaN, kInf, -kInf, 0.0, -0.0, 1.0}, {6});
  for (const UnaryCase& c : unary_cases()) {
    INFO("op: " << c.label);
    for (DType dt : {kFloat64, kFloat32}) {
      INFO("dtype: " << dtype_name(dt));
      const Tensor x = specials.to(dt);
      CHECK_ALLCLOSE(c.op(x), reference_map(x, c.reference), 1e-6, 0.0);
    }
  }
}

TEST_CASE("unary ops: empty tensors keep their shape; integer inputs are refused by name") {
  for (const UnaryCase& c : unary_cases()) {
    INFO("op: " << c.label);
    const Tensor y = c.op(zeros({0, 3}, kFloat64));
    CHECK(y.sizes() == Shape{0, 3});
    CHECK(y.dtype() == kFloat64);
    CHECK_THROWS_CONTAINING(c.op(arange(4)), std::string(c.op_name) + ": ");
    CHECK_THROWS_CONTAINING(c.op(arange(4)), "'self'");
  }
}

TEST_CASE("unary ops: backward through an empty tensor gives an empty gradient") {
  Tensor x = zeros({0, 3}, kFloat64).requires_grad_();
  exp(x).sum().backward();
  REQUIRE(x.grad().defined());
  CHECK(x.grad().sizes() == Shape{0, 3});
}

TEST_CASE("gradients at the kinks: abs and clamp take PyTorch's choices") {
  Tensor x = from_vector<double>({-1.0, -0.5, 0.0, 0.5, 1.0}, {5}).requires_grad_();
  clamp(x, -0.5, 0.5).sum().backward();
  // 1 inside [min, max], limits included; 0 outside.
  CHECK(x.grad().to_vector<double>() == std::vector<double>{0, 1, 1, 1, 0});

  Tensor y = from_vector<double>({-2.0, 0.0, 3.0}, {3}).requires_grad_();
  abs(y).sum().backward();
  CHECK(y.grad().to_vector<double>() == std::vector<double>{-1, 0, 1});  // sign, 0 at 0

  Tensor z = from_vector<double>({0.0, 2.0}, {2}).requires_grad_();
  pow(z, 0.0).sum().backward();
  CHECK(z.grad().to_vector<double>() == std::vector<double>{0, 0});  // not 0 * 0^-1 = NaN
}

TEST_CASE("clamp keeps NaN and passes no gradient through it") {
  Tensor x = from_vector<double>({kNaN, 0.25}, {2}).requires_grad_();
  Tensor y = clamp(x, 0.0, 1.0);
  CHECK(std::isnan(y.to_vector<double>()[0]));
  y.sum().backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{0, 1});
}

// ---------------------------------------------------------------------------------------
// two-tensor arithmetic with broadcasting

TEST_CASE("binary ops: values with broadcasting, in every floating dtype") {
  manual_seed(3);
  for (const BinaryCase& c : binary_cases()) {
    INFO("op: " << c.op_name);
    for (const auto& [sa, sb] : broadcast_shape_pairs()) {
      INFO("sa: " << shape_str(sa));
      INFO("sb: " << shape_str(sb));
      const Tensor a = reference_map(randn64(sa), c.domain_a);
      const Tensor b = reference_map(randn64(sb), c.domain_b);
      check_forward_all_dtypes(c.op, c.reference, a, b);
      check_forward_all_dtypes(c.op, c.reference, reference_map(randn64(sb), c.domain_a),
                               reference_map(randn64(sa), c.domain_b));
    }
  }
}

TEST_CASE("binary ops: gradcheck of both inputs with broadcasting") {
  manual_seed(4);
  for (const BinaryCase& c : binary_cases()) {
    INFO("op: " << c.op_name);
    auto fn = [&](const tensor_list& in) { return c.op(in[0], in[1]); };
    for (const auto& [sa, sb] : broadcast_shape_pairs()) {
      INFO("sa: " << shape_str(sa));
      INFO("sb: " << shape_str(sb));
      const Tensor a = leaf(reference_map(randn64(sa), c.domain_a));
      const Tensor b = leaf(reference_map(randn64(sb), c.domain_b));
      CHECK_GRADCHECK(fn, (tensor_list{a, b}));
      CHECK_GRADCHECK(fn, (tensor_list{a.detach(), b}));  // one side needs no gradient
      CHECK_GRADCHECK(fn, (tensor_list{a, b.detach()}));
    }
  }
}

TEST_CASE("binary ops: non-contiguous inputs, values and gradients") {
  manual_seed(5);
  for (const BinaryCase& c : binary_cases()) {
    INFO("op: " << c.op_name);
    const Tensor a = reference_map(randn64({3, 4}), c.domain_a);
    const Tensor b = reference_map(randn64({3, 4}), c.domain_b);
    const Tensor a_strided = noncontiguous_copy(a);
    const Tensor b_strided = noncontiguous_copy(b);
    CHECK_ALLCLOSE(c.op(a_strided, b_strided), reference_zip(a, b, c.reference), 1e-12, 1e-14);
    CHECK_ALLCLOSE(c.op(a_strided, b), reference_zip(a, b, c.reference), 1e-12, 1e-14);
    auto fn = [&](const tensor_list& in) { return c.op(in[0], in[1]); };
    CHECK_GRADCHECK(fn, (tensor_list{leaf(a_strided), leaf(b)}));
    CHECK_GRADCHECK(fn, (tensor_list{leaf(a), leaf(b_strided)}));
  }
}

TEST_CASE("binary ops: empty tensors broadcast to empty results") {
  for (const BinaryCase& c : binary_cases()) {
    INFO("op: " << c.op_name);
    const Tensor y = c.op(zeros({0, 3}, kFloat64), ones({3}, kFloat64));
    CHECK(y.sizes() == Shape{0, 3});
    CHECK(y.dtype() == kFloat64);
  }
}

TEST_CASE("binary ops: dtype mismatch, shapes that do not broadcast, integer inputs") {
  for (const BinaryCase& c : binary_cases()) {
    INFO("op: " << c.op_name);
    const std::string prefix = std::string(c.op_name) + ": ";
    CHECK_THROWS_CONTAINING(c.op(ones({3}, kFloat32), ones({3}, kFloat64)), prefix);
    CHECK_THROWS_CONTAINING(c.op(ones({2, 3}, kFloat64), ones({4}, kFloat64)), prefix);
    CHECK_THROWS_CONTAINING(c.op(arange(3), arange(3)), prefix);
    CHECK_THROWS_CONTAINING(c.op(arange(3), arange(3)), "'self'");
    CHECK_THROWS_CONTAINING(c.op(ones({3}, kFloat64), Tensor()), prefix);
  }
  CHECK_THROWS_CONTAINING(add(ones({3}, kFloat32), ones({3}, kFloat64)), "'other'");
  // pow calls its second argument by its name.
  CHECK_THROWS_CONTAINING(pow(ones({3}, kFloat64), ones({3}, kFloat32)), "'exponent'");
}

TEST_CASE("pow(tensor, tensor) at a zero base or exponent: PyTorch's gradients, no NaN") {
  Tensor x = from_vector<double>({0.0, 2.0, 0.0}, {3}).requires_grad_();
  Tensor e = from_vector<double>({2.0, 3.0, 0.0}, {3}).requires_grad_();
  pow(x, e).sum().backward();
  // d/de = x^e ln x: 0^e is flat in e for e > 0, and 0^0 = 1 is taken as flat too; 2^3 ln 2.
  CHECK_ALLCLOSE(e.grad(), from_vector<double>({0.0, 8.0 * std::log(2.0), 0.0}, {3}), 1e-12, 1e-14);
  // d/dx = e x^(e-1): 2 * 0^1, 3 * 2^2, and 0 for e = 0 (x^0 is constant), not 0 * 0^-1 = NaN.
  CHECK_ALLCLOSE(x.grad(), from_vector<double>({0.0, 12.0, 0.0}, {3}), 1e-12, 1e-14);
}

TEST_CASE("pow(tensor, tensor): d/de at a zero base with a negative exponent is -inf, as in PyTorch") {
  // where((x == 0) & (e >= 0), 0, grad * x^e * log(x)): for e < 0 the formula stands,
  // 0^e * log(0) = inf * -inf = -inf (not NaN, as replacing log(0) by 0 gave).
  Tensor x = from_vector<double>({0.0, 0.0, 0.0, 0.0, 3.0}, {5}).requires_grad_();
  Tensor e = from_vector<double>({-1.0, -2.5, 0.0, 1.5, -1.0}, {5}).requires_grad_();
  pow(x, e).sum().backward();
  const std::vector<double> grad_e = e.grad().to_vector<double>();
  CHECK(grad_e[0] == -kInf);
  CHECK(grad_e[1] == -kInf);
  CHECK(grad_e[2] == 0.0);
  CHECK(grad_e[3] == 0.0);
  CHECK(grad_e[4] == doctest::Approx(std::log(3.0) / 3.0));
  // d/dx = e x^(e-1): -1 * 0^-2 = -inf, and 0 where e = 0.
  const std::vector<double> grad_x = x.grad().to_vector<double>();
  CHECK(grad_x[0] == -kInf);
  CHECK(grad_x[2] == 0.0);
  CHECK(grad_x[3] == 0.0);  // 1.5 * 0^0.5
  // A broadcast exponent sums its gradient over the broadcast rows, special points included.
  Tensor xb = from_vector<double>({0.0, 2.0, 0.0, 4.0}, {2, 2}).requires_grad_();
  Tensor eb = from_vector<double>({2.0, 0.5}, {2}).requires_grad_();
  pow(xb, eb).sum().backward();
  CHECK_ALLCLOSE(eb.grad(), from_vector<double>({0.0, std::sqrt(2.0) * std::log(2.0) + 2.0 * std::log(4.0)}, {2}),
                 1e-12, 1e-14);
}

TEST_CASE("pow(x, scalar): second derivatives p (p - 1) x^(p-2), and none for p = 0") {
  const Tensor values = from_vector<double>({0.5, 1.0, 2.0, 3.0}, {4});
  for (double p : {3.0, 2.5, -1.5, 1.0}) {
    CAPTURE(p);
    Tensor x = values.detach().requires_grad_();
    const Tensor g = autograd::grad({pow(x, p).sum()}, {x}, {}, std::nullopt, /*create_graph=*/true)[0];
    const Tensor h = autograd::grad({g.sum()}, {x}, {}, std::nullopt, false, /*allow_unused=*/true)[0];
    const Tensor expected = reference_map(values, [p](double v) { return p * (p - 1.0) * std::pow(v, p - 2.0); });
    if (p == 1.0) {
      // x^1: the first derivative is the constant 1 (pow(x, 0) * 1), whose derivative is 0.
      CHECK((!h.defined() || allclose(h, zeros({4}, kFloat64), 0.0, 0.0)));
    } else {
      CHECK_ALLCLOSE(h, expected, 1e-12, 1e-12);
    }
  }
  // p = 0: the first derivative is zeros that depend on nothing.
  Tensor x = values.detach().requires_grad_();
  const Tensor g = autograd::grad({pow(x, 0.0).sum()}, {x}, {}, std::nullopt, true)[0];
  CHECK(g.to_vector<double>() == std::vector<double>{0, 0, 0, 0});
}

// ---------------------------------------------------------------------------------------
// second derivatives: every backward above is written with the public ops, so a backward
// run with create_graph records it, and gradgradcheck differentiates it again

TEST_CASE("unary ops and scalar arithmetic: second derivatives by gradgradcheck, contiguous and not") {
  manual_seed(40);
  for (const UnaryCase& c : unary_cases()) {
    INFO("op: " << c.label);
    const Tensor x = unary_input(c);
    auto fn = [&](const tensor_list& in) { return c.op(in[0]); };
    CHECK_GRADGRADCHECK(fn, tensor_list{leaf(x)});
    CHECK_GRADGRADCHECK(fn, tensor_list{leaf(noncontiguous_copy(x))});
  }
}

TEST_CASE("binary ops: second derivatives by gradgradcheck, both inputs, with broadcasting") {
  manual_seed(41);
  for (const BinaryCase& c : binary_cases()) {
    INFO("op: " << c.op_name);
    auto fn = [&](const tensor_list& in) { return c.op(in[0], in[1]); };
    for (const auto& [sa, sb] : broadcast_shape_pairs()) {
      INFO("sa: " << shape_str(sa));
      INFO("sb: " << shape_str(sb));
      const Tensor a = leaf(reference_map(randn64(sa), c.domain_a));
      const Tensor b = leaf(reference_map(randn64(sb), c.domain_b));
      CHECK_GRADGRADCHECK(fn, (tensor_list{a, b}));
      CHECK_GRADGRADCHECK(fn, (tensor_list{a.detach(), b}));
    }
    const Tensor a = reference_map(randn64({3, 4}), c.domain_a);
    const Tensor b = reference_map(randn64({3, 4}), c.domain_b);
    CHECK_GRADGRADCHECK(fn, (tensor_list{leaf(noncontiguous_copy(a)), leaf(b)}));
  }
}

TEST_CASE("where: second derivatives by gradgradcheck, broadcast and non-contiguous") {
  manual_seed(42);
  const Tensor condition = gt(randn64({3, 4}), 0.0);
  auto fn = [&](const tensor_list& in) { return where(condition, in[0], in[1]); };
  CHECK_GRADGRADCHECK(fn, (tensor_list{leaf(randn64({3, 4})), leaf(randn64({3, 4}))}));
  CHECK_GRADGRADCHECK(fn, (tensor_list{leaf(noncontiguous_copy(randn64({3, 4}))), leaf(randn64({3, 1}))}));
  // where inside a nonlinear function: the second derivative flows through the picked branch.
  auto squared = [&](const tensor_list& in) { return where(condition, in[0] * in[0], exp(in[1])); };
  CHECK_GRADGRADCHECK(squared, (tensor_list{leaf(randn64({3, 4})), leaf(randn64({4}))}));
}

TEST_CASE("built-in ops keep their backward state typed: nothing in saved_data") {
  // String-keyed saved_data is for user Functions; a built-in op's node must not pay a hash
  // per value. Each node below is checked through the context it carries.
  Tensor a = leaf(randn64({3, 4}));
  Tensor b = leaf(randn64({4}));
  const Tensor condition = gt(randn64({3, 4}), 0.0);
  const std::vector<std::pair<const char*, Tensor>> outputs = {
      {"add", a + b},
      {"sub", a - b},
      {"mul", a * b},
      {"div", a / b},
      {"add scalar", a + 2.0},
      {"mul scalar", a * 2.0},
      {"div scalar", a / 2.0},
      {"rsub", 2.0 - a},
      {"rdiv", 2.0 / a},
      {"pow scalar", pow(a, 3.0)},
      {"pow tensor", pow(abs(a) + 0.5, b)},
      {"clamp", clamp(a, -0.5, 0.5)},
      {"where", where(condition, a, b)},
      {"relu", relu(a)},
      {"gelu", gelu(a)},
      {"gelu tanh", gelu(a, GeluApproximation::Tanh)},
      {"softmax", softmax(a, 1)},
      {"log_softmax", log_softmax(a, 0)},
  };
  for (const auto& [name, out] : outputs) {
    INFO("op: " << std::string(name));
    const auto* node = dynamic_cast<const autograd::detail::FunctionNode*>(out.grad_fn().get());
    REQUIRE(node != nullptr);
    CHECK(node->ctx_.saved_data.size() == 0);
    // The backward Functions too (recorded under create_graph).
    const Tensor dx = autograd::grad({out.sum()}, {a}, {}, std::nullopt, true)[0];
    if (const auto* backward_node = dynamic_cast<const autograd::detail::FunctionNode*>(dx.grad_fn().get()))
      CHECK(backward_node->ctx_.saved_data.size() == 0);
  }
}

// ---------------------------------------------------------------------------------------
// comparisons and where

namespace {

struct CompareCase {
  const char* op_name;
  BinaryOp op;
  std::function<Tensor(const Tensor&, double)> op_scalar;
  std::function<bool(double, double)> reference;
};

std::vector<CompareCase> compare_cases() {
  return {
      {"eq", [](const Tensor& a, const Tensor& b) { return eq(a, b); }, [](const Tensor& a, double b) { return a == b; },
       [](double a, double b) { return a == b; }},
      {"ne", [](const Tensor& a, const Tensor& b) { return a != b; }, [](const Tensor& a, double b) { return ne(a, b); },
       [](double a, double b) { return a != b; }},
      {"lt", [](const Tensor& a, const Tensor& b) { return lt(a, b); }, [](const Tensor& a, double b) { return a < b; },
       [](double a, double b) { return a < b; }},
      {"le", [](const Tensor& a, const Tensor& b) { return a <= b; }, [](const Tensor& a, double b) { return le(a, b); },
       [](double a, double b) { return a <= b; }},
      {"gt", [](const Tensor& a, const Tensor& b) { return gt(a, b); }, [](const Tensor& a, double b) { return a > b; },
       [](double a, double b) { return a > b; }},
      {"ge", [](const Tensor& a, const Tensor& b) { return a >= b; }, [](const Tensor& a, double b) { return ge(a, b); },
       [](double a, double b) { return a >= b; }},
  };
}

const std::vector<DType>& all_dtypes() {
  static const std::vector<DType> dtypes = {kFloat64, kFloat32, kFloat16, kBFloat16, kInt64, kBool};
  return dtypes;
}

}  // namespace

TEST_CASE("comparisons: every dtype, broadcasting, bool results, ties included") {
  // Small integers and halves: exact in every dtype, so ties stay ties after conversion.
  const Tensor a = from_vector<double>({0, 1, 2, -1.5, 1, 0}, {2, 3});
  const Tensor b = from_vector<double>({1, 1, 0}, {3});
  for (const CompareCase& c : compare_cases()) {
    INFO("op: " << c.op_name);
    auto reference = [&](double x, double y) { return c.reference(x, y) ? 1.0 : 0.0; };
    for (DType dt : all_dtypes()) {
      INFO("dtype: " << dtype_name(dt));
      const Tensor ta = a.to(dt);
      const Tensor tb = b.to(dt);
      const Tensor out = c.op(ta, tb);
      CHECK(out.dtype() == kBool);
      CHECK_ALLCLOSE(out, reference_zip(ta, tb, reference), 0.0, 0.0);
      CHECK_ALLCLOSE(c.op(tb, ta), reference_zip(tb, ta, reference), 0.0, 0.0);
      const Tensor strided = noncontiguous_copy(ta);
      CHECK_ALLCLOSE(c.op(strided, tb), reference_zip(ta, tb, reference), 0.0, 0.0);
      CHECK_ALLCLOSE(c.op_scalar(ta, 1.0), reference_map(ta, [&](double x) { return reference(x, 1.0); }), 0.0, 0.0);
      CHECK(c.op(zeros({0, 3}, dt), tb).sizes() == Shape{0, 3});
    }
  }
}

TEST_CASE("comparisons: NaN compares unequal to everything, itself included") {
  const Tensor x = from_vector<double>({kNaN, 1.0}, {2});
  const Tensor nan = from_vector<double>({kNaN}, {1});
  for (const CompareCase& c : compare_cases()) {
    INFO("op: " << c.op_name);
    auto reference = [&](double u, double v) { return c.reference(u, v) ? 1.0 : 0.0; };
    CHECK_ALLCLOSE(c.op(x, nan), reference_zip(x, nan, reference), 0.0, 0.0);
    CHECK_ALLCLOSE(c.op_scalar(x, kNaN), reference_map(x, [&](double u) { return reference(u, kNaN); }), 0.0, 0.0);
  }
}

TEST_CASE("comparisons with a scalar: floats meet the scalar in their dtype, integers in double") {
  // 0.1 rounded to float32 (or float16) equals the element that holds 0.1 in that dtype.
  CHECK(eq(tensor({0.1f}), 0.1).item<bool>());
  CHECK(eq(from_vector<double>({0.1}, {1}).to(kFloat16), 0.1).item<bool>());
  // An int64 tensor is not truncated to compare with 2.5.
  CHECK(lt(arange(4), 2.5).to_vector<double>() == std::vector<double>{1, 1, 1, 0});
  CHECK(eq(arange(4), 2.5).to_vector<double>() == std::vector<double>{0, 0, 0, 0});
  const Tensor flags = from_vector<double>({0, 1}, {2}).to(kBool);
  CHECK(eq(flags, 1.0).to_vector<double>() == std::vector<double>{0, 1});
}

TEST_CASE("comparisons record no gradient, even on inputs that require it") {
  Tensor x = randn64({3}).requires_grad_();
  const Tensor y = gt(x, 0.0);
  CHECK(!y.requires_grad());
  CHECK(y.grad_fn() == nullptr);
  CHECK(!lt(x, x * 2.0).requires_grad());
}

TEST_CASE("comparisons: dtype mismatch and shapes that do not broadcast name the op") {
  for (const CompareCase& c : compare_cases()) {
    INFO("op: " << c.op_name);
    const std::string prefix = std::string(c.op_name) + ": ";
    CHECK_THROWS_CONTAINING(c.op(ones({3}, kFloat32), arange(3)), prefix);
    CHECK_THROWS_CONTAINING(c.op(ones({3}, kFloat32), arange(3)), "'other'");
    CHECK_THROWS_CONTAINING(c.op(ones({2, 3}), ones({2})), prefix);
    CHECK_THROWS_CONTAINING(c.op_scalar(Tensor(), 1.0), prefix);
  }
}

TEST_CASE("where: every dtype, broadcasting all three arguments") {
  const Tensor condition = from_vector<double>({1, 0, 1}, {3, 1}).to(kBool);
  const Tensor a = from_vector<double>({1, -2, 3, -4}, {1, 4});
  const Tensor b = from_vector<double>({10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120}, {3, 4});
  const Shape out_sizes{3, 4};
  const std::vector<double> c = reference_broadcast_values(condition, out_sizes);
  const std::vector<double> va = reference_broadcast_values(a, out_sizes);
  const std::vector<double> vb = reference_broadcast_values(b, out_sizes);
  std::vector<double> expected(c.size());
  for (size_t i = 0; i < c.size(); ++i) expected[i] = c[i] != 0.0 ? va[i] : vb[i];
  for (DType dt : all_dtypes()) {
    INFO("dtype: " << dtype_name(dt));
    const Tensor out = where(condition, a.to(dt), b.to(dt));
    CHECK(out.dtype() == dt);
    CHECK_ALLCLOSE(out, from_vector(expected, out_sizes).to(dt), 0.0, 0.0);
  }
  CHECK_ALLCLOSE(where(condition, b, scalar_tensor(7.0, kFloat64)),
                 reference_zip(condition, b, [](double k, double v) { return k != 0.0 ? v : 7.0; }), 0.0, 0.0);
  CHECK(where(zeros({0, 1}, kBool), a, a).sizes() == Shape{0, 4});
}

TEST_CASE("where: gradcheck of both branches, broadcast and non-contiguous") {
  manual_seed(6);
  const Tensor condition = gt(randn64({3, 4}), 0.0);
  auto fn = [&](const tensor_list& in) { return where(condition, in[0], in[1]); };
  CHECK_GRADCHECK(fn, (tensor_list{leaf(randn64({3, 4})), leaf(randn64({3, 4}))}));
  CHECK_GRADCHECK(fn, (tensor_list{leaf(randn64({4})), leaf(randn64({}))}));
  CHECK_GRADCHECK(fn, (tensor_list{leaf(noncontiguous_copy(randn64({3, 4}))), leaf(randn64({3, 1}))}));
  const Tensor row_condition = from_vector<double>({1, 0, 0, 1}, {4}).to(kBool);
  auto row_fn = [&](const tensor_list& in) { return where(row_condition, in[0], in[1]); };
  CHECK_GRADCHECK(row_fn, (tensor_list{leaf(randn64({3, 1})), leaf(randn64({3, 4}))}));
}

TEST_CASE("where: the condition must be bool; branches share a dtype; shapes must broadcast") {
  const Tensor x = ones({3}, kFloat64);
  CHECK_THROWS_CONTAINING(where(ones({3}), x, x), "where: ");
  CHECK_THROWS_CONTAINING(where(ones({3}), x, x), "'condition'");
  CHECK_THROWS_CONTAINING(where(gt(x, 0.0), x, ones({3}, kFloat32)), "where: ");
  CHECK_THROWS_CONTAINING(where(gt(x, 0.0), x, ones({2}, kFloat64)), "where: ");
  CHECK_THROWS_CONTAINING(where(gt(ones({2}), 0.0), x, x), "where: ");
}

// ---------------------------------------------------------------------------------------
// in-place updates

namespace {

// Runs `update` on a copy of `self` and checks the values against `expected` and that the
// version went up by exactly one.
void check_inplace(const Tensor& self, const std::function<Tensor&(Tensor&)>& update, const Tensor& expected,
                   double rtol = 0.0, double atol = 0.0) {
  Tensor target = self.clone();
  const uint64_t version = target.version();
  Tensor& returned = update(target);
  CHECK(returned.is_same(target));
  CHECK(target.version() == version + 1);
  CHECK_ALLCLOSE(target, expected, rtol, atol);
}

}  // namespace

TEST_CASE("in-place arithmetic: add_, mul_ with broadcasting, scalars and alpha") {
  manual_seed(7);
  const Tensor x = randn64({3, 4});
  const Tensor row = randn64({4});
  const Tensor column = randn64({3, 1});
  check_inplace(x, [&](Tensor& t) -> Tensor& { return t.add_(row, -0.5); },
                reference_zip(x, row, [](double u, double v) { return u - 0.5 * v; }), 1e-15, 1e-15);
  check_inplace(x, [&](Tensor& t) -> Tensor& { return t.add_(x); },
                reference_map(x, [](double u) { return 2.0 * u; }));
  check_inplace(x, [](Tensor& t) -> Tensor& { return t.add_(1.25); },
                reference_map(x, [](double u) { return u + 1.25; }));
  check_inplace(x, [&](Tensor& t) -> Tensor& { return t.mul_(column); },
                reference_zip(x, column, [](double u, double v) { return u * v; }));
  check_inplace(x, [](Tensor& t) -> Tensor& { return t.mul_(-3.0); },
                reference_map(x, [](double u) { return -3.0 * u; }));
}

TEST_CASE("in-place fills: zero_, fill_, masked_fill_ in every dtype") {
  const Tensor x = from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor mask = from_vector<double>({1, 0, 1}, {3}).to(kBool);
  for (DType dt : all_dtypes()) {
    INFO("dtype: " << dtype_name(dt));
    const Tensor t = x.to(dt);
    check_inplace(t, [](Tensor& s) -> Tensor& { return s.zero_(); }, zeros({2, 3}, kFloat64));
    check_inplace(t, [](Tensor& s) -> Tensor& { return s.fill_(1.0); }, ones({2, 3}, kFloat64));
    check_inplace(t, [&](Tensor& s) -> Tensor& { return s.masked_fill_(mask, 0.0); },
                  reference_zip(t, mask, [](double v, double m) { return m != 0.0 ? 0.0 : v; }));
  }
  check_inplace(x.to(kInt64), [](Tensor& s) -> Tensor& { return s.fill_(-7.0); }, full({2, 3}, -7.0, kFloat64));
  check_inplace(x.to(kFloat16), [](Tensor& s) -> Tensor& { return s.fill_(0.1); },
                full({2, 3}, 0.1, kFloat64), 1e-3, 0.0);
}

TEST_CASE("in-place arithmetic on int64 and the half types") {
  const Tensor x = from_vector<double>({1, -2, 3, 40, 5, -6}, {2, 3});
  const Tensor y = from_vector<double>({3, 2, 1}, {3});
  check_inplace(x.to(kInt64), [&](Tensor& s) -> Tensor& { return s.add_(y.to(kInt64), 2.0); },
                reference_zip(x, y, [](double u, double v) { return u + 2.0 * v; }));
  check_inplace(x.to(kInt64), [](Tensor& s) -> Tensor& { return s.mul_(-3.0); },
                reference_map(x, [](double u) { return -3.0 * u; }));
  for (DType dt : {kFloat16, kBFloat16}) {
    INFO("dtype: " << dtype_name(dt));
    const Tensor a = (x * 0.37).to(dt);
    const Tensor b = (y * 1.3).to(dt);
    check_inplace(a, [&](Tensor& s) -> Tensor& { return s.add_(b, 0.5); },
                  reference_zip(a, b, [](double u, double v) { return u + 0.5 * v; }), 1e-2, 1e-3);
    check_inplace(a, [&](Tensor& s) -> Tensor& { return s.mul_(b); },
                  reference_zip(a, b, [](double u, double v) { return u * v; }), 1e-2, 1e-3);
  }
}

TEST_CASE("in-place int64 arithmetic wraps around on overflow, as PyTorch's does") {
  // Signed overflow is undefined behaviour in C++; the int64 paths compute in uint64_t. (A
  // plain int64 + in the functors aborts this test in the sanitizer build, make sanitize.)
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  auto int64s = [](const std::vector<int64_t>& v) { return from_vector<int64_t>(v, {static_cast<int64_t>(v.size())}); };
  auto values = [](const Tensor& t) {
    std::vector<int64_t> out(static_cast<size_t>(t.numel()));
    const Tensor c = t.contiguous();
    for (int64_t i = 0; i < t.numel(); ++i) out[static_cast<size_t>(i)] = c.data_ptr<int64_t>()[i];
    return out;
  };
  Tensor t = int64s({kMax, kMin, 5});
  t.add_(1.0);
  CHECK(values(t) == std::vector<int64_t>{kMin, kMin + 1, 6});
  t.add_(-2.0);
  CHECK(values(t) == std::vector<int64_t>{kMax - 1, kMax, 4});  // kMin - 1 wraps to kMax

  Tensor u = int64s({kMax, kMin, -3});
  u.add_(int64s({1, -1, 2}));
  CHECK(values(u) == std::vector<int64_t>{kMin, kMax, -1});
  // alpha * other wraps before the add: 2^62 * 4 = 2^64 = 0.
  Tensor w = int64s({7, 7});
  w.add_(int64s({4, 1}), 4611686018427387904.0);
  CHECK(values(w) == std::vector<int64_t>{7, 7 + (int64_t{1} << 62)});

  Tensor m = int64s({kMax, kMin, int64_t{1} << 62});
  m.mul_(2.0);
  CHECK(values(m) == std::vector<int64_t>{-2, 0, kMin});
  Tensor n = int64s({kMin, kMax, 3});
  n.mul_(int64s({-1, kMax, -5}));
  CHECK(values(n) == std::vector<int64_t>{kMin, 1, -15});
}

TEST_CASE("in-place copy_: converts dtypes and broadcasts the source") {
  const Tensor source = from_vector<double>({1.5, -2.25, 3}, {3});
  const Tensor target = zeros({2, 3}, kFloat32);
  check_inplace(target, [&](Tensor& t) -> Tensor& { return t.copy_(source); },
                reference_zip(target, source, [](double, double v) { return v; }));
  check_inplace(zeros({2, 3}, kFloat64), [&](Tensor& t) -> Tensor& { return t.copy_(source.to(kFloat32)); },
                reference_zip(target, source, [](double, double v) { return v; }));
}

TEST_CASE("in-place ops write through views, share the version, and read aliased inputs safely") {
  manual_seed(8);
  Tensor base = randn64({4, 3});
  const Tensor before = base.clone();
  Tensor view = base.t();
  const uint64_t version = base.version();
  view.add_(from_vector<double>({1, 2, 3, 4}, {4}));
  CHECK(base.version() == version + 1);
  CHECK(view.version() == version + 1);
  // view[i][j] = base[j][i], so base row j gained the j-th entry.
  CHECK_ALLCLOSE(base, reference_zip(before, from_vector<double>({1, 2, 3, 4}, {4, 1}),
                                     [](double u, double v) { return u + v; }),
                 1e-15, 1e-15);

  // x += x^T reads x^T while writing x: the op must read the old values.
  Tensor square = randn64({3, 3});
  const std::vector<double> old_values = square.to_vector<double>();
  square.add_(square.t());
  std::vector<double> expected(9);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) expected[static_cast<size_t>(3 * i + j)] = old_values[3 * i + j] + old_values[3 * j + i];
  CHECK_ALLCLOSE(square, from_vector(expected, {3, 3}), 1e-15, 0.0);

  Tensor empty_target = zeros({0, 3}, kFloat64);
  empty_target.fill_(2.0).add_(ones({3}, kFloat64));
  CHECK(empty_target.sizes() == Shape{0, 3});
}

TEST_CASE("in-place ops refuse tensors that require grad while recording, naming the op and argument") {
  Tensor p = randn64({3}).requires_grad_();
  Tensor plain = randn64({3});
  const Tensor mask = gt(plain, 0.0);
  const uint64_t p_version = p.version();
  const uint64_t plain_version = plain.version();
  CHECK_THROWS_CONTAINING(p.add_(1.0), "add_: in-place ops on a tensor that requires grad are not recorded");
  CHECK_THROWS_CONTAINING(p.add_(plain), "'self'");
  CHECK_THROWS_CONTAINING(plain.add_(p), "add_: ");
  CHECK_THROWS_CONTAINING(plain.add_(p), "'other'");
  CHECK_THROWS_CONTAINING(p.mul_(2.0), "mul_: ");
  CHECK_THROWS_CONTAINING(plain.mul_(p), "mul_: ");
  CHECK_THROWS_CONTAINING(p.zero_(), "zero_: ");
  CHECK_THROWS_CONTAINING(p.fill_(1.0), "fill_: ");
  CHECK_THROWS_CONTAINING(p.masked_fill_(mask, 1.0), "masked_fill_: ");
  CHECK_THROWS_CONTAINING(p.copy_(plain), "copy_: ");
  CHECK_THROWS_CONTAINING(plain.copy_(p), "'src'");
  CHECK(p.version() == p_version);
  CHECK(plain.version() == plain_version);
  // Under NoGradGuard (an optimizer step) the same updates are allowed.
  NoGradGuard no_grad;
  const std::vector<double> p_before = p.to_vector<double>();
  p.add_(ones({3}, kFloat64), -0.5);
  CHECK_ALLCLOSE(p, reference_map(from_vector(p_before, {3}), [](double v) { return v - 0.5; }), 1e-15, 0.0);
  plain.copy_(p);
  CHECK(p.version() == p_version + 1);
  CHECK(plain.version() == plain_version + 1);
}

TEST_CASE("in-place ops: bad shapes, dtypes, masks and scalars are clear errors") {
  Tensor x = ones({3, 4}, kFloat64);
  const uint64_t version = x.version();
  CHECK_THROWS_CONTAINING(x.add_(ones({2, 4}, kFloat64)), "add_: argument 'other' of shape [2, 4]");
  // other may broadcast to self, never self to other: self's shape cannot change in place.
  Tensor column = ones({3, 1}, kFloat64);
  CHECK_THROWS_CONTAINING(column.add_(ones({3, 4}, kFloat64)), "add_: argument 'other'");
  CHECK_THROWS_CONTAINING(x.mul_(ones({5}, kFloat64)), "mul_: argument 'other'");
  CHECK_THROWS_CONTAINING(x.copy_(ones({2}, kFloat64)), "copy_: argument 'src'");
  CHECK_THROWS_CONTAINING(x.add_(ones({4}, kFloat32)), "add_: ");
  CHECK_THROWS_CONTAINING(x.masked_fill_(ones({4}, kFloat64), 0.0), "masked_fill_: expected argument 'mask'");
  CHECK_THROWS_CONTAINING(x.masked_fill_(ones({5}, kBool), 0.0), "masked_fill_: argument 'mask'");
  Tensor flags = ones({3}, kBool);
  CHECK_THROWS_CONTAINING(flags.add_(1.0), "add_: argument 'self' has dtype bool");
  CHECK_THROWS_CONTAINING(flags.mul_(flags), "mul_: argument 'self' has dtype bool");
  Tensor integers = arange(3);
  CHECK_THROWS_CONTAINING(integers.add_(0.5), "add_: argument 'other' is 0.5");
  CHECK_THROWS_CONTAINING(integers.add_(integers, 0.5), "add_: argument 'alpha'");
  CHECK_THROWS_CONTAINING(integers.fill_(2.5), "fill_: argument 'value'");
  Tensor expanded = ones({1, 4}, kFloat64).expand({3, 4});
  CHECK_THROWS_CONTAINING(expanded.add_(1.0), "add_: argument 'self' is an expanded view");
  CHECK_THROWS_CONTAINING(Tensor().zero_(), "zero_: argument 'self'");
  CHECK(x.version() == version);
}

// ---- the functor conventions on the CPU loops: the output's index, four inputs, two outputs ----
// The CPU loops are called directly (ops/cpu_loops.h): elementwise_map would also reference
// the CUDA instantiations, which only test_cuda_elementwise links.
// Against a plain loop over the logical (row-major) order of the inputs' values in double:
// the output element k sees index k whatever the inputs' strides.

namespace {

struct ConventionLayout {
  const char* name;
  Shape base;
  std::function<Tensor(const Tensor&)> view;  // the [6, 5] operand, from a tensor of `base`
};

std::vector<ConventionLayout> convention_layouts() {
  return {
      {"contiguous", {6, 5}, [](const Tensor& t) { return t; }},
      {"transposed", {5, 6}, [](const Tensor& t) { return t.t(); }},
      {"every other column", {6, 10}, [](const Tensor& t) { return t.slice(1, 0, 10, 2); }},
  };
}

}  // namespace

TEST_CASE("cpu maps: a kTakesIndex functor gets the output's row-major index, in every layout") {
  for (const ConventionLayout& layout : convention_layouts()) {
    INFO("layout: " << layout.name);
    const Tensor x = layout.view(randn(layout.base, kFloat64));
    Tensor out = empty({6, 5}, kFloat64);
    cpu_map_any<double, double>(out, test::AddIndex{}, {&x});
    std::vector<double> expected = x.to_vector<double>();
    for (size_t k = 0; k < expected.size(); ++k) expected[k] += static_cast<double>(k);
    CHECK_ALLCLOSE(out, from_vector(expected, {6, 5}), 0.0, 0.0);
  }
  // A transposed output: the index is still the output's row-major position, not its memory offset.
  const Tensor x = randn({6, 5}, kFloat64);
  Tensor storage = empty({5, 6}, kFloat64);
  Tensor out = storage.t();
  cpu_map_any<double, double>(out, test::AddIndex{}, {&x});
  std::vector<double> expected = x.to_vector<double>();
  for (size_t k = 0; k < expected.size(); ++k) expected[k] += static_cast<double>(k);
  CHECK_ALLCLOSE(out, from_vector(expected, {6, 5}), 0.0, 0.0);
}

TEST_CASE("cpu maps: four inputs, broadcast and strided, against a plain loop") {
  for (const ConventionLayout& layout : convention_layouts()) {
    INFO("layout: " << layout.name);
    const Tensor p = layout.view(randn(layout.base, kFloat64));
    const Tensor g = randn({5}, kFloat64);                  // broadcast down the rows
    const Tensor m = randn({6, 1}, kFloat64);               // broadcast along each row
    const Tensor v = abs(layout.view(randn(layout.base, kFloat64))) + 0.1;
    const test::FourInputStep step{0.3};
    Tensor out = empty({6, 5}, kFloat64);
    cpu_map<double, double, double, double, double>(out, p, g, m, v, step);
    const Shape shape = {6, 5};
    const std::vector<double> vp = reference_broadcast_values(p, shape), vg = reference_broadcast_values(g, shape),
                              vm = reference_broadcast_values(m, shape), vv = reference_broadcast_values(v, shape);
    std::vector<double> expected(vp.size());
    for (size_t k = 0; k < expected.size(); ++k)
      expected[k] = vp[k] - 0.3 * vm[k] / (std::sqrt(vv[k]) + 1e-3) - 0.25 * vg[k];
    CHECK_ALLCLOSE(out, from_vector(expected, shape), 1e-15, 1e-15);
  }
}

TEST_CASE("cpu maps: two outputs from one pass, of one dtype and of two") {
  for (const ConventionLayout& layout : convention_layouts()) {
    INFO("layout: " << layout.name);
    const Tensor x = layout.view(randn(layout.base, kFloat64));
    const std::vector<double> vx = x.to_vector<double>();
    Tensor s = empty({6, 5}, kFloat64), c = empty({6, 5}, kFloat64);
    cpu_map2<double, double, double>(s, c, x, test::SinCos{});
    std::vector<double> es(vx.size()), ec(vx.size());
    for (size_t k = 0; k < vx.size(); ++k) es[k] = std::sin(vx[k]), ec[k] = std::cos(vx[k]);
    CHECK_ALLCLOSE(s, from_vector(es, {6, 5}), 0.0, 0.0);
    CHECK_ALLCLOSE(c, from_vector(ec, {6, 5}), 0.0, 0.0);

    const Tensor xf = x.to(kFloat32);
    Tensor scaled = empty({6, 5}, kFloat32), mask = empty({6, 5}, kBool);
    cpu_map2<float, bool, float>(scaled, mask, xf, test::ScaleAndMask{-1.5});
    const std::vector<float> vf = xf.to_vector<float>();
    const std::vector<int64_t> vm = mask.to(kInt64).to_vector<int64_t>();
    const std::vector<float> vs = scaled.to_vector<float>();
    for (size_t k = 0; k < vf.size(); ++k) {
      CHECK(vs[k] == vf[k] * -1.5f);
      CHECK(vm[k] == (vf[k] > 0.0f ? 1 : 0));
    }

    const Tensor b = randn({5}, kFloat64);
    Tensor sum = empty({6, 5}, kFloat64), product = empty({6, 5}, kFloat64);
    cpu_map2<double, double, double, double>(sum, product, x, b, test::SumWithIndexAndProduct{});
    const std::vector<double> vb = reference_broadcast_values(b, {6, 5});
    std::vector<double> esum(vx.size()), eproduct(vx.size());
    for (size_t k = 0; k < vx.size(); ++k) esum[k] = vx[k] + vb[k] + static_cast<double>(k), eproduct[k] = vx[k] * vb[k];
    CHECK_ALLCLOSE(sum, from_vector(esum, {6, 5}), 0.0, 0.0);
    CHECK_ALLCLOSE(product, from_vector(eproduct, {6, 5}), 0.0, 0.0);
  }
}
