// The elementwise ops of ops.h's "more elementwise" block, on the CPU: square, rsqrt,
// reciprocal, log1p, expm1, sin, cos, sign, floor, pow(scalar, tensor), clamp with optional
// and tensor bounds, maximum, minimum, lerp, silu, leaky_relu, elu, masked_fill, where with
// scalars, the logical and bitwise ops, isnan/isinf/isfinite, isclose, allclose, equal.
//
// Values are checked against references on plain doubles (std:: math, written differently
// from the kernels where the kernel's form is special), in every floating dtype; gradients
// by gradcheck in float64, contiguous and not, and by their known values at the special
// points (ties, bounds, zero bases); second derivatives by gradgradcheck.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "tests/elementwise_test_helpers.h"

using namespace minigrad;
using namespace minigrad::test;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

double anywhere(double v) { return v; }
double positive(double v) { return std::abs(v) + 0.5; }
double away_from_zero(double v) { return v < 0 ? v - 0.5 : v + 0.5; }
// Halfway between two integers: floor's finite differences never straddle a step.
double between_integers(double v) { return std::floor(2.0 * v) + 0.5; }

struct UnaryCase {
  const char* name;
  UnaryOp op;
  ScalarFn reference;
  ScalarFn domain;
  bool twice_differentiable;
};

std::vector<UnaryCase> unary_cases() {
  return {
      {"square", [](const Tensor& x) { return square(x); }, [](double v) { return v * v; }, anywhere, true},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }, [](double v) { return std::pow(v, -0.5); }, positive, true},
      {"reciprocal", [](const Tensor& x) { return reciprocal(x); }, [](double v) { return std::pow(v, -1.0); },
       away_from_zero, true},
      {"log1p", [](const Tensor& x) { return log1p(x); }, [](double v) { return std::log(1.0 + v); }, positive, true},
      {"expm1", [](const Tensor& x) { return expm1(x); }, [](double v) { return std::exp(v) - 1.0; }, anywhere, true},
      {"sin", [](const Tensor& x) { return sin(x); }, [](double v) { return std::sin(v); }, anywhere, true},
      {"cos", [](const Tensor& x) { return cos(x); }, [](double v) { return std::cos(v); }, anywhere, true},
      {"sign", [](const Tensor& x) { return sign(x); }, [](double v) { return v > 0 ? 1.0 : (v < 0 ? -1.0 : 0.0); },
       [](double v) { return away_from_kinks(v, {0.0}); }, true},
      {"floor", [](const Tensor& x) { return floor(x); }, [](double v) { return std::floor(v); }, between_integers,
       true},
      {"pow(2, x)", [](const Tensor& x) { return pow(2.0, x); }, [](double v) { return std::exp2(v); }, anywhere, true},
      {"pow(0.5, x)", [](const Tensor& x) { return pow(0.5, x); }, [](double v) { return std::pow(0.5, v); }, anywhere,
       true},
      {"silu", [](const Tensor& x) { return silu(x); }, [](double v) { return v * 0.5 * (1.0 + std::tanh(v / 2)); },
       anywhere, true},
      {"leaky_relu", [](const Tensor& x) { return leaky_relu(x); }, [](double v) { return v > 0 ? v : 0.01 * v; },
       [](double v) { return away_from_kinks(v, {0.0}); }, true},
      {"leaky_relu(x, 0.2)", [](const Tensor& x) { return leaky_relu(x, 0.2); },
       [](double v) { return v > 0 ? v : 0.2 * v; }, [](double v) { return away_from_kinks(v, {0.0}); }, true},
      {"elu", [](const Tensor& x) { return elu(x); }, [](double v) { return v > 0 ? v : std::exp(v) - 1.0; },
       [](double v) { return away_from_kinks(v, {0.0}); }, true},
      {"elu(x, 0.5)", [](const Tensor& x) { return elu(x, 0.5); },
       [](double v) { return v > 0 ? v : 0.5 * (std::exp(v) - 1.0); },
       [](double v) { return away_from_kinks(v, {0.0}); }, true},
      {"clamp(x, nullopt, 0.3)", [](const Tensor& x) { return clamp(x, std::nullopt, 0.3); },
       [](double v) { return std::min(v, 0.3); }, [](double v) { return away_from_kinks(v, {0.3}); }, true},
      {"clamp(x, -0.4, nullopt)", [](const Tensor& x) { return clamp(x, -0.4, std::nullopt); },
       [](double v) { return std::max(v, -0.4); }, [](double v) { return away_from_kinks(v, {-0.4}); }, true},
  };
}

// The gradient of x through op, for the incoming gradient g.
Tensor gradient_of(const UnaryOp& op, const Tensor& x, const Tensor& g) {
  Tensor input = leaf(x);
  op(input).backward(g);
  return input.grad();
}

}  // namespace

// ---------------------------------------------------------------------------------------
// unary math and activations

TEST_CASE("more unary ops: values against the reference in every floating dtype") {
  manual_seed(201);
  for (const UnaryCase& c : unary_cases()) {
    INFO("op: " << c.name);
    check_forward_all_dtypes(c.op, c.reference, reference_map(randn64({3, 5}) * 2.0, c.domain));
  }
}

TEST_CASE("more unary ops: gradcheck and gradgradcheck, contiguous and not") {
  manual_seed(202);
  for (const UnaryCase& c : unary_cases()) {
    INFO("op: " << c.name);
    const Tensor x = reference_map(randn64({3, 4}), c.domain);
    check_unary_gradients(c.op, x);
    if (c.twice_differentiable) {
      auto fn = [&](const tensor_list& in) { return c.op(in[0]); };
      CHECK_GRADGRADCHECK(fn, tensor_list{leaf(x)});
      CHECK_GRADGRADCHECK(fn, tensor_list{leaf(noncontiguous_copy(x))});
    }
  }
}

