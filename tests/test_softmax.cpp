// softmax and log_softmax: forward against the textbook formula exp(x) / sum(exp(x))
// computed here on doubles (no max subtraction: the test inputs are small), gradcheck, and
// the gradient against the tape's gradient of the composite twin.
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "tests/reference_indexing.h"
#include "tests/test_support.h"

using namespace minigrad;
using namespace minigrad::test;

namespace {

// softmax (or log_softmax) of x along the non-negative `dim`, element by element.
Tensor reference_softmax(const Tensor& x, int64_t dim, bool log) {
  const std::vector<double> values = x.to_vector<double>();
  std::vector<double> out(values.size());
  for (const std::vector<int64_t>& lane : reduction_groups(x.sizes(), {dim})) {
    double sum_exp = 0.0;
    for (int64_t i : lane) sum_exp += std::exp(values[static_cast<size_t>(i)]);
    for (int64_t i : lane) {
      const double v = values[static_cast<size_t>(i)];
      out[static_cast<size_t>(i)] = log ? v - std::log(sum_exp) : std::exp(v) / sum_exp;
    }
  }
  return float64_tensor(out, x.sizes());
}

}  // namespace

TEST_CASE("softmax and log_softmax match the formula along every dim") {
  manual_seed(20);
  Tensor x = randn({2, 3, 4}, kFloat64);
  for (int64_t dim : {0, 1, 2, -1, -3}) {
    CAPTURE(dim);
    const int64_t wrapped = dim < 0 ? dim + 3 : dim;
    CHECK_ALLCLOSE(softmax(x, dim), reference_softmax(x, wrapped, false), 1e-12, 1e-14);
    CHECK_ALLCLOSE(log_softmax(x, dim), reference_softmax(x, wrapped, true), 1e-12, 1e-14);
  }
}

TEST_CASE("softmax reads non-contiguous inputs and writes the input's shape") {
  manual_seed(21);
  Tensor transposed = randn({4, 3, 2}, kFloat64).transpose(0, 2);   // [2, 3, 4]
  Tensor sliced = randn({2, 3, 8}, kFloat64).slice(2, 1, 8, 2);     // [2, 3, 4]
  Tensor expanded = randn({3, 1}, kFloat64).expand({2, 3, 4});
  for (const Tensor& x : {transposed, sliced, expanded}) {
    REQUIRE(!x.is_contiguous());
    for (int64_t dim : {0, 2}) {
      CAPTURE(dim);
      CHECK(softmax(x, dim).sizes() == x.sizes());
      CHECK_ALLCLOSE(softmax(x, dim), reference_softmax(x, dim, false), 1e-12, 1e-14);
      CHECK_ALLCLOSE(log_softmax(x, dim), reference_softmax(x, dim, true), 1e-12, 1e-14);
    }
  }
}

TEST_CASE("softmax is stable for large inputs and handles -inf") {
  // exp(1000) overflows a double; subtracting the lane maximum makes it exp(0).
  Tensor big = from_vector<double>({1000, 1001, 1002}, {3});
  Tensor shifted = from_vector<double>({0, 1, 2}, {3});
  CHECK_ALLCLOSE(softmax(big, 0), reference_softmax(shifted, 0, false), 1e-12, 1e-14);
  CHECK_ALLCLOSE(log_softmax(big, 0), reference_softmax(shifted, 0, true), 1e-12, 1e-12);
  CHECK_ALLCLOSE(log_softmax(from_vector<double>({1000, 0}, {2}), 0), from_vector<double>({0, -1000}, {2}), 1e-12,
                 1e-12);
  CHECK_ALLCLOSE(softmax(from_vector<float>({-80, 80}, {2}), 0), from_vector<float>({0, 1}, {2}), 0.0, 1e-30);

  const double inf = std::numeric_limits<double>::infinity();
  Tensor masked = from_vector<double>({-inf, 0, -inf, 0}, {4});
  CHECK(softmax(masked, 0).to_vector<double>() == std::vector<double>{0, 0.5, 0, 0.5});
  const std::vector<double> log_masked = log_softmax(masked, 0).to_vector<double>();
  CHECK(log_masked[0] == -inf);
  CHECK(log_masked[1] == doctest::Approx(-std::log(2.0)));
}

