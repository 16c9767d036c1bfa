// linear, linear_gelu and mlp on the CPU: linear's values against a double loop written
// here from the definition; values and every gradient of all three against their composite
// twins (matmul, add and gelu on the tape); gradcheck and gradgradcheck; the gradients asked
// for and only those; odd shapes; the errors. The GPU's values and gradients against the
// CPU's, in every dtype, come from the op table (tests/op_table.h); the GPU's epilogue path
// has its own suite (tests/test_cuda_linear.cpp).
#include <functional>
#include <optional>
#include <vector>

#include "tests/test_support.h"

using namespace minigrad;
using namespace minigrad::test;

namespace {

// y[r][o] = sum_i x[r][i] * w[o][i] + b[o], in doubles, over the rows of x ([..., in]).
std::vector<double> reference(const Tensor& x, const Tensor& w, const std::optional<Tensor>& b) {
  const std::vector<double> xv = x.to_vector<double>(), wv = w.to_vector<double>();
  const std::vector<double> bv = b ? b->to_vector<double>() : std::vector<double>();
  const int64_t in = w.size(1), out = w.size(0), rows = in == 0 ? 0 : x.numel() / in;
  std::vector<double> y(static_cast<size_t>(rows * out));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double s = b ? bv[static_cast<size_t>(o)] : 0.0;
      for (int64_t i = 0; i < in; ++i) s += xv[static_cast<size_t>(r * in + i)] * wv[static_cast<size_t>(o * in + i)];
      y[static_cast<size_t>(r * out + o)] = s;
    }
  return y;
}

struct Case {
  Shape x;
  int64_t out;
};

// 1-D, 2-D and 3-D inputs, sizes that are not multiples of anything, a batch of 1.
const Case kCases[] = {{{5}, 3}, {{4, 7}, 13}, {{2, 3, 9}, 5}, {{1, 6}, 1}, {{1, 1, 1}, 2}};

}  // namespace

TEST_CASE("linear: values against a double loop, with and without bias, float32 and float64") {
  manual_seed(900);
  for (DType dtype : {kFloat64, kFloat32}) {
    for (const Case& c : kCases) {
      CAPTURE(shape_str(c.x));
      const Tensor x = randn(c.x, dtype), w = randn({c.out, c.x.back()}, dtype), b = randn({c.out}, dtype);
      Shape out_shape = c.x;
      out_shape.back() = c.out;
      const double tol = dtype == kFloat64 ? 1e-12 : 1e-5;
      for (bool with_bias : {true, false}) {
        const std::optional<Tensor> bias = with_bias ? std::optional<Tensor>(b) : std::nullopt;
        const Tensor y = linear(x, w, bias);
        CHECK(y.sizes() == out_shape);
        CHECK(y.dtype() == dtype);
        CHECK_ALLCLOSE(y.to(kFloat64), from_vector(reference(x, w, bias), out_shape), tol, tol);
      }
    }
  }
}

TEST_CASE("linear: against its twin in value and every gradient") {
  manual_seed(901);
  for (const Case& c : kCases) {
    CAPTURE(shape_str(c.x));
    const Tensor x = randn(c.x, kFloat64), w = randn({c.out, c.x.back()}, kFloat64), b = randn({c.out}, kFloat64);
    Shape out_shape = c.x;
    out_shape.back() = c.out;
    const Tensor dy = randn(out_shape, kFloat64);
    auto run = [&](bool fused) {
      const Tensor xl = x.detach().requires_grad_(), wl = w.detach().requires_grad_(), bl = b.detach().requires_grad_();
      const Tensor y = fused ? linear(xl, wl, bl) : composite::linear(xl, wl, bl);
      y.backward(dy);
      return tensor_list{y.detach(), xl.grad(), wl.grad(), bl.grad()};
    };
    const tensor_list f = run(true), t = run(false);
    for (size_t i = 0; i < f.size(); ++i) {
      CAPTURE(i);
      CHECK_ALLCLOSE(f[i], t[i], 1e-12, 1e-12);
    }
  }
}

TEST_CASE("linear: gradcheck and gradgradcheck in float64") {
  manual_seed(902);
  for (const Case& c : {Case{{3}, 2}, Case{{2, 3}, 4}, Case{{2, 2, 3}, 2}}) {
    CAPTURE(shape_str(c.x));
    const Tensor x = randn(c.x, kFloat64).requires_grad_();
    const Tensor w = randn({c.out, c.x.back()}, kFloat64).requires_grad_();
    const Tensor b = randn({c.out}, kFloat64).requires_grad_();
    const auto with_bias = [](const tensor_list& t) { return linear(t[0], t[1], t[2]); };
    const auto without_bias = [](const tensor_list& t) { return linear(t[0], t[1]); };
    CHECK_GRADCHECK(with_bias, (tensor_list{x, w, b}));
    CHECK_GRADCHECK(without_bias, (tensor_list{x, w}));
    CHECK_GRADGRADCHECK(with_bias, (tensor_list{x, w, b}));
  }
}