TEST_CASE("more unary ops: empty tensors keep their shape, integer inputs are refused by name") {
  for (const UnaryCase& c : unary_cases()) {
    INFO("op: " << c.name);
    Tensor empty_leaf = leaf(zeros({0, 3}, kFloat64));
    const Tensor y = c.op(empty_leaf);
    CHECK(y.sizes() == Shape{0, 3});
    y.sum().backward();
    CHECK(empty_leaf.grad().sizes() == Shape{0, 3});
  }
  // Each refuses an int64 input with its own name (the name before any "(" of the case).
  for (const UnaryCase& c : unary_cases()) {
    const std::string name = c.name;
    const std::string op = name.substr(0, name.find('('));
    INFO("op: " << name);
    const std::string argument = op == "pow" ? "exponent" : "self";
    CHECK_THROWS_CONTAINING(c.op(arange(3)), op + ": expected a floating-point tensor for argument '" + argument + "'");
  }
  CHECK_THROWS_CONTAINING(pow(2.0, arange(3)), "pow: expected a floating-point tensor for argument 'exponent'");
  CHECK_THROWS_CONTAINING(clamp(randn({3}), std::optional<double>(), std::optional<double>()),
                          "clamp: at least one of 'min' and 'max'");
}

TEST_CASE("more unary ops: NaN, infinities and signed zeros") {
  const Tensor x = from_vector<double>({kNaN, kInf, -kInf, 0.0, -0.0, -1e-300}, {6});
  auto values = [](const Tensor& t) { return t.to_vector<double>(); };
  // sign: 0 for NaN and both zeros, as PyTorch's (0 < x) - (x < 0).
  CHECK(values(sign(x)) == std::vector<double>{0, 1, -1, 0, 0, -1});
  // The activations keep NaN; silu(inf) = inf, silu(-inf) is -inf / inf = NaN as in PyTorch.
  for (const UnaryOp& op :
       std::vector<UnaryOp>{[](const Tensor& t) { return silu(t); }, [](const Tensor& t) { return leaky_relu(t); },
                            [](const Tensor& t) { return elu(t); }}) {
    const std::vector<double> y = values(op(x));
    CHECK(std::isnan(y[0]));
    CHECK(y[1] == kInf);
  }
  CHECK(values(elu(x))[2] == -1.0);
  CHECK(values(leaky_relu(x))[2] == -kInf);
  CHECK(std::isnan(values(silu(x))[2]));
  CHECK(values(rsqrt(x))[3] == kInf);
  CHECK(values(rsqrt(x))[4] == -kInf);
  CHECK(values(reciprocal(x))[1] == 0.0);
  CHECK(values(floor(x))[1] == kInf);
  CHECK(values(expm1(x))[2] == -1.0);
  CHECK(values(log1p(from_vector<double>({-1.0}, {1})))[0] == -kInf);
  // log1p and expm1 keep the low bits that log(1 + x) and exp(x) - 1 lose near 0.
  for (DType dt : {kFloat64, kFloat32}) {
    const Tensor tiny = from_vector<double>({1e-10, -3e-9}, {2}).to(dt);
    CHECK_ALLCLOSE(log1p(tiny), tiny, 1e-6, 0.0);
    CHECK_ALLCLOSE(expm1(tiny), tiny, 1e-6, 0.0);
  }
}

TEST_CASE("more unary ops: gradient values, and zero gradients of sign and floor") {
  manual_seed(203);
  const Tensor x = reference_map(randn64({4, 3}), positive);
  const Tensor g = randn64({4, 3});
  auto expect = [&](const UnaryOp& op, const ScalarFn& derivative) {
    const Tensor expected = reference_zip(x, g, [&](double v, double w) { return w * derivative(v); });
    CHECK_ALLCLOSE(gradient_of(op, x, g), expected, 1e-12, 1e-14);
  };
  expect([](const Tensor& t) { return square(t); }, [](double v) { return 2 * v; });
  expect([](const Tensor& t) { return rsqrt(t); }, [](double v) { return -0.5 * std::pow(v, -1.5); });
  expect([](const Tensor& t) { return reciprocal(t); }, [](double v) { return -1.0 / (v * v); });
  expect([](const Tensor& t) { return log1p(t); }, [](double v) { return 1.0 / (1.0 + v); });
  expect([](const Tensor& t) { return expm1(t); }, [](double v) { return std::exp(v); });
  expect([](const Tensor& t) { return sin(t); }, [](double v) { return std::cos(v); });
  expect([](const Tensor& t) { return cos(t); }, [](double v) { return -std::sin(v); });
  expect([](const Tensor& t) { return pow(3.0, t); }, [](double v) { return std::pow(3.0, v) * std::log(3.0); });
  expect([](const Tensor& t) { return silu(t); },
         [](double v) {
           const double s = 1.0 / (1.0 + std::exp(-v));
           return s + v * s * (1.0 - s);
         });
  const Tensor negative = neg(x);
  CHECK_ALLCLOSE(gradient_of([](const Tensor& t) { return elu(t, 0.7); }, negative, g),
                 reference_zip(negative, g, [](double v, double w) { return w * 0.7 * std::exp(v); }), 1e-12, 1e-14);
  CHECK_ALLCLOSE(gradient_of([](const Tensor& t) { return leaky_relu(t, 0.3); }, negative, g), g * 0.3, 0.0, 0.0);
  CHECK_ALLCLOSE(gradient_of([](const Tensor& t) { return leaky_relu(t, 0.3); }, x, g), g, 0.0, 0.0);
  // At exactly 0 leaky_relu and elu take the left branch, as PyTorch does.
  const Tensor at_zero = zeros({2}, kFloat64);
  const Tensor ones2 = ones({2}, kFloat64);
  CHECK_ALLCLOSE(gradient_of([](const Tensor& t) { return leaky_relu(t, 0.3); }, at_zero, ones2), ones2 * 0.3, 0.0,
                 0.0);
  CHECK_ALLCLOSE(gradient_of([](const Tensor& t) { return elu(t, 0.7); }, at_zero, ones2), ones2 * 0.7, 0.0, 0.0);
  // sign and floor: gradient 0, the steps included; the outputs still require grad.
  const Tensor steps = from_vector<double>({-1.0, 0.0, 1.0, 2.5}, {4});
  for (const UnaryOp& op :
       std::vector<UnaryOp>{[](const Tensor& t) { return sign(t); }, [](const Tensor& t) { return floor(t); }}) {
    Tensor input = leaf(steps);
    const Tensor y = op(input);
    CHECK(y.requires_grad());
    y.sum().backward();
    CHECK(input.grad().to_vector<double>() == std::vector<double>{0, 0, 0, 0});
  }
}