TEST_CASE("gradcheck: softmax and log_softmax, any dim, non-contiguous inputs") {
  manual_seed(22);
  Tensor x = randn({2, 3, 4}, kFloat64).requires_grad_();
  for (int64_t dim : {0, 1, -1}) {
    CAPTURE(dim);
    CHECK_GRADCHECK([dim](const tensor_list& t) { return softmax(t[0], dim); }, tensor_list{x});
    CHECK_GRADCHECK([dim](const tensor_list& t) { return log_softmax(t[0], dim); }, tensor_list{x});
    CHECK_GRADCHECK([dim](const tensor_list& t) { return softmax(t[0].transpose(0, 2), dim); }, tensor_list{x});
    CHECK_GRADCHECK([dim](const tensor_list& t) { return log_softmax(t[0].slice(2, 0, 4, 3), dim); }, tensor_list{x});
  }
}

TEST_CASE("the backward formulas agree with the tape's gradient of the composite twin") {
  manual_seed(23);
  Tensor x = randn({3, 5}, kFloat64);
  Tensor upstream = randn({3, 5}, kFloat64);  // a random gradient, so no cancellation hides an error
  for (int64_t dim : {0, 1}) {
    CAPTURE(dim);
    Tensor fused = x.detach().requires_grad_();
    Tensor twin = x.detach().requires_grad_();
    (softmax(fused, dim) * upstream).sum().backward();
    Tensor e = exp(twin);
    (e / sum(e, {dim}, true) * upstream).sum().backward();
    CHECK_ALLCLOSE(fused.grad(), twin.grad(), 1e-10, 1e-12);

    Tensor log_fused = x.detach().requires_grad_();
    Tensor log_twin = x.detach().requires_grad_();
    (log_softmax(log_fused, dim) * upstream).sum().backward();
    ((log_twin - log(sum(exp(log_twin), {dim}, true))) * upstream).sum().backward();
    CHECK_ALLCLOSE(log_fused.grad(), log_twin.grad(), 1e-10, 1e-12);
  }
}

TEST_CASE("float32, float16 and bfloat16 softmax") {
  manual_seed(24);
  Tensor x = randn({4, 7});
  CHECK(softmax(x, 1).dtype() == kFloat32);
  CHECK_ALLCLOSE(softmax(x, 1), reference_softmax(x, 1, false), 1e-6, 1e-7);
  CHECK_ALLCLOSE(log_softmax(x, 0), reference_softmax(x, 0, true), 1e-6, 1e-6);
  for (DType half : {kFloat16, kBFloat16}) {
    CAPTURE(half);
    Tensor h = x.to(half);
    CHECK(softmax(h, 1).dtype() == half);
    CHECK_ALLCLOSE(softmax(h, 1), reference_softmax(h, 1, false), 1e-2, 1e-3);
    CHECK_ALLCLOSE(log_softmax(h, 1), reference_softmax(h, 1, true), 1e-2, 1e-2);
  }
}

TEST_CASE("softmax of empty and 0-d tensors") {
  CHECK(softmax(zeros({0, 4}, kFloat64), 1).sizes() == Shape{0, 4});
  CHECK(softmax(zeros({0, 4}, kFloat64), 0).sizes() == Shape{0, 4});
  CHECK(log_softmax(zeros({3, 0}, kFloat64), 1).sizes() == Shape{3, 0});
  CHECK(softmax(scalar_tensor(3.0, kFloat64), 0).item<double>() == 1.0);
  CHECK(log_softmax(scalar_tensor(3.0, kFloat64), -1).item<double>() == 0.0);

  Tensor leaf = zeros({0, 4}, kFloat64).requires_grad_();
  softmax(leaf, 1).sum().backward();
  CHECK(leaf.grad().sizes() == Shape{0, 4});
}

TEST_CASE("softmax errors name the op and the argument") {
  CHECK_THROWS_CONTAINING(softmax(zeros({2, 3}), 2), "softmax: dim 2 is out of range");
  CHECK_THROWS_CONTAINING(log_softmax(zeros({2, 3}), -3), "log_softmax: dim -3 is out of range");
  CHECK_THROWS_CONTAINING(softmax(zeros({2, 3}, kInt64), 1),
                          "softmax: expected a floating-point tensor for argument 'self'");
  CHECK_THROWS_CONTAINING(log_softmax(zeros({2}, kBool), 0),
                          "log_softmax: expected a floating-point tensor for argument 'self'");
  CHECK_THROWS_CONTAINING(softmax(Tensor(), 0), "softmax: argument 'self' is an undefined tensor");
}