TEST_CASE("linear: only the gradients asked for are computed") {
  manual_seed(903);
  const Tensor x = randn({3, 4}, kFloat64);
  const Tensor w = randn({2, 4}, kFloat64).requires_grad_();
  const Tensor b = randn({2}, kFloat64);
  linear(x, w, b).sum().backward();
  REQUIRE(w.grad().defined());
  CHECK(!b.grad().defined());
  // dW = dy^T x with dy all ones: each row of dW is the column sums of x.
  CHECK_ALLCLOSE(w.grad(), sum(x, {0}).reshape({1, 4}).expand({2, 4}), 1e-12, 1e-12);
}

TEST_CASE("linear: empty inputs") {
  const Tensor x = zeros({0, 3}).requires_grad_();
  const Tensor w = randn({2, 3}).requires_grad_();
  const Tensor b = randn({2}).requires_grad_();
  const Tensor y = linear(x, w, b);
  CHECK(y.sizes() == Shape{0, 2});
  y.sum().backward();
  CHECK(x.grad().sizes() == Shape{0, 3});
  CHECK(eq(w.grad(), 0.0).all().item<bool>());
  CHECK(eq(b.grad(), 0.0).all().item<bool>());
}

TEST_CASE("linear: errors name the op and the argument") {
  const Tensor x = randn({2, 3});
  CHECK_THROWS_CONTAINING(linear(x, randn({3})), "linear: argument 'weight' must be 2-D [out_features, in_features]");
  CHECK_THROWS_CONTAINING(linear(x, randn({4, 2})), "linear: the last dim of 'input' (3) must equal in_features");
  CHECK_THROWS_CONTAINING(linear(x, randn({4, 3}), randn({3})), "linear: argument 'bias' must be 1-D of out_features = 4");
  CHECK_THROWS_CONTAINING(linear(x, randn({4, 3}, kFloat64)),
                          "linear: expected one dtype, but argument 'input' is float32 and argument 'weight' is float64");
  CHECK_THROWS_CONTAINING(linear(zeros({2, 3}, kInt64), zeros({4, 3}, kInt64)),
                          "linear: expected a floating-point tensor for argument 'input'");
  CHECK_THROWS_CONTAINING(linear(randn({}), randn({1, 1})), "linear: argument 'input' must have at least 1 dim");
  CHECK_THROWS_CONTAINING(composite::linear(x, randn({4, 2})), "linear: the last dim of 'input' (3)");
}

// ---- linear_gelu and mlp: their own Functions (saved pre-activation, backward by hand)
// against the twins built from matmul, add and gelu on the tape ----

namespace {

const GeluApproximation kApproximations[] = {GeluApproximation::None, GeluApproximation::Tanh};


std::optional<Tensor> maybe(const Tensor& t) { return t.defined() ? std::optional<Tensor>(t) : std::nullopt; }

}  // namespace

TEST_CASE("linear_gelu: against its twin in value and every gradient, both GELU forms, with and without bias") {
  manual_seed(904);
  for (GeluApproximation approximate : kApproximations) {
    for (const Case& c : kCases) {
      for (bool with_bias : {true, false}) {
        CAPTURE(shape_str(c.x));
        CAPTURE(with_bias);
        CAPTURE(static_cast<int>(approximate));
        const Tensor x = randn(c.x, kFloat64), w = randn({c.out, c.x.back()}, kFloat64);
        const Tensor b = with_bias ? randn({c.out}, kFloat64) : Tensor();
        Shape out_shape = c.x;
        out_shape.back() = c.out;
        const Tensor dy = randn(out_shape, kFloat64);
        const tensor_list f = value_and_grads({x, w, b}, dy, [&](const tensor_list& t) {
          return linear_gelu(t[0], t[1], maybe(t[2]), approximate);
        });
        const tensor_list twin = value_and_grads({x, w, b}, dy, [&](const tensor_list& t) {
          return composite::linear_gelu(t[0], t[1], maybe(t[2]), approximate);
        });
        REQUIRE(f.size() == twin.size());
        for (size_t i = 0; i < f.size(); ++i) {
          CAPTURE(i);
          CHECK_ALLCLOSE(f[i], twin[i], 1e-12, 1e-12);
        }
      }
    }
  }
}