TEST_CASE("elu's double backward stays finite for large positive inputs") {
  Tensor x = leaf(from_vector<double>({800.0, -2.0}, {2}));
  const Tensor g = autograd::grad({elu(x).sum()}, {x}, {}, std::nullopt, /*create_graph=*/true)[0];
  const Tensor h = autograd::grad({g.sum()}, {x})[0];
  const std::vector<double> second = h.to_vector<double>();
  CHECK(second[0] == 0.0);
  CHECK(second[1] == doctest::Approx(std::exp(-2.0)).epsilon(1e-12));
}

TEST_CASE("pow(scalar, tensor): base 0 gives PyTorch's gradient, 0 for exponents >= 0") {
  Tensor e = leaf(from_vector<double>({2.0, 0.0, -1.0}, {3}));
  const Tensor y = pow(0.0, e);
  CHECK(y.to_vector<double>() == std::vector<double>{0.0, 1.0, kInf});
  y.backward(ones({3}, kFloat64));
  const std::vector<double> grad = e.grad().to_vector<double>();
  CHECK(grad[0] == 0.0);
  CHECK(grad[1] == 0.0);
  CHECK(grad[2] == -kInf);  // inf * log(0)
}

TEST_CASE("square is pow(x, 2) and reciprocal is 1 / x: the same bits and history") {
  manual_seed(204);
  const Tensor x = randn64({5});
  CHECK_ALLCLOSE(square(x), pow(x, 2.0), 0.0, 0.0);
  CHECK_ALLCLOSE(reciprocal(x), rdiv(1.0, x), 0.0, 0.0);
  CHECK(square(leaf(x)).grad_fn()->name() == pow(leaf(x), 2.0).grad_fn()->name());
}

// ---------------------------------------------------------------------------------------
// maximum, minimum, clamp with tensor bounds

TEST_CASE("maximum and minimum: values with broadcasting in every floating dtype, NaN propagates") {
  manual_seed(205);
  const Tensor a = randn64({3, 4});
  const Tensor b = randn64({4});
  check_forward_all_dtypes([](const Tensor& p, const Tensor& q) { return maximum(p, q); },
                           [](double p, double q) { return std::max(p, q); }, a, b);
  check_forward_all_dtypes([](const Tensor& p, const Tensor& q) { return minimum(p, q); },
                           [](double p, double q) { return std::min(p, q); }, a, b);
  const Tensor x = from_vector<double>({kNaN, 1.0, kNaN, -kInf, 2.0}, {5});
  const Tensor y = from_vector<double>({1.0, kNaN, kNaN, 3.0, kInf}, {5});
  for (DType dt : {kFloat64, kFloat32, kBFloat16}) {
    const std::vector<double> mx = maximum(x.to(dt), y.to(dt)).to_vector<double>();
    const std::vector<double> mn = minimum(x.to(dt), y.to(dt)).to_vector<double>();
    for (int i = 0; i < 3; ++i) {
      CHECK(std::isnan(mx[i]));
      CHECK(std::isnan(mn[i]));
    }
    CHECK(mx[3] == 3.0);
    CHECK(mn[3] == -kInf);
    CHECK(mx[4] == kInf);
    CHECK(mn[4] == 2.0);
  }
  CHECK(maximum(zeros({0, 4}), zeros({4})).sizes() == Shape{0, 4});
  CHECK_THROWS_CONTAINING(maximum(arange(3), arange(3)), "maximum: expected a floating-point tensor");
  CHECK_THROWS_CONTAINING(minimum(randn({3}), randn({3}, kFloat64)), "minimum: expected one dtype");
  CHECK_THROWS_CONTAINING(maximum(randn({3}), randn({2})), "maximum");
}