// ---------------------------------------------------------------------------------------
// higher derivatives: the backward is SoftmaxBackward / LogSoftmaxBackward, a Function
// whose forward is the fused kernel and whose backward is built from differentiable ops

namespace {

using SoftmaxFn = std::function<Tensor(const Tensor&, int64_t)>;

struct SoftmaxCase {
  const char* name;
  SoftmaxFn op;
  const char* backward_name;  // the Function that records the gradient
};

std::vector<SoftmaxCase> softmax_cases() {
  return {{"softmax", [](const Tensor& x, int64_t dim) { return softmax(x, dim); }, "SoftmaxBackward"},
          {"log_softmax", [](const Tensor& x, int64_t dim) { return log_softmax(x, dim); }, "LogSoftmaxBackward"}};
}

// The gradient of op(x, dim) for the incoming gradient g, recorded (create_graph). Under
// gradcheck's finite differences (no grad mode, plain tensors) x becomes a leaf again and
// grad mode is on for the call, so both passes compute the same function of (x, g).
Tensor recorded_gradient(const SoftmaxFn& op, const Tensor& x, const Tensor& g, int64_t dim) {
  AutoGradMode enable(true);
  const Tensor input = x.requires_grad() ? x : x.detach().requires_grad_();
  return autograd::grad({op(input, dim)}, {input}, {g}, std::nullopt, /*create_graph=*/true)[0];
}

std::string recorded_by(const Tensor& t) { return t.grad_fn() ? t.grad_fn()->name() : std::string(); }

}  // namespace

TEST_CASE("softmax backward: one Function on the CPU too, whose output keeps history") {
  manual_seed(30);
  for (const SoftmaxCase& c : softmax_cases()) {
    CAPTURE(c.name);
    Tensor x = randn({3, 5}, kFloat64).requires_grad_();
    const Tensor dx = autograd::grad({c.op(x, 1)}, {x}, {randn({3, 5}, kFloat64)}, std::nullopt, true)[0];
    CHECK(recorded_by(dx).find(c.backward_name) != std::string::npos);
    CHECK(dx.requires_grad());
    // Without create_graph the gradient is a plain tensor: nothing recorded.
    Tensor x2 = randn({3, 5}, kFloat64).requires_grad_();
    c.op(x2, 0).sum().backward();
    CHECK_FALSE(x2.grad().requires_grad());
  }
}

TEST_CASE("softmax backward Functions: gradcheck in both arguments, gradgradcheck, any dim, non-contiguous") {
  manual_seed(31);
  const Tensor base = randn({2, 3, 4}, kFloat64);
  const Tensor transposed = randn({4, 3, 2}, kFloat64).transpose(0, 2);  // [2, 3, 4], strided
  for (const SoftmaxCase& c : softmax_cases()) {
    CAPTURE(c.name);
    for (const Tensor& values : {base, transposed}) {
      for (int64_t dim : {0, 1, -1}) {
        CAPTURE(dim);
        const Tensor g = randn({2, 3, 4}, kFloat64);
        auto backward_fn = [&](const tensor_list& in) { return recorded_gradient(c.op, in[0], in[1], dim); };
        CHECK_GRADCHECK(backward_fn, (tensor_list{values.detach().requires_grad_(), g.detach().requires_grad_()}));
        CHECK_GRADGRADCHECK([&](const tensor_list& in) { return c.op(in[0], dim); },
                            tensor_list{values.detach().requires_grad_()});
      }
    }
    // Third derivatives: the backward's backward is differentiable too.
    const Tensor small = randn({2, 3}, kFloat64);
    auto backward_fn = [&](const tensor_list& in) { return recorded_gradient(c.op, in[0], in[1], 1); };
    CHECK_GRADGRADCHECK(backward_fn,
                        (tensor_list{small.detach().requires_grad_(), randn({2, 3}, kFloat64).requires_grad_()}));
  }
}

