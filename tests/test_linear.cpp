// linear on the CPU: values against a double loop written here from the definition, values
// and every gradient against the composite twin (matmul + add on the tape), gradcheck and
// gradgradcheck, the gradients asked for and only those, odd shapes, and the errors. The
// GPU's values and gradients against the CPU's, in every dtype, come from the op table
// (tests/op_table.h).
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