TEST_CASE("maximum and minimum: the gradient goes to the picked input, split evenly at ties") {
  const Tensor a = from_vector<double>({1.0, 2.0, 3.0, 4.0}, {4});
  const Tensor b = from_vector<double>({2.0, 2.0, 1.0, 4.0}, {4});
  const Tensor g = from_vector<double>({1.0, 2.0, 3.0, 4.0}, {4});
  for (bool is_max : {true, false}) {
    CAPTURE(is_max);
    Tensor la = leaf(a), lb = leaf(b);
    (is_max ? maximum(la, lb) : minimum(la, lb)).backward(g);
    // Element 0: b is larger; 1 and 3: ties; 2: a is larger.
    const std::vector<double> expect_a = is_max ? std::vector<double>{0, 1, 3, 2} : std::vector<double>{1, 1, 0, 2};
    const std::vector<double> expect_b = is_max ? std::vector<double>{1, 1, 0, 2} : std::vector<double>{0, 1, 3, 2};
    CHECK(la.grad().to_vector<double>() == expect_a);
    CHECK(lb.grad().to_vector<double>() == expect_b);
  }
  // Broadcasting: the row's gradient is summed over the rows it was compared with.
  Tensor rows = leaf(from_vector<double>({0.0, 5.0, 1.0, 1.0}, {2, 2}));
  Tensor row = leaf(from_vector<double>({1.0, 1.0}, {2}));
  maximum(rows, row).sum().backward();
  CHECK(rows.grad().to_vector<double>() == std::vector<double>{0.0, 1.0, 0.5, 0.5});
  CHECK(row.grad().to_vector<double>() == std::vector<double>{1.5, 0.5});
}

TEST_CASE("maximum and minimum: gradcheck and gradgradcheck with broadcasting, contiguous and not") {
  manual_seed(206);
  for (bool is_max : {true, false}) {
    CAPTURE(is_max);
    auto fn = [is_max](const tensor_list& in) { return is_max ? maximum(in[0], in[1]) : minimum(in[0], in[1]); };
    const Tensor a = randn64({3, 4});
    const Tensor b = randn64({4});
    CHECK_GRADCHECK(fn, (tensor_list{leaf(a), leaf(b)}));
    CHECK_GRADCHECK(fn, (tensor_list{leaf(noncontiguous_copy(a)), leaf(b)}));
    CHECK_GRADGRADCHECK(fn, (tensor_list{leaf(a), leaf(b)}));
  }
}

TEST_CASE("clamp with tensor bounds: values with broadcasting, one-sided, in every floating dtype") {
  manual_seed(207);
  const Tensor x = randn64({3, 4}) * 2.0;
  const Tensor lo = randn64({4}) - 0.5;
  const Tensor hi = lo + rand({3, 1}, kFloat64) * 2.0;
  for (const DTypeTolerance& t : forward_tolerances()) {
    INFO("dtype: " << dtype_name(t.dtype));
    const Tensor xd = x.to(t.dtype), lod = lo.to(t.dtype), hid = hi.to(t.dtype);
    const Tensor y = clamp(xd, lod, hid);
    CHECK(y.dtype() == t.dtype);
    const Tensor low_clamped = reference_zip(xd, lod, [](double v, double l) { return std::max(v, l); });
    CHECK_ALLCLOSE(y, reference_zip(low_clamped, hid, [](double v, double h) { return std::min(v, h); }), t.rtol,
                   t.atol);
    CHECK_ALLCLOSE(clamp(xd, lod, std::nullopt), low_clamped, t.rtol, t.atol);
    CHECK_ALLCLOSE(clamp_min(xd, lod), low_clamped, t.rtol, t.atol);
    CHECK_ALLCLOSE(clamp(xd, std::nullopt, hid),
                   reference_zip(xd, hid, [](double v, double h) { return std::min(v, h); }), t.rtol, t.atol);
    CHECK_ALLCLOSE(clamp_max(xd, hid), clamp(xd, std::nullopt, hid), 0.0, 0.0);
  }
  // Scalar bounds as 0-d tensors give clamp(x, double, double)'s bits.
  CHECK_ALLCLOSE(clamp(x, scalar_tensor(-0.5, kFloat64), scalar_tensor(0.7, kFloat64)), clamp(x, -0.5, 0.7), 0.0, 0.0);
  // min > max gives max; NaN in x or a bound gives NaN.
  const Tensor lo_above = full({4}, 2.0, kFloat64);
  const Tensor hi_below = full({4}, 1.0, kFloat64);
  CHECK(clamp(x, lo_above, hi_below).to_vector<double>() == std::vector<double>(12, 1.0));
  const std::vector<double> with_nan =
      clamp(from_vector<double>({kNaN, 0.0, 0.0}, {3}), from_vector<double>({0.0, kNaN, -1.0}, {3}),
            from_vector<double>({1.0, 1.0, kNaN}, {3}))
          .to_vector<double>();
  for (double v : with_nan) CHECK(std::isnan(v));
  // The member form with optional tensors.
  CHECK_ALLCLOSE(x.clamp(lo, hi), clamp(x, lo, hi), 0.0, 0.0);
  CHECK_THROWS_CONTAINING(clamp(x, std::optional<Tensor>(), std::optional<Tensor>()), "clamp: at least one of");
  CHECK_THROWS_CONTAINING(clamp(x, lo.to(kFloat32), hi), "clamp: expected one dtype");
  CHECK_THROWS_CONTAINING(clamp(arange(3), lo, hi), "clamp: expected a floating-point tensor for argument 'self'");
  CHECK_THROWS_CONTAINING(clamp(x, randn64({5}), hi), "clamp");
}

TEST_CASE("clamp with tensor bounds: the gradient goes to x inside, to the bound it was clamped to outside") {
  const Tensor x = from_vector<double>({-2.0, 0.0, 0.5, 1.0, 3.0}, {5});
  const Tensor lo = from_vector<double>({-1.0, 0.0, 0.0, 0.0, 0.0}, {5});
  const Tensor hi = from_vector<double>({1.0, 1.0, 1.0, 1.0, 2.0}, {5});
  Tensor lx = leaf(x), llo = leaf(lo), lhi = leaf(hi);
  clamp(lx, llo, lhi).backward(from_vector<double>({1.0, 2.0, 3.0, 4.0, 5.0}, {5}));
  // x = -2 below lo; x = lo = 0 and x = hi = 1 are inside (ties go to x); x = 3 above hi.
  CHECK(lx.grad().to_vector<double>() == std::vector<double>{0, 2, 3, 4, 0});
  CHECK(llo.grad().to_vector<double>() == std::vector<double>{1, 0, 0, 0, 0});
  CHECK(lhi.grad().to_vector<double>() == std::vector<double>{0, 0, 0, 0, 5});
}