TEST_CASE("softmax double backward against the Hessian of the composite twin") {
  manual_seed(32);
  const Tensor values = randn({3, 4}, kFloat64);
  const Tensor upstream = randn({3, 4}, kFloat64);
  const Tensor v = randn({3, 4}, kFloat64);
  for (bool take_log : {false, true}) {
    CAPTURE(take_log);
    for (int64_t dim : {0, 1}) {
      CAPTURE(dim);
      // d/dx of <v, d<upstream, f(x)>/dx>, once through the fused Functions, once through the
      // twin built from exp, sum and div.
      Tensor fused = values.detach().requires_grad_();
      const Tensor y = take_log ? log_softmax(fused, dim) : softmax(fused, dim);
      const Tensor g = autograd::grad({y}, {fused}, {upstream}, std::nullopt, true)[0];
      const Tensor h = autograd::grad({(g * v).sum()}, {fused})[0];

      Tensor twin = values.detach().requires_grad_();
      const Tensor e = exp(twin);
      const Tensor y_twin = take_log ? twin - log(sum(e, {dim}, true)) : e / sum(e, {dim}, true);
      const Tensor g_twin = autograd::grad({y_twin}, {twin}, {upstream}, std::nullopt, true)[0];
      const Tensor h_twin = autograd::grad({(g_twin * v).sum()}, {twin})[0];
      CHECK_ALLCLOSE(g, g_twin, 1e-10, 1e-12);
      CHECK_ALLCLOSE(h, h_twin, 1e-10, 1e-12);
    }
  }
}

TEST_CASE("softmax backward Functions: 0-d, empty, expanded gradients and the half types") {
  manual_seed(33);
  for (const SoftmaxCase& c : softmax_cases()) {
    CAPTURE(c.name);
    // 0-d: one lane of one element; softmax is the constant 1, log_softmax the constant 0.
    Tensor scalar = scalar_tensor(0.7, kFloat64).requires_grad_();
    const Tensor d = autograd::grad({c.op(scalar, 0)}, {scalar}, {scalar_tensor(2.0, kFloat64)}, std::nullopt, true)[0];
    CHECK(d.sizes() == Shape{});
    CHECK(d.item<double>() == 0.0);
    CHECK_GRADGRADCHECK([&](const tensor_list& in) { return c.op(in[0], -1); },
                        tensor_list{scalar_tensor(0.7, kFloat64).requires_grad_()});

    // Empty lanes and empty batches.
    for (int64_t dim : {0, 1}) {
      Tensor empty_input = zeros({0, 4}, kFloat64).requires_grad_();
      const Tensor g = autograd::grad({c.op(empty_input, dim).sum()}, {empty_input}, {}, std::nullopt, true)[0];
      CHECK(g.sizes() == Shape{0, 4});
    }

    // An expanded incoming gradient (stride 0), as sum() hands back: softmax's gradient of
    // sum(softmax) is 0; log_softmax's is 1 - n * softmax.
    const Tensor x = randn({3, 5}, kFloat64);
    Tensor leaf = x.detach().requires_grad_();
    c.op(leaf, 1).sum().backward();
    const Tensor expected = std::string(c.name) == "softmax" ? zeros({3, 5}, kFloat64) : 1.0 - 5.0 * softmax(x, 1);
    CHECK_ALLCLOSE(leaf.grad(), expected, 1e-12, 1e-12);

    // float16 and bfloat16: the CPU kernel computes in float and rounds once; the double
    // backward runs in the dtype.
    const Tensor upstream = randn({3, 5}, kFloat64);
    Tensor x64 = x.detach().requires_grad_();
    const Tensor g64 = autograd::grad({c.op(x64, 1)}, {x64}, {upstream}, std::nullopt, true)[0];
    const Tensor h64 = autograd::grad({(g64 * g64).sum()}, {x64})[0];
    for (DType half : {kFloat16, kBFloat16}) {
      CAPTURE(half);
      Tensor xh = x.to(half).requires_grad_();
      const Tensor gh = autograd::grad({c.op(xh, 1)}, {xh}, {upstream.to(half)}, std::nullopt, true)[0];
      CHECK(gh.dtype() == half);
      CHECK_ALLCLOSE(gh.to(kFloat64), g64, 2e-2, 2e-2);
      const Tensor hh = autograd::grad({(gh * gh).sum()}, {xh})[0];
      CHECK(hh.dtype() == half);
      CHECK_ALLCLOSE(hh.to(kFloat64), h64, 5e-2, 5e-2);
    }
  }
}
