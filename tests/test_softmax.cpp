// softmax and log_softmax: forward against the textbook formula exp(x) / sum(exp(x))
// computed here on doubles (no max subtraction: the test inputs are small), gradcheck, and
// the gradient against the tape's gradient of the composite twin.
#include <cmath>
#include <limits>
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
  CHECK(softmax(scalar_tensor(3.0, kFloat64), 0).item() == 1.0);
  CHECK(log_softmax(scalar_tensor(3.0, kFloat64), -1).item() == 0.0);

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