TEST_CASE("clamp with tensor bounds: gradcheck and gradgradcheck of all three, broadcast and not contiguous") {
  manual_seed(208);
  // x away from the bounds: finite differences must not cross them.
  const Tensor lo = randn64({4}) - 1.0;
  const Tensor hi = lo + 2.0;
  const Tensor x = reference_zip(randn64({3, 4}) * 2.0, lo, [](double v, double l) {
    return away_from_kinks(v, {l, l + 2.0}, 0.1);
  });
  auto fn = [](const tensor_list& in) { return clamp(in[0], in[1], in[2]); };
  CHECK_GRADCHECK(fn, (tensor_list{leaf(x), leaf(lo), leaf(hi)}));
  CHECK_GRADCHECK(fn, (tensor_list{leaf(noncontiguous_copy(x)), leaf(lo), leaf(hi)}));
  CHECK_GRADGRADCHECK(fn, (tensor_list{leaf(x), leaf(lo), leaf(hi)}));
  auto one_sided = [](const tensor_list& in) { return clamp_min(in[0], in[1]); };
  CHECK_GRADCHECK(one_sided, (tensor_list{leaf(x), leaf(lo)}));
}

// ---------------------------------------------------------------------------------------
// lerp

TEST_CASE("lerp: values with broadcasting in every floating dtype, exact at weight 0 and 1") {
  manual_seed(209);
  const Tensor start = randn64({3, 4});
  const Tensor end = randn64({4});
  for (double w : {0.3, 0.75, -0.5, 1.5}) {
    CAPTURE(w);
    check_forward_all_dtypes([w](const Tensor& s, const Tensor& e) { return lerp(s, e, w); },
                             [w](double s, double e) { return s + w * (e - s); }, start, end);
  }
  const Tensor weight = rand({3, 1}, kFloat64);
  for (const DTypeTolerance& t : forward_tolerances()) {
    INFO("dtype: " << dtype_name(t.dtype));
    const Tensor s = start.to(t.dtype), e = end.to(t.dtype), w = weight.to(t.dtype);
    const Tensor diff = reference_zip(e, s, [](double p, double q) { return p - q; });
    const Tensor expected = reference_zip(s, reference_zip(w, diff, [](double p, double q) { return p * q; }),
                                          [](double p, double q) { return p + q; });
    CHECK_ALLCLOSE(lerp(s, e, w), expected, t.rtol, t.atol);
  }
  // weight 1 gives end exactly, weight 0 start, for values where start + 1 * (end - start)
  // would round.
  const Tensor a = from_vector<double>({0.1, 1e16, -3.7}, {3}).to(kFloat32);
  const Tensor b = from_vector<double>({0.7, 1.0, 1e-8}, {3}).to(kFloat32);
  CHECK_ALLCLOSE(lerp(a, b, 1.0), b, 0.0, 0.0);
  CHECK_ALLCLOSE(lerp(a, b, 0.0), a, 0.0, 0.0);
  CHECK_ALLCLOSE(lerp(a, b, ones({3})), b, 0.0, 0.0);
  CHECK_THROWS_CONTAINING(lerp(a, b.to(kFloat64), 0.5),
                          "lerp: expected one dtype, but argument 'self' is float32 and argument 'end'");
  CHECK_THROWS_CONTAINING(lerp(a, b, arange(3)), "lerp: expected a floating-point tensor for argument 'weight'");
  CHECK_THROWS_CONTAINING(lerp(arange(3), arange(3), 0.5),
                          "lerp: expected a floating-point tensor for argument 'self'");
}

TEST_CASE("lerp: gradcheck and gradgradcheck, scalar and tensor weight, broadcast and not contiguous") {
  manual_seed(210);
  const Tensor start = randn64({3, 4});
  const Tensor end = randn64({4});
  const Tensor weight = randn64({3, 1});
  auto scalar_weight = [](const tensor_list& in) { return lerp(in[0], in[1], 0.3); };
  auto tensor_weight = [](const tensor_list& in) { return lerp(in[0], in[1], in[2]); };
  CHECK_GRADCHECK(scalar_weight, (tensor_list{leaf(start), leaf(end)}));
  CHECK_GRADCHECK(tensor_weight, (tensor_list{leaf(start), leaf(end), leaf(weight)}));
  CHECK_GRADCHECK(tensor_weight, (tensor_list{leaf(noncontiguous_copy(start)), leaf(end), leaf(weight)}));
  CHECK_GRADGRADCHECK(scalar_weight, (tensor_list{leaf(start), leaf(end)}));
  CHECK_GRADGRADCHECK(tensor_weight, (tensor_list{leaf(start), leaf(end), leaf(weight)}));
}

// ---------------------------------------------------------------------------------------
// masked_fill, where with scalars