TEST_CASE("mlp: against its twin in value and every gradient, both GELU forms, with and without biases") {
  manual_seed(905);
  struct MlpCase {
    Shape x;
    int64_t hidden, out;
  };
  for (GeluApproximation approximate : kApproximations) {
    for (const MlpCase& c : {MlpCase{{6}, 5, 3}, MlpCase{{4, 7}, 16, 5}, MlpCase{{2, 3, 4}, 9, 4}, MlpCase{{1, 3}, 1, 1}}) {
      for (bool with_bias : {true, false}) {
        CAPTURE(shape_str(c.x));
        CAPTURE(with_bias);
        CAPTURE(static_cast<int>(approximate));
        const Tensor x = randn(c.x, kFloat64);
        const Tensor w1 = randn({c.hidden, c.x.back()}, kFloat64), w2 = randn({c.out, c.hidden}, kFloat64);
        const Tensor b1 = with_bias ? randn({c.hidden}, kFloat64) : Tensor();
        const Tensor b2 = with_bias ? randn({c.out}, kFloat64) : Tensor();
        Shape out_shape = c.x;
        out_shape.back() = c.out;
        const Tensor dy = randn(out_shape, kFloat64);
        const tensor_list f = value_and_grads({x, w1, b1, w2, b2}, dy, [&](const tensor_list& t) {
          return mlp(t[0], t[1], maybe(t[2]), t[3], maybe(t[4]), approximate);
        });
        const tensor_list twin = value_and_grads({x, w1, b1, w2, b2}, dy, [&](const tensor_list& t) {
          return composite::mlp(t[0], t[1], maybe(t[2]), t[3], maybe(t[4]), approximate);
        });
        REQUIRE(f.size() == twin.size());
        for (size_t i = 0; i < f.size(); ++i) {
          CAPTURE(i);
          CHECK_ALLCLOSE(f[i], twin[i], 1e-12, 1e-12);
        }
      }
    }
  }
}

TEST_CASE("linear_gelu and mlp: gradcheck and gradgradcheck in float64") {
  manual_seed(906);
  const Tensor x = randn({2, 3}, kFloat64).requires_grad_();
  const Tensor w1 = randn({4, 3}, kFloat64).requires_grad_(), b1 = randn({4}, kFloat64).requires_grad_();
  const Tensor w2 = randn({2, 4}, kFloat64).requires_grad_(), b2 = randn({2}, kFloat64).requires_grad_();
  for (GeluApproximation approximate : kApproximations) {
    CAPTURE(static_cast<int>(approximate));
    const auto layer = [approximate](const tensor_list& t) { return linear_gelu(t[0], t[1], t[2], approximate); };
    const auto block = [approximate](const tensor_list& t) {
      return mlp(t[0], t[1], t[2], t[3], t[4], approximate);
    };
    CHECK_GRADCHECK(layer, (tensor_list{x, w1, b1}));
    CHECK_GRADGRADCHECK(layer, (tensor_list{x, w1, b1}));
    CHECK_GRADCHECK(block, (tensor_list{x, w1, b1, w2, b2}));
    CHECK_GRADGRADCHECK(block, (tensor_list{x, w1, b1, w2, b2}));
  }
}

TEST_CASE("mlp: only the gradients asked for are computed") {
  manual_seed(907);
  const Tensor x = randn({3, 4}, kFloat64);
  const Tensor w1 = randn({5, 4}, kFloat64), b1 = randn({5}, kFloat64).requires_grad_();
  const Tensor w2 = randn({2, 5}, kFloat64).requires_grad_(), b2 = randn({2}, kFloat64);
  mlp(x, w1, b1, w2, b2).sum().backward();
  CHECK(b1.grad().defined());
  CHECK(w2.grad().defined());
  CHECK(!b2.grad().defined());
  const Tensor b1_twin = b1.detach().requires_grad_(), w2_twin = w2.detach().requires_grad_();
  composite::mlp(x, w1, b1_twin, w2_twin, b2).sum().backward();
  CHECK_ALLCLOSE(b1.grad(), b1_twin.grad(), 1e-12, 1e-12);
  CHECK_ALLCLOSE(w2.grad(), w2_twin.grad(), 1e-12, 1e-12);
}

TEST_CASE("linear_gelu and mlp: errors name the op and the argument") {
  const Tensor x = randn({2, 3});
  CHECK_THROWS_CONTAINING(linear_gelu(x, randn({4, 2})), "linear_gelu: the last dim of 'input' (3) must equal");
  CHECK_THROWS_CONTAINING(mlp(x, randn({4, 2}), std::nullopt, randn({2, 4}), std::nullopt),
                          "mlp: the last dim of 'input' (3) must equal in_features, the size of dim 1 of 'w1'");
  CHECK_THROWS_CONTAINING(mlp(x, randn({4, 3}), std::nullopt, randn({2, 5}), std::nullopt),
                          "mlp: argument 'w2' must be 2-D [out_features, hidden] with hidden = 4");
  CHECK_THROWS_CONTAINING(mlp(x, randn({4, 3}), randn({3}), randn({2, 4}), std::nullopt),
                          "mlp: argument 'b1' must be 1-D of out_features = 4");
  CHECK_THROWS_CONTAINING(mlp(x, randn({4, 3}), std::nullopt, randn({2, 4}), randn({4})),
                          "mlp: argument 'b2' must be 1-D of out_features = 2");
  CHECK_THROWS_CONTAINING(mlp(x, randn({4, 3}), std::nullopt, randn({2, 4}, kFloat64), std::nullopt),
                          "mlp: expected one dtype, but argument 'input' is float32 and argument 'w2' is float64");
}