TEST_CASE("masked_fill out of place: every dtype, the mask broadcast, the input unchanged") {
  manual_seed(211);
  const Tensor values = reference_map(randn64({3, 4}), [](double v) { return std::round(3 * v); });
  const Tensor mask = gt(randn64({4}), 0.0);
  for (DType dt : {kFloat64, kFloat32, kFloat16, kBFloat16, kInt64, kBool}) {
    INFO("dtype: " << dtype_name(dt));
    const Tensor x = values.to(dt);
    const std::vector<double> before = x.to_vector<double>();
    const Tensor y = masked_fill(x, mask, 1.0);
    CHECK(y.dtype() == dt);
    CHECK(x.to_vector<double>() == before);
    Tensor in_place = x.clone();
    in_place.masked_fill_(mask, 1.0);
    CHECK_ALLCLOSE(y, in_place, 0.0, 0.0);
    CHECK_ALLCLOSE(x.masked_fill(mask, 1.0), y, 0.0, 0.0);
  }
  // The mask may be larger than x: the result has the broadcast shape (as in PyTorch).
  const Tensor row = from_vector<double>({1.0, 2.0}, {2});
  const Tensor big_mask = from_vector<double>({1, 0, 0, 1}, {2, 2}).to(kBool);
  CHECK(masked_fill(row, big_mask, -1.0).to_vector<double>() == std::vector<double>{-1, 2, 1, -1});
  // A non-contiguous x.
  const Tensor xt = noncontiguous_copy(values);
  const Tensor mask_t = gt(randn64({3, 4}), 0.0);
  CHECK_ALLCLOSE(masked_fill(xt, mask_t, 7.0), where(mask_t, full({}, 7.0, kFloat64), xt), 0.0, 0.0);
  CHECK(masked_fill(zeros({0, 4}), mask, 1.0).sizes() == Shape{0, 4});
}

TEST_CASE("masked_fill out of place: gradients to x where kept, and to a 0-d value where filled") {
  manual_seed(212);
  const Tensor mask = from_vector<double>({1, 0, 0, 1, 1, 0}, {2, 3}).to(kBool);
  const Tensor g = randn64({2, 3});
  Tensor x = leaf(randn64({2, 3}));
  masked_fill(x, mask, 5.0).backward(g);
  CHECK_ALLCLOSE(x.grad(), where(mask, zeros({}, kFloat64), g), 0.0, 0.0);

  Tensor x2 = leaf(randn64({2, 3}));
  Tensor value = leaf(scalar_tensor(0.5, kFloat64));
  const Tensor y = masked_fill(x2, mask, value);
  CHECK(y.to_vector<double>()[0] == 0.5);
  y.backward(g);
  const std::vector<double> gv = g.to_vector<double>();
  CHECK(value.grad().item<double>() == doctest::Approx(gv[0] + gv[3] + gv[4]).epsilon(1e-14));
  CHECK_ALLCLOSE(x2.grad(), where(mask, zeros({}, kFloat64), g), 0.0, 0.0);

  auto fn = [&](const tensor_list& in) { return masked_fill(in[0] * in[0], mask, in[1]); };
  CHECK_GRADCHECK(fn, (tensor_list{leaf(randn64({2, 3})), leaf(scalar_tensor(0.5, kFloat64))}));
  CHECK_GRADGRADCHECK(fn, (tensor_list{leaf(randn64({2, 3})), leaf(scalar_tensor(0.5, kFloat64))}));
  auto scalar_fn = [&](const tensor_list& in) { return masked_fill(in[0] * in[0], mask, -2.0); };
  CHECK_GRADGRADCHECK(scalar_fn, tensor_list{leaf(randn64({2, 3}))});

  CHECK_THROWS_CONTAINING(masked_fill(x, mask.to(kFloat32), 1.0),
                          "masked_fill: expected argument 'mask' to have dtype bool, got float32");
  CHECK_THROWS_CONTAINING(masked_fill(x, mask, from_vector<double>({1.0}, {1})),
                          "masked_fill: expected argument 'value' to be a 0-d tensor, got shape [1]");
  CHECK_THROWS_CONTAINING(masked_fill(x, mask, scalar_tensor(1.0)), "masked_fill: expected one dtype");
  CHECK_THROWS_CONTAINING(masked_fill(arange(6).reshape({2, 3}), mask, 0.5),
                          "masked_fill: argument 'value' is 0.5, which an int64 tensor cannot hold");
  CHECK_THROWS_CONTAINING(masked_fill(x, gt(randn64({4}), 0.0), 1.0), "masked_fill");
}

TEST_CASE("where with a scalar branch: the scalar takes the other branch's dtype; two scalars give float32") {
  manual_seed(213);
  const Tensor condition = gt(randn64({3, 4}), 0.0);
  const Tensor x = randn64({4});
  for (DType dt : {kFloat64, kFloat32, kBFloat16, kInt64}) {
    INFO("dtype: " << dtype_name(dt));
    const Tensor xd = (x * 3.0).to(dt);
    const Tensor full_two = full({}, 2.0, dt);
    CHECK(where(condition, 2.0, xd).dtype() == dt);
    CHECK_ALLCLOSE(where(condition, 2.0, xd), where(condition, full_two, xd), 0.0, 0.0);
    CHECK_ALLCLOSE(where(condition, xd, 2.0), where(condition, xd, full_two), 0.0, 0.0);
  }
  const Tensor both = where(condition, 1.5, -2.0);
  CHECK(both.dtype() == kFloat32);
  CHECK(both.sizes() == condition.sizes());
  CHECK_ALLCLOSE(both, where(condition, full({}, 1.5), full({}, -2.0)), 0.0, 0.0);
  Tensor lx = leaf(x);
  where(condition, lx, 0.0).sum().backward();
  CHECK_ALLCLOSE(lx.grad(), sum(condition.to(kFloat64), {0}), 0.0, 0.0);
  CHECK_THROWS_CONTAINING(where(condition, 0.5, arange(4)),
                          "where: argument 'self' is 0.5, which the int64 result cannot hold");
  CHECK_THROWS_CONTAINING(where(condition.to(kFloat32), 1.0, 2.0),
                          "where: expected argument 'condition' to have dtype bool");
}

// ---------------------------------------------------------------------------------------
// logical and bitwise ops

namespace {

// Values with zeros, NaN and infinities, for the truth-value reading of the logical ops.
Tensor truthy_values(const Shape& sizes) {
  std::vector<double> v = reference_map(randn64(sizes), [](double x) { return std::round(x); }).to_vector<double>();
  if (v.size() > 2) {
    v[0] = kNaN;
    v[1] = -kInf;
  }
  return from_vector(v, sizes, TensorOptions(kFloat64));
}

bool truth(double v) { return v != 0.0; }  // NaN != 0: true

}  // namespace

TEST_CASE("logical ops: any dtype in, bool out, nonzero true (NaN too), mixed dtypes, broadcasting") {
  manual_seed(214);
  const Tensor a64 = truthy_values({3, 4});
  const Tensor b64 = truthy_values({4});
  const std::vector<DType> dtypes = {kFloat64, kFloat32, kFloat16, kBFloat16, kInt64, kBool};
  for (DType da : dtypes) {
    for (DType db : {kFloat32, kInt64, kBool}) {
      INFO("dtypes: " << dtype_name(da) << ", " << dtype_name(db));
      // NaN and -inf have no int64 value: those become 1 there.
      const Tensor a = is_floating(da) ? a64.to(da) : where(isfinite(a64), a64, full({}, 1.0, kFloat64)).to(da);
      const Tensor b = is_floating(db) ? b64.to(db) : where(isfinite(b64), b64, full({}, 1.0, kFloat64)).to(db);
      const Tensor y_and = logical_and(a, b);
      CHECK(y_and.dtype() == kBool);
      CHECK_ALLCLOSE(y_and, reference_zip(a, b, [](double p, double q) { return double(truth(p) && truth(q)); }), 0.0,
                     0.0);
      CHECK_ALLCLOSE(logical_or(a, b),
                     reference_zip(a, b, [](double p, double q) { return double(truth(p) || truth(q)); }), 0.0, 0.0);
      CHECK_ALLCLOSE(logical_xor(a, b),
                     reference_zip(a, b, [](double p, double q) { return double(truth(p) != truth(q)); }), 0.0, 0.0);
    }
    const Tensor a = is_floating(da) ? a64.to(da) : where(isfinite(a64), a64, full({}, 1.0, kFloat64)).to(da);
    CHECK(logical_not(a).dtype() == kBool);
    CHECK_ALLCLOSE(logical_not(a), reference_map(a, [](double p) { return double(!truth(p)); }), 0.0, 0.0);
  }
  CHECK(logical_and(zeros({0, 4}), ones({4})).sizes() == Shape{0, 4});
  CHECK_ALLCLOSE(logical_or(noncontiguous_copy(a64), a64), logical_or(a64.contiguous(), a64), 0.0, 0.0);
  CHECK_THROWS_CONTAINING(logical_and(a64, randn64({5})), "logical_and");
  CHECK_THROWS_CONTAINING(logical_not(Tensor()), "logical_not: argument 'self' is an undefined tensor");
}

TEST_CASE("bitwise ops on bool and int64, and the operators & | ^ ~") {
  manual_seed(215);
  const Tensor i64 = reference_map(randn64({3, 4}) * 100.0, [](double v) { return std::round(v); }).to(kInt64);
  const Tensor j64 = reference_map(randn64({4}) * 100.0, [](double v) { return std::round(v); }).to(kInt64);
  const std::vector<int64_t> vi = i64.to_vector<int64_t>();
  const std::vector<int64_t> vj = j64.to_vector<int64_t>();
  auto check_int = [&](const Tensor& y, auto op) {
    CHECK(y.dtype() == kInt64);
    const std::vector<int64_t> got = y.to_vector<int64_t>();
    for (size_t k = 0; k < got.size(); ++k) CHECK(got[k] == op(vi[k], vj[k % 4]));
  };
  check_int(bitwise_and(i64, j64), [](int64_t p, int64_t q) { return p & q; });
  check_int(i64 | j64, [](int64_t p, int64_t q) { return p | q; });
  check_int(i64 ^ j64, [](int64_t p, int64_t q) { return p ^ q; });
  check_int(~i64, [](int64_t p, int64_t) { return ~p; });
  const Tensor p = gt(randn64({3, 4}), 0.0);
  const Tensor q = gt(randn64({4}), 0.0);
  CHECK((p & q).dtype() == kBool);
  CHECK_ALLCLOSE(p & q, logical_and(p, q), 0.0, 0.0);
  CHECK_ALLCLOSE(p | q, logical_or(p, q), 0.0, 0.0);
  CHECK_ALLCLOSE(p ^ q, logical_xor(p, q), 0.0, 0.0);
  CHECK_ALLCLOSE(~p, logical_not(p), 0.0, 0.0);
  CHECK_ALLCLOSE(p.bitwise_and(q), bitwise_and(p, q), 0.0, 0.0);
  const Tensor p_strided = p.t().contiguous().t();  // p's values, not contiguous
  REQUIRE_FALSE(p_strided.is_contiguous());
  CHECK_ALLCLOSE(~p_strided, ~p, 0.0, 0.0);
  CHECK_ALLCLOSE(p_strided & q, p & q, 0.0, 0.0);
  CHECK_THROWS_CONTAINING(bitwise_and(randn({3}), randn({3})),
                          "bitwise_and: expected a bool or int64 tensor for argument 'self', got float32");
  CHECK_THROWS_CONTAINING(p | i64, "bitwise_or: expected one dtype");
  CHECK_THROWS_CONTAINING(~randn({2}), "bitwise_not: expected a bool or int64 tensor");
}

// ---------------------------------------------------------------------------------------
// isnan, isinf, isfinite, isclose, allclose, equal

TEST_CASE("isnan, isinf, isfinite: every dtype, bool results") {
  const Tensor x = from_vector<double>({kNaN, kInf, -kInf, 0.0, -2.5, 1e300}, {2, 3});
  for (DType dt : {kFloat64, kFloat32, kFloat16, kBFloat16}) {
    INFO("dtype: " << dtype_name(dt));
    const Tensor xd = x.to(dt);  // 1e300 is inf in the narrower types
    CHECK(isnan(xd).dtype() == kBool);
    CHECK_ALLCLOSE(isnan(xd), reference_map(xd, [](double v) { return double(std::isnan(v)); }), 0.0, 0.0);
    CHECK_ALLCLOSE(isinf(xd), reference_map(xd, [](double v) { return double(std::isinf(v)); }), 0.0, 0.0);
    CHECK_ALLCLOSE(isfinite(xd), reference_map(xd, [](double v) { return double(std::isfinite(v)); }), 0.0, 0.0);
    CHECK_ALLCLOSE(isinf(xd.t()), isinf(xd).t(), 0.0, 0.0);
  }
  for (DType dt : {kInt64, kBool}) {
    const Tensor i = arange(6).reshape({2, 3}).to(dt);
    CHECK(isnan(i).to_vector<double>() == std::vector<double>(6, 0.0));
    CHECK(isinf(i).to_vector<double>() == std::vector<double>(6, 0.0));
    CHECK(isfinite(i).to_vector<double>() == std::vector<double>(6, 1.0));
    CHECK(isinf(i).dtype() == kBool);
  }
  CHECK(isfinite(zeros({0, 2})).sizes() == Shape{0, 2});
}

TEST_CASE("isclose and allclose: tolerances, infinities, NaN with and without equal_nan, broadcasting") {
  const Tensor a = from_vector<double>({1.0, 1.0, kInf, kInf, kNaN, 0.0, 1e10}, {7});
  const Tensor b = from_vector<double>({1.0 + 1e-6, 1.1, kInf, -kInf, kNaN, 1e-9, 1e10 + 1.0}, {7});
  for (DType dt : {kFloat64, kFloat32}) {
    INFO("dtype: " << dtype_name(dt));
    CHECK(isclose(a.to(dt), b.to(dt)).to_vector<double>() == std::vector<double>{1, 0, 1, 0, 0, 1, 1});
    CHECK(isclose(a.to(dt), b.to(dt), 1e-5, 1e-8, true).to_vector<double>()[4] == 1.0);
    CHECK(isclose(a.to(dt), b.to(dt), 0.2, 0.0).to_vector<double>()[1] == 1.0);
  }
  // The tolerance is relative to the second argument: |a - b| <= atol + rtol |b|.
  const Tensor x = from_vector<double>({1.0}, {1});
  const Tensor y = from_vector<double>({2.0}, {1});
  CHECK(isclose(x, y, 0.5, 0.0).item<bool>());
  CHECK_FALSE(isclose(y, x, 0.5, 0.0).item<bool>());
  CHECK(allclose(a.slice(0, 0, 1), b.slice(0, 0, 1)));
  CHECK_FALSE(allclose(a, b));
  CHECK_FALSE(allclose(a.slice(0, 4, 5), a.slice(0, 4, 5)));
  CHECK(allclose(a.slice(0, 4, 5), a.slice(0, 4, 5), 1e-5, 1e-8, true));
  CHECK(a.slice(0, 4, 5).allclose(a.slice(0, 4, 5), 1e-5, 1e-8, true));
  // Broadcasting, as isclose(...).all() in PyTorch; empty tensors are close.
  CHECK(allclose(ones({3, 4}), ones({4})));
  CHECK(allclose(zeros({0}), zeros({0})));
  // int64 and bool.
  CHECK(allclose(arange(5), arange(5)));
  CHECK(isclose(arange(3), full({3}, 100.0, kInt64), 0.0, 99.0).to_vector<double>() == std::vector<double>{0, 1, 1});
  CHECK(isclose(gt(arange(3), 0.5), gt(arange(3), 1.5)).to_vector<double>() == std::vector<double>{1, 0, 1});
  CHECK_THROWS_CONTAINING(allclose(ones({3}), ones({3}, kFloat64)), "allclose: expected one dtype");
  CHECK_THROWS_CONTAINING(isclose(ones({3}), ones({3}), -1.0), "isclose: argument 'rtol' must be at least 0, got -1");
  CHECK_THROWS_CONTAINING(allclose(Tensor(), ones({3})), "allclose: argument 'self' is an undefined tensor");
}

TEST_CASE("equal: the same shape and the same values; NaN is not equal to itself") {
  manual_seed(216);
  const Tensor x = randn64({3, 4});
  CHECK(equal(x, x.clone()));
  CHECK(x.equal(noncontiguous_copy(x)));
  CHECK_FALSE(equal(x, x + 1e-12));
  CHECK_FALSE(equal(x, x.reshape({4, 3})));
  CHECK_FALSE(equal(ones({3, 4}), ones({4})));  // no broadcasting
  CHECK(equal(zeros({0, 2}), zeros({0, 2})));
  CHECK(equal(arange(4), arange(4)));
  CHECK(equal(gt(x, 0.0), gt(x, 0.0)));
  const Tensor with_nan = from_vector<double>({1.0, kNaN}, {2});
  CHECK_FALSE(equal(with_nan, with_nan));
  CHECK_THROWS_CONTAINING(equal(x, x.to(kFloat32)), "equal: expected one dtype");
}
