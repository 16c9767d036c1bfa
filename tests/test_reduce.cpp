// Reductions: sum, mean, max, argmax, sum_to, and (after the "more reductions" line) min,
// argmin, amax, amin, logsumexp, prod, var, std, norm, cumsum, any, all. Expected values come from reduction_groups
// (tests/reference_indexing.h): plain loops over to_vector<double>() data.
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <vector>

#include "tests/reference_indexing.h"
#include "tests/test_support.h"

using namespace minigrad;
using namespace minigrad::test;

namespace {

using GroupFn = std::function<double(const std::vector<double>&)>;

// The reduction of x over `dims` (non-negative; empty = all), each output element computed
// by `combine` from the input values of its group.
Tensor reference_reduce(const Tensor& x, Shape dims, bool keepdim, const GroupFn& combine) {
  if (dims.empty())
    for (int64_t d = 0; d < x.dim(); ++d) dims.push_back(d);
  const std::vector<double> values = x.to_vector<double>();
  std::vector<double> out;
  for (const std::vector<int64_t>& group : reduction_groups(x.sizes(), dims)) {
    std::vector<double> group_values;
    for (int64_t i : group) group_values.push_back(values[static_cast<size_t>(i)]);
    out.push_back(combine(group_values));
  }
  Shape out_sizes;
  for (int64_t d = 0; d < x.dim(); ++d) {
    bool is_reduced = false;
    for (int64_t r : dims) is_reduced = is_reduced || r == d;
    if (!is_reduced)
      out_sizes.push_back(x.size(d));
    else if (keepdim)
      out_sizes.push_back(1);
  }
  return float64_tensor(out, out_sizes);
}

double group_sum(const std::vector<double>& v) {
  double s = 0.0;
  for (double x : v) s += x;
  return s;
}
double group_mean(const std::vector<double>& v) { return group_sum(v) / static_cast<double>(v.size()); }
// The first maximum; a NaN anywhere wins (the first NaN).
int64_t group_argmax(const std::vector<double>& v) {
  int64_t best = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    if (std::isnan(v[i])) return static_cast<int64_t>(i);
    if (v[i] > v[static_cast<size_t>(best)]) best = static_cast<int64_t>(i);
  }
  return best;
}
double group_max(const std::vector<double>& v) { return v[static_cast<size_t>(group_argmax(v))]; }

Tensor randn64(const Shape& sizes) { return randn(sizes, kFloat64); }

// Double backward of fn at x: autograd::grad with create_graph gives a gradient with
// history, and gradgradcheck compares its derivatives (in x and in the output weights v)
// with finite differences.
void check_double_backward(const std::function<Tensor(const Tensor&)>& fn, const Tensor& x) {
  const Tensor v = randn64(fn(x.detach()).sizes()).requires_grad_();
  const Tensor g = autograd::grad({fn(x)}, {x}, {v}, std::nullopt, /*create_graph=*/true)[0];
  CHECK(g.requires_grad());
  CHECK_GRADGRADCHECK_OPTS([&fn](const tensor_list& t) { return fn(t[0]); }, tensor_list{x}, tensor_list{v},
                           GradcheckOptions{});
}
}  // namespace

TEST_CASE("sum and mean match the reference over every dims list, keepdim or not") {
  manual_seed(1);
  Tensor x = randn64({2, 3, 4});
  const std::vector<std::pair<Shape, Shape>> dims_and_wrapped = {
      {{}, {}}, {{0}, {0}}, {{1}, {1}}, {{-1}, {2}}, {{0, 2}, {0, 2}}, {{-1, 0}, {2, 0}}, {{0, 1, 2}, {0, 1, 2}}};
  for (const auto& [dims, wrapped] : dims_and_wrapped) {
    for (bool keepdim : {false, true}) {
      INFO("dims " << shape_str(dims) << " keepdim " << keepdim);
      CHECK_ALLCLOSE(sum(x, dims, keepdim), reference_reduce(x, wrapped, keepdim, group_sum), 1e-12, 1e-12);
      CHECK_ALLCLOSE(mean(x, dims, keepdim), reference_reduce(x, wrapped, keepdim, group_mean), 1e-12, 1e-12);
      CHECK_ALLCLOSE(x.sum(dims, keepdim), reference_reduce(x, wrapped, keepdim, group_sum), 1e-12, 1e-12);
      CHECK_ALLCLOSE(x.mean(dims, keepdim), reference_reduce(x, wrapped, keepdim, group_mean), 1e-12, 1e-12);
    }
  }
  CHECK(sum(x).dim() == 0);
  CHECK(x.sum().item<double>() == doctest::Approx(group_sum(x.to_vector<double>())).epsilon(1e-12));
  CHECK(x.mean().item<double>() == doctest::Approx(group_mean(x.to_vector<double>())).epsilon(1e-12));
}

TEST_CASE("reductions read non-contiguous inputs through their strides") {
  manual_seed(2);
  Tensor base = randn64({4, 3, 5});
  Tensor transposed = base.transpose(0, 2);        // [5, 3, 4]
  Tensor sliced = base.slice(2, 1, 5, 2);          // [4, 3, 2], every other column
  Tensor expanded = randn64({3, 1}).expand({2, 3, 4});  // stride 0 dims
  for (const Tensor& x : {transposed, sliced, expanded}) {
    REQUIRE(!x.is_contiguous());
    CHECK_ALLCLOSE(sum(x, {1}), reference_reduce(x, {1}, false, group_sum), 1e-12, 1e-12);
    CHECK_ALLCLOSE(sum(x, {0, 2}, true), reference_reduce(x, {0, 2}, true, group_sum), 1e-12, 1e-12);
    CHECK_ALLCLOSE(mean(x, {-1}), reference_reduce(x, {2}, false, group_mean), 1e-12, 1e-12);
    CHECK_ALLCLOSE(std::get<0>(max(x, 0)), reference_reduce(x, {0}, false, group_max), 0.0, 0.0);
    CHECK_ALLCLOSE(std::get<0>(max(x, -1, true)), reference_reduce(x, {2}, true, group_max), 0.0, 0.0);
    CHECK(max(x).item<double>() == group_max(x.to_vector<double>()));
  }
}

TEST_CASE("max and argmax pick the first maximum and propagate NaN") {
  Tensor x = float64_tensor({1, 3, 3, 5, 5, 2}, {2, 3});
  CHECK(argmax(x, 1).to_vector<int64_t>() == std::vector<int64_t>{1, 0});
  CHECK(argmax(x, 0).to_vector<int64_t>() == std::vector<int64_t>{1, 1, 0});
  CHECK(argmax(x, -1, true).sizes() == Shape{2, 1});
  CHECK(argmax(x, 1).dtype() == kInt64);
  CHECK(std::get<0>(max(x, 1)).to_vector<double>() == std::vector<double>{3, 5});
  CHECK(std::get<0>(max(x, 0, true)).sizes() == Shape{1, 3});
  CHECK(max(x).item<double>() == 5.0);

  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor with_nan = float64_tensor({1, nan, 3, nan, 0, 7}, {2, 3});
  CHECK(argmax(with_nan, 1).to_vector<int64_t>() == std::vector<int64_t>{1, 0});
  CHECK(std::isnan(std::get<0>(max(with_nan, 1)).to_vector<double>()[0]));
  CHECK(std::isnan(max(with_nan).item<double>()));

  const double inf = std::numeric_limits<double>::infinity();
  Tensor all_minus_inf = float64_tensor({-inf, -inf, -inf}, {3});
  CHECK(argmax(all_minus_inf, 0).item<int64_t>() == 0);
  CHECK(max(all_minus_inf).item<double>() == -inf);

  Tensor ints = from_vector<int64_t>({4, -9, 4, 12}, {2, 2});
  CHECK(std::get<0>(max(ints, 1)).to_vector<int64_t>() == std::vector<int64_t>{4, 12});
  CHECK(argmax(ints, 0).to_vector<int64_t>() == std::vector<int64_t>{0, 1});
}

TEST_CASE("the gradient of max(dim) flows to the first maximum only") {
  Tensor x = float64_tensor({1, 3, 3, 5, 5, 2}, {2, 3}).requires_grad_();
  std::get<0>(max(x, 1)).sum().backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{0, 1, 0, 1, 0, 0});
  Tensor y = float64_tensor({4, 1, 4, 9, 2, 9}, {3, 2}).requires_grad_();
  std::get<0>(max(y, 0, true)).backward(float64_tensor({10, 20}, {1, 2}));
  CHECK(y.grad().to_vector<double>() == std::vector<double>{10, 0, 0, 20, 0, 0});
}

TEST_CASE("the gradient of max() is split evenly among tied maxima, as in PyTorch") {
  Tensor y = float64_tensor({2, 7, 7, 1}, {4}).requires_grad_();
  (max(y) * 3.0).backward();
  CHECK(y.grad().to_vector<double>() == std::vector<double>{0, 1.5, 1.5, 0});

  Tensor all_equal = full({2, 2}, -1.0, kFloat64).requires_grad_();
  all_equal.max().backward();
  CHECK(all_equal.grad().to_vector<double>() == std::vector<double>(4, 0.25));

  // A NaN maximum: the NaN elements tie, the numbers get nothing.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor with_nan = float64_tensor({1, nan, 3, nan}, {2, 2}).requires_grad_();
  max(with_nan).backward();
  CHECK(with_nan.grad().to_vector<double>() == std::vector<double>{0, 0.5, 0, 0.5});

  // One maximum: all of the gradient, through a non-contiguous input and a 0-d one.
  Tensor single = float64_tensor({1, 9, 3, 2, 0, 4}, {2, 3}).requires_grad_();
  single.t().max().backward();
  CHECK(single.grad().to_vector<double>() == std::vector<double>{0, 1, 0, 0, 0, 0});
  Tensor scalar = scalar_tensor(2.0, kFloat64).requires_grad_();
  max(scalar).backward();
  CHECK(scalar.grad().item<double>() == 1.0);
}

TEST_CASE("gradcheck: sum, mean and max, any dims, keepdim, non-contiguous inputs") {
  manual_seed(3);
  Tensor x = randn64({2, 3, 4}).requires_grad_();
  for (bool keepdim : {false, true}) {
    CAPTURE(keepdim);
    CHECK_GRADCHECK([&](const tensor_list& t) { return sum(t[0], {1}, keepdim); }, tensor_list{x});
    CHECK_GRADCHECK([&](const tensor_list& t) { return sum(t[0], {-1, 0}, keepdim); }, tensor_list{x});
    CHECK_GRADCHECK([&](const tensor_list& t) { return mean(t[0], {-2}, keepdim); }, tensor_list{x});
    CHECK_GRADCHECK([&](const tensor_list& t) { return mean(t[0], {}, keepdim); }, tensor_list{x});
    // Random normal values have no ties, so max is differentiable at x.
    CHECK_GRADCHECK([&](const tensor_list& t) { return std::get<0>(max(t[0], -1, keepdim)); }, tensor_list{x});
    CHECK_GRADCHECK([&](const tensor_list& t) { return std::get<0>(max(t[0], 0, keepdim)); }, tensor_list{x});
    CHECK_GRADCHECK([&](const tensor_list& t) { return sum(t[0].transpose(0, 2), {0}, keepdim); }, tensor_list{x});
    CHECK_GRADCHECK([&](const tensor_list& t) { return std::get<0>(max(t[0].slice(2, 0, 4, 2), 1, keepdim)); },
                    tensor_list{x});
  }
  CHECK_GRADCHECK([](const tensor_list& t) { return sum(t[0]); }, tensor_list{x});
  CHECK_GRADCHECK([](const tensor_list& t) { return t[0].mean(); }, tensor_list{x});
  CHECK_GRADCHECK([](const tensor_list& t) { return t[0].max(); }, tensor_list{x});
  CHECK_GRADCHECK([](const tensor_list& t) { return t[0].transpose(1, 2).max(); }, tensor_list{x});
  // A non-contiguous leaf: the analytical pass reads it through its strides.
  Tensor strided_leaf = randn64({4, 3}).t().detach().requires_grad_();
  REQUIRE(!strided_leaf.is_contiguous());
  CHECK_GRADCHECK([](const tensor_list& t) { return sum(t[0], {0}); }, tensor_list{strided_leaf});
  CHECK_GRADCHECK([](const tensor_list& t) { return std::get<0>(max(t[0], 1)); }, tensor_list{strided_leaf});
}

TEST_CASE("sum_to sums broadcast dims back down") {
  manual_seed(4);
  Tensor x = randn64({2, 3, 4});
  CHECK(sum_to(x, {2, 3, 4}).is_same(x));
  CHECK_ALLCLOSE(sum_to(x, {4}), reference_reduce(x, {0, 1}, false, group_sum), 1e-12, 1e-12);
  CHECK_ALLCLOSE(sum_to(x, {3, 1}), reference_reduce(x, {0, 2}, true, group_sum).reshape({3, 1}), 1e-12, 1e-12);
  CHECK_ALLCLOSE(sum_to(x, {1, 1, 4}), reference_reduce(x, {0, 1}, true, group_sum), 1e-12, 1e-12);
  CHECK_ALLCLOSE(sum_to(x, {}), reference_reduce(x, {}, false, group_sum), 1e-12, 1e-12);
  // Size-1 dims of x stay: [2, 1, 4] -> [1, 4] only drops the leading dim.
  Tensor y = randn64({2, 1, 4});
  CHECK_ALLCLOSE(sum_to(y, {1, 4}), reference_reduce(y, {0}, false, group_sum), 1e-12, 1e-12);

  Tensor leaf = x.detach().requires_grad_();
  CHECK_GRADCHECK([](const tensor_list& t) { return sum_to(t[0], {3, 1}); }, tensor_list{leaf});
  CHECK_GRADCHECK([](const tensor_list& t) { return sum_to(t[0], {4}); }, tensor_list{leaf});

  CHECK_THROWS_CONTAINING(sum_to(x, {1, 2, 3, 4}), "sum_to: cannot sum 'self' of shape [2, 3, 4]");
  CHECK_THROWS_CONTAINING(sum_to(x, {2, 4}), "sum_to: shape [2, 4] does not broadcast");
}

TEST_CASE("float32 sums: runs of 8 in float, then double; the error does not grow with the length") {
  // 2^24 + 1 == 2^24 in float32: a float32 accumulator would drop every one of the ones.
  // minigrad's CPU sum adds each lane's next 8 terms in float and that run into double: only
  // the ones in 2^24's own run (at most 7) can be lost, and the float32 result rounds once
  // more (float32 numbers are 2 apart here).
  const double exact = 16778216.0;
  std::vector<float> values(1001, 1.0f);
  values[0] = 16777216.0f;
  Tensor x = from_vector(values, {1001});
  CHECK(sum(x).dtype() == kFloat32);
  const double total = sum(x).item<double>();
  CHECK(total <= exact);
  CHECK(total >= exact - 8.0);
  CHECK(mean(x).item<float>() == static_cast<float>(total / 1001.0));
  // The same numbers as a column: rows add in runs of 8 too.
  Tensor column = x.reshape({1001, 1}).expand({1001, 3}).contiguous();
  const std::vector<float> by_column = sum(column, {0}).to_vector<float>();
  for (float s : by_column) CHECK(s == static_cast<float>(total));

  // The bound, on random rows and columns of every length up to a few blocks: each run is at
  // most 7 float roundings of its magnitudes, the output one more.
  manual_seed(5);
  for (int64_t n : {1, 7, 8, 9, 127, 128, 129, 1000, 4096, 4097, 9001}) {
    CAPTURE(n);
    Tensor y = randn({3, n});
    const std::vector<float> v = y.to_vector<float>();
    const std::vector<float> rows = sum(y, {1}).to_vector<float>();
    const std::vector<float> cols = sum(y.t().contiguous(), {0}).to_vector<float>();
    for (size_t r = 0; r < 3; ++r) {
      double exact_sum = 0, magnitude = 0;
      for (int64_t c = 0; c < n; ++c) {
        exact_sum += v[r * static_cast<size_t>(n) + static_cast<size_t>(c)];
        magnitude += std::fabs(v[r * static_cast<size_t>(n) + static_cast<size_t>(c)]);
      }
      const double bound = 8.0 * std::ldexp(1.0, -24) * magnitude;
      CHECK(std::fabs(rows[r] - exact_sum) <= bound);
      CHECK(std::fabs(cols[r] - exact_sum) <= bound);
    }
  }
  Tensor z = randn({3, 50, 7});
  CHECK_ALLCLOSE(sum(z, {1}), reference_reduce(z, {1}, false, group_sum).to(kFloat32), 1e-6, 1e-6);
  CHECK_ALLCLOSE(std::get<0>(max(z, 2)), reference_reduce(z, {2}, false, group_max).to(kFloat32), 0.0, 0.0);
}

TEST_CASE("float16 and bfloat16 reduce by upcasting to float32") {
  manual_seed(6);
  for (DType half : {kFloat16, kBFloat16}) {
    CAPTURE(half);
    Tensor x = randn({4, 6}).to(half);
    Tensor s = sum(x, {1});
    CHECK(s.dtype() == half);
    // The reference reads the same rounded inputs; the result is rounded once to 8 or 11 bits.
    CHECK_ALLCLOSE(s, reference_reduce(x, {1}, false, group_sum), 1e-2, 2e-2);
    CHECK_ALLCLOSE(mean(x, {0}), reference_reduce(x, {0}, false, group_mean), 1e-2, 1e-2);
    CHECK_ALLCLOSE(std::get<0>(max(x, 1)), reference_reduce(x, {1}, false, group_max), 0.0, 0.0);
    const GroupFn first_max_index = [](const std::vector<double>& v) { return static_cast<double>(group_argmax(v)); };
    CHECK(argmax(x, 0).to_vector<double>() == reference_reduce(x, {0}, false, first_max_index).to_vector<double>());
  }
}

TEST_CASE("int64 sums wrap around on overflow, as in PyTorch") {
  const int64_t big = std::numeric_limits<int64_t>::max();
  const int64_t small = std::numeric_limits<int64_t>::min();
  CHECK(sum(from_vector<int64_t>({big, 1}, {2})).item<int64_t>() == small);
  CHECK(sum(from_vector<int64_t>({small, -1}, {2})).item<int64_t>() == big);
  // Wrapping past the limit and back gives the exact total.
  CHECK(sum(from_vector<int64_t>({big, big, -big, -big + 5}, {4})).item<int64_t>() == 5);
  CHECK(sum(from_vector<int64_t>({big, 1, 3, big}, {2, 2}), {0}).to_vector<int64_t>() ==
        std::vector<int64_t>{small + 2, small});
}

TEST_CASE("integer and bool sums return int64") {
  Tensor ints = from_vector<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(sum(ints).dtype() == kInt64);
  CHECK(sum(ints).item<int64_t>() == 21);
  CHECK(sum(ints, {0}).to_vector<int64_t>() == std::vector<int64_t>{5, 7, 9});
  Tensor flags = from_vector<bool>({true, false, true, true}, {4});
  CHECK(sum(flags).dtype() == kInt64);
  CHECK(sum(flags).item<int64_t>() == 3);
}

TEST_CASE("empty tensors: sum is 0, mean is NaN, max is an error") {
  Tensor empty_rows = zeros({0, 3}, kFloat64);
  CHECK(sum(empty_rows).item<double>() == 0.0);
  CHECK(sum(empty_rows, {0}).to_vector<double>() == std::vector<double>{0, 0, 0});
  CHECK(sum(empty_rows, {1}).sizes() == Shape{0});
  CHECK(std::isnan(mean(empty_rows).item<double>()));
  CHECK(std::get<0>(max(empty_rows, 1)).sizes() == Shape{0});
  CHECK_THROWS_CONTAINING(max(empty_rows), "max: the input 'self' is empty (shape [0, 3])");
  CHECK_THROWS_CONTAINING(std::get<0>(max(empty_rows, 0)), "max: cannot reduce over dim 0 of size 0");
  CHECK_THROWS_CONTAINING(argmax(empty_rows, 0), "argmax: cannot reduce over dim 0 of size 0");

  Tensor leaf = zeros({0, 3}, kFloat64).requires_grad_();
  sum(leaf, {1}).sum().backward();
  CHECK(leaf.grad().sizes() == Shape{0, 3});
}

TEST_CASE("0-d tensors reduce to themselves") {
  Tensor s = scalar_tensor(2.5, kFloat64);
  CHECK(sum(s).item<double>() == 2.5);
  CHECK(sum(s, {0}).dim() == 0);
  CHECK(mean(s, {-1}, true).item<double>() == 2.5);
  CHECK(max(s).item<double>() == 2.5);
  CHECK(std::get<0>(max(s, 0)).dim() == 0);
  CHECK(argmax(s, 0).item<int64_t>() == 0);
}

TEST_CASE("reduction errors name the op and the argument") {
  Tensor x = zeros({2, 3}, kFloat64);
  CHECK_THROWS_CONTAINING(sum(x, {1, -1}), "sum: dim 1 appears more than once in the argument 'dim'");
  CHECK_THROWS_CONTAINING(mean(x, {0, 0}), "mean: dim 0 appears more than once");
  CHECK_THROWS_CONTAINING(sum(x, {2}), "sum: dim 2 is out of range");
  CHECK_THROWS_CONTAINING(std::get<0>(max(x, -3)), "max: dim -3 is out of range");
  CHECK_THROWS_CONTAINING(argmax(x, 5), "argmax: dim 5 is out of range");
  CHECK_THROWS_CONTAINING(mean(zeros({2}, kInt64)), "mean: expected a floating-point tensor for argument 'self'");
  CHECK_THROWS_CONTAINING(sum(Tensor()), "sum: argument 'self' is an undefined tensor");
}

TEST_CASE("a second backward through sum and mean works without retain_graph and accumulates") {
  // Sum and Mean save no tensors (only shapes, which survive backward), as in PyTorch.
  Tensor x = float64_tensor({1, 2, 3, 4, 5, 6}, {2, 3}).requires_grad_();
  Tensor y = x.sum();
  y.backward();
  y.backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>(6, 2.0));

  Tensor z = float64_tensor({1, 2, 3, 4}, {4}).requires_grad_();
  Tensor m = z.mean({0}, true);
  m.backward(ones({1}, kFloat64));
  m.backward(ones({1}, kFloat64));
  CHECK(z.grad().to_vector<double>() == std::vector<double>(4, 0.5));
}

TEST_CASE("double backward: sum, mean, max(dim) and max() are twice differentiable") {
  manual_seed(7);
  Tensor x = randn64({2, 3, 4}).requires_grad_();
  const std::vector<std::pair<const char*, std::function<Tensor(const Tensor&)>>> reductions = {
      {"sum", [](const Tensor& t) { return t.sum(); }},
      {"sum(dims)", [](const Tensor& t) { return sum(t, {0, -1}); }},
      {"sum(dim, keepdim)", [](const Tensor& t) { return sum(t, {1}, true); }},
      {"mean", [](const Tensor& t) { return t.mean(); }},
      {"mean(dims, keepdim)", [](const Tensor& t) { return mean(t, {-1, 0}, true); }},
      {"max", [](const Tensor& t) { return t.max(); }},
      {"max of a transpose", [](const Tensor& t) { return t.transpose(0, 2).max(); }},
      {"max(dim)", [](const Tensor& t) { return std::get<0>(max(t, 1)); }},
      {"std::get<0>(max(dim, keepdim))", [](const Tensor& t) { return std::get<0>(max(t, -1, true)); }},
      // Squared, so the gradient depends on x too: its derivative in x runs the reduction's
      // backward backwards.
      {"sum squared", [](const Tensor& t) { return sum(t, {2}) * sum(t, {2}); }},
      {"mean squared", [](const Tensor& t) { return mean(t, {0}) * mean(t, {0}); }},
      {"max(dim) squared", [](const Tensor& t) { return std::get<0>(max(t, 0)) * std::get<0>(max(t, 0)); }},
      {"max squared", [](const Tensor& t) { return t.max() * t.max(); }},
  };
  for (const auto& [name, fn] : reductions) {
    INFO("op: " << name);
    check_double_backward(fn, x);
  }
}

TEST_CASE("double backward of max(): the tied maxima's shares are differentiable in the gradient") {
  // d/dv of the gradient v / count at each tied maximum: 1 / count there, 0 elsewhere.
  Tensor x = float64_tensor({2, 7, 7, 1}, {4}).requires_grad_();
  Tensor v = scalar_tensor(3.0, kFloat64).requires_grad_();
  Tensor g = autograd::grad({x.max()}, {x}, {v}, std::nullopt, /*create_graph=*/true)[0];
  CHECK(g.to_vector<double>() == std::vector<double>{0, 1.5, 1.5, 0});
  (g * float64_tensor({1, 2, 4, 8}, {4})).sum().backward();
  CHECK(v.grad().item<double>() == 3.0);  // (2 + 4) / 2
}

// ---- more reductions: min, amax/amin, logsumexp, prod, var/std, norm, cumsum, any/all ----

namespace {

// The first minimum; a NaN anywhere wins (the first NaN), as for the maximum.
int64_t group_argmin(const std::vector<double>& v) {
  int64_t best = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    if (std::isnan(v[i])) return static_cast<int64_t>(i);
    if (v[i] < v[static_cast<size_t>(best)]) best = static_cast<int64_t>(i);
  }
  return best;
}
double group_min(const std::vector<double>& v) { return v[static_cast<size_t>(group_argmin(v))]; }
double group_prod(const std::vector<double>& v) {
  double p = 1.0;
  for (double x : v) p *= x;
  return p;
}
// log(sum(exp)) in long double: no overflow for the values the tests use.
double group_logsumexp(const std::vector<double>& v) {
  long double s = 0;
  for (double x : v) s += std::exp(static_cast<long double>(x));
  return static_cast<double>(std::log(s));
}
GroupFn group_var(double correction) {
  return [correction](const std::vector<double>& v) {
    const double m = group_mean(v);
    double s = 0.0;
    for (double x : v) s += (x - m) * (x - m);
    return s / std::max(0.0, static_cast<double>(v.size()) - correction);
  };
}
GroupFn group_norm(double p) {
  return [p](const std::vector<double>& v) {
    if (std::isinf(p)) {
      double best = p > 0 ? 0.0 : std::numeric_limits<double>::infinity();
      for (double x : v) best = p > 0 ? std::max(best, std::abs(x)) : std::min(best, std::abs(x));
      return best;
    }
    double s = 0.0;
    for (double x : v) s += p == 0.0 ? (x != 0.0 ? 1.0 : 0.0) : std::pow(std::abs(x), p);
    return p == 0.0 ? s : std::pow(s, 1.0 / p);
  };
}

// The running sum of x along dim, a loop over to_vector values.
Tensor reference_cumsum(const Tensor& x, int64_t dim) {
  const std::vector<double> values = x.to_vector<double>();
  std::vector<double> out(values.size());
  const Shape sizes = x.sizes();
  for (int64_t flat = 0; flat < static_cast<int64_t>(values.size()); ++flat) {
    Shape index = unravel(flat, sizes);
    const int64_t upto = index[static_cast<size_t>(dim)];
    double s = 0.0;
    for (int64_t k = 0; k <= upto; ++k) {
      index[static_cast<size_t>(dim)] = k;
      s += values[static_cast<size_t>(ravel(index, sizes))];
    }
    out[static_cast<size_t>(flat)] = s;
  }
  return float64_tensor(out, sizes);
}

// The views the value tests read x through: contiguous, transposed, a step slice.
std::vector<Tensor> layouts_of(const Tensor& base) {
  return {base, base.transpose(0, 2), base.slice(2, 1, base.size(2), 2)};
}

}  // namespace

TEST_CASE("max(dim) and min(dim) return (values, indices), as torch::max(x, dim)") {
  manual_seed(21);
  const GroupFn first_max = [](const std::vector<double>& v) { return static_cast<double>(group_argmax(v)); };
  const GroupFn first_min = [](const std::vector<double>& v) { return static_cast<double>(group_argmin(v)); };
  for (const Tensor& x : layouts_of(randn64({4, 3, 5}))) {
    for (int64_t dim = 0; dim < 3; ++dim) {
      for (bool keepdim : {false, true}) {
        CAPTURE(dim);
        CAPTURE(keepdim);
        const auto [max_values, max_indices] = max(x, dim, keepdim);
        const auto [min_values, min_indices] = x.min(dim, keepdim);
        CHECK_ALLCLOSE(max_values, reference_reduce(x, {dim}, keepdim, group_max), 0.0, 0.0);
        CHECK_ALLCLOSE(min_values, reference_reduce(x, {dim}, keepdim, group_min), 0.0, 0.0);
        CHECK(max_indices.dtype() == kInt64);
        CHECK(min_indices.dtype() == kInt64);
        CHECK(max_indices.to_vector<double>() == reference_reduce(x, {dim}, keepdim, first_max).to_vector<double>());
        CHECK(min_indices.to_vector<double>() == reference_reduce(x, {dim}, keepdim, first_min).to_vector<double>());
        CHECK(argmin(x, dim, keepdim).to_vector<int64_t>() == min_indices.to_vector<int64_t>());
        CHECK_ALLCLOSE(std::get<0>(x.max(dim, keepdim)), max_values, 0.0, 0.0);
      }
    }
    CHECK(min(x).item<double>() == group_min(x.to_vector<double>()));
  }
  // Ties: the first minimum; NaN wins, as for max; ints and bools keep their dtype.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor ties = float64_tensor({3, 1, 1, 2, nan, 0}, {2, 3});
  CHECK(argmin(ties, 1).to_vector<int64_t>() == std::vector<int64_t>{1, 1});
  CHECK(std::isnan(std::get<0>(min(ties, 1)).to_vector<double>()[1]));
  CHECK(std::isnan(min(ties).item<double>()));
  const Tensor ints = from_vector<int64_t>({4, -9, 4, 12}, {2, 2});
  CHECK(std::get<0>(min(ints, 1)).to_vector<int64_t>() == std::vector<int64_t>{-9, 4});
  CHECK(std::get<0>(min(ints, 1)).dtype() == kInt64);
  CHECK(min(ints).item<int64_t>() == -9);
  const Tensor flags = from_vector<bool>({true, false, true, true}, {2, 2});
  CHECK(std::get<1>(min(flags, 1)).to_vector<int64_t>() == std::vector<int64_t>{1, 0});
  CHECK(std::get<0>(max(flags, 0)).dtype() == kBool);
  // The indices carry no gradient; the values do.
  const Tensor leaf = randn64({3, 4}).requires_grad_();
  const auto [values, indices] = min(leaf, 1);
  CHECK(values.requires_grad());
  CHECK(!indices.requires_grad());
}

TEST_CASE("the gradient of min(dim) flows to the first minimum; min() splits it among ties") {
  Tensor x = float64_tensor({1, 3, 1, 5, 0, 0}, {2, 3}).requires_grad_();
  std::get<0>(min(x, 1)).sum().backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{1, 0, 0, 0, 1, 0});
  Tensor y = float64_tensor({2, -7, -7, 1}, {4}).requires_grad_();
  (min(y) * 3.0).backward();
  CHECK(y.grad().to_vector<double>() == std::vector<double>{0, 1.5, 1.5, 0});
}

TEST_CASE("amax and amin over any dims list match the reference") {
  manual_seed(22);
  const std::vector<Shape> dims_lists = {{0}, {1}, {2}, {0, 2}, {-1, 0}, {1, 2}, {}};
  for (const Tensor& x : layouts_of(randn64({4, 3, 5}))) {
    for (const Shape& dims : dims_lists) {
      for (bool keepdim : {false, true}) {
        INFO("dims " << shape_str(dims) << " keepdim " << keepdim);
        Shape wrapped;
        for (int64_t d : dims) wrapped.push_back(d < 0 ? d + 3 : d);
        CHECK_ALLCLOSE(amax(x, dims, keepdim), reference_reduce(x, wrapped, keepdim, group_max), 0.0, 0.0);
        CHECK_ALLCLOSE(x.amin(dims, keepdim), reference_reduce(x, wrapped, keepdim, group_min), 0.0, 0.0);
      }
    }
  }
  const Tensor x = randn64({2, 3});
  CHECK_ALLCLOSE(x.amax(1), amax(x, {1}), 0.0, 0.0);
  CHECK_ALLCLOSE(x.amin(-1, true), amin(x, {-1}, true), 0.0, 0.0);
  CHECK(amax(x).dim() == 0);
  CHECK(amax(x).item<double>() == max(x).item<double>());
  const Tensor ints = from_vector<int64_t>({4, -9, 4, 12, 3, 3}, {2, 3});
  CHECK(amin(ints, {0}).to_vector<int64_t>() == std::vector<int64_t>{4, -9, 3});
  CHECK(amax(ints, {}).item<int64_t>() == 12);
}

TEST_CASE("the gradient of amax / amin is split evenly among the ties of each group") {
  Tensor x = float64_tensor({2, 7, 7, 1, 5, 5, 5, 0}, {2, 4}).requires_grad_();
  amax(x, {1}).backward(float64_tensor({6, 3}, {2}));
  CHECK(x.grad().to_vector<double>() == std::vector<double>{0, 3, 3, 0, 1, 1, 1, 0});
  Tensor y = float64_tensor({2, 1, 1, 4, 1, 9}, {3, 2}).requires_grad_();
  amin(y, {0, 1}).backward();
  CHECK(y.grad().to_vector<double>() == std::vector<double>{0, 1.0 / 3, 1.0 / 3, 0, 1.0 / 3, 0});
}

TEST_CASE("logsumexp is stable: large values, -inf rows, empty groups") {
  manual_seed(23);
  for (const Tensor& x : layouts_of(randn64({4, 3, 5}))) {
    CHECK_ALLCLOSE(logsumexp(x, {1}), reference_reduce(x, {1}, false, group_logsumexp), 1e-12, 1e-12);
    CHECK_ALLCLOSE(logsumexp(x, {0, 2}, true), reference_reduce(x, {0, 2}, true, group_logsumexp), 1e-12, 1e-12);
    CHECK_ALLCLOSE(x.logsumexp(-1), reference_reduce(x, {2}, false, group_logsumexp), 1e-12, 1e-12);
  }
  // exp(1000) overflows; the shifted sum does not.
  const Tensor big = float64_tensor({1000, 1000, 999, -5}, {2, 2});
  CHECK_ALLCLOSE(logsumexp(big, {1}), float64_tensor({1000 + std::log(2.0), 999.0 + std::log1p(std::exp(-1004.0))},
                                                     {2}), 1e-12, 1e-12);
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor infinite = float64_tensor({-inf, -inf, inf, 1}, {2, 2});
  CHECK(logsumexp(infinite, {1}).to_vector<double>() == std::vector<double>{-inf, inf});
  CHECK(logsumexp(zeros({0, 3}, kFloat64), {0}).to_vector<double>() == std::vector<double>(3, -inf));
  CHECK(logsumexp(zeros({0, 3}, kFloat64), {1}).sizes() == Shape{0});
  const Tensor f32 = randn({3, 7});
  CHECK(logsumexp(f32, {1}).dtype() == kFloat32);
  CHECK_ALLCLOSE(logsumexp(f32, {1}), reference_reduce(f32, {1}, false, group_logsumexp).to(kFloat32), 1e-6, 1e-6);
  CHECK_THROWS_CONTAINING(logsumexp(from_vector<int64_t>({1, 2}, {2}), {0}),
                          "logsumexp: expected a floating-point tensor for argument 'self'");
}

TEST_CASE("prod over all elements and over a dim; integers give int64; empty gives 1") {
  manual_seed(24);
  for (const Tensor& x : layouts_of(randn64({4, 3, 5}))) {
    CHECK_ALLCLOSE(prod(x, 1), reference_reduce(x, {1}, false, group_prod), 1e-14, 1e-12);
    CHECK_ALLCLOSE(x.prod(-1, true), reference_reduce(x, {2}, true, group_prod), 1e-14, 1e-12);
    CHECK_ALLCLOSE(prod(x), reference_reduce(x, {}, false, group_prod), 1e-14, 1e-12);
  }
  const Tensor ints = from_vector<int64_t>({4, -9, 2, 3}, {2, 2});
  CHECK(prod(ints, 0).to_vector<int64_t>() == std::vector<int64_t>{8, -27});
  CHECK(prod(ints).item<int64_t>() == -216);
  CHECK(prod(ints).dtype() == kInt64);
  const Tensor flags = from_vector<bool>({true, false, true, true}, {2, 2});
  CHECK(prod(flags, 1).to_vector<int64_t>() == std::vector<int64_t>{0, 1});
  // int64 products wrap around, as sums do: 2^62 * 4 = 2^64 = 0.
  CHECK(prod(from_vector<int64_t>({int64_t{1} << 62, 4}, {2})).item<int64_t>() == 0);
  CHECK(prod(zeros({0, 3}, kFloat64)).item<double>() == 1.0);
  CHECK(prod(zeros({0, 3}, kFloat64), 0).to_vector<double>() == std::vector<double>(3, 1.0));
  CHECK(prod(scalar_tensor(2.5, kFloat64), 0).item<double>() == 2.5);
  const Tensor f32 = randn({3, 7});
  CHECK_ALLCLOSE(prod(f32, 1), reference_reduce(f32, {1}, false, group_prod).to(kFloat32), 1e-6, 1e-6);
}

TEST_CASE("the gradient of prod is the product of the others, with one zero and with several") {
  // Each row: no zero, one zero, two zeros, three zeros.
  const std::vector<double> values = {2, 3, -1, 0.5, 2, 0, 3, 4, 0, 5, 0, 2, 0, 0, 7, 0};
  Tensor x = float64_tensor(values, {4, 4}).requires_grad_();
  prod(x, 1).backward(float64_tensor({1, 10, 100, 1000}, {4}));
  std::vector<double> expected;
  for (size_t row = 0; row < 4; ++row)
    for (size_t i = 0; i < 4; ++i) {
      double others = 1.0;
      for (size_t j = 0; j < 4; ++j)
        if (j != i) others *= values[row * 4 + j];
      expected.push_back(others * std::pow(10.0, static_cast<double>(row)));
    }
  CHECK(x.grad().to_vector<double>() == expected);
  // Over all elements, one zero: only the zero gets a gradient.
  Tensor y = float64_tensor({2, 0, 3}, {3}).requires_grad_();
  prod(y).backward();
  CHECK(y.grad().to_vector<double>() == std::vector<double>{0, 6, 0});
  // The gradient and the gradient of the gradient, at inputs with zeros: a polynomial, so
  // finite differences across the zero are exact enough.
  for (const char* label : {"one zero", "two zeros", "three zeros"}) {
    INFO(label);
    std::vector<double> v = {1.5, -0.7, 0.9, 1.2, -1.1, 0.8};
    const std::string name = label;
    v[1] = 0;
    if (name != "one zero") v[4] = 0;
    if (name == "three zeros") v[5] = 0;
    Tensor z = float64_tensor(v, {2, 3}).requires_grad_();
    CHECK_GRADCHECK([](const tensor_list& t) { return prod(t[0]); }, tensor_list{z});
    CHECK_GRADCHECK([](const tensor_list& t) { return prod(t[0].t(), 1); }, tensor_list{z});
    CHECK_GRADGRADCHECK([](const tensor_list& t) { return prod(t[0]); }, tensor_list{z});
    Tensor w = float64_tensor(v, {6}).requires_grad_();
    CHECK_GRADGRADCHECK([](const tensor_list& t) { return prod(t[0], 0, true); }, tensor_list{w});
  }
}

TEST_CASE("var and std: the squared deviations over max(0, N - correction)") {
  manual_seed(25);
  for (const Tensor& x : layouts_of(randn64({4, 3, 5}))) {
    for (double correction : {0.0, 1.0, 2.0}) {
      CAPTURE(correction);
      CHECK_ALLCLOSE(var(x, {1}, correction), reference_reduce(x, {1}, false, group_var(correction)), 1e-12, 1e-12);
      CHECK_ALLCLOSE(var(x, {0, 2}, correction, true), reference_reduce(x, {0, 2}, true, group_var(correction)),
                     1e-12, 1e-12);
      CHECK_ALLCLOSE(minigrad::std(x, {-1}, correction), sqrt(reference_reduce(x, {2}, false, group_var(correction))),
                     1e-12, 1e-12);
    }
    CHECK_ALLCLOSE(var(x), reference_reduce(x, {}, false, group_var(1.0)), 1e-12, 1e-12);
    CHECK_ALLCLOSE(x.std(), sqrt(reference_reduce(x, {}, false, group_var(1.0))), 1e-12, 1e-12);
  }
  const Tensor x = randn64({3, 4});
  CHECK_ALLCLOSE(x.var(1), var(x, {1}), 0.0, 0.0);
  CHECK_ALLCLOSE(x.std(0, 0.0, true), minigrad::std(x, {0}, 0.0, true), 0.0, 0.0);
  CHECK_ALLCLOSE(x.var(), var(x), 0.0, 0.0);
  // One element and correction 1: 0 / 0. No elements: NaN as well.
  CHECK(std::isnan(var(randn64({1})).item<double>()));
  CHECK(std::isnan(var(zeros({0}, kFloat64)).item<double>()));
  CHECK_THROWS_CONTAINING(var(zeros({2}, kInt64)), "var: expected a floating-point tensor");
  CHECK_THROWS_CONTAINING(minigrad::std(zeros({2}, kInt64)), "std: expected a floating-point tensor");
}

TEST_CASE("norm for p = 2, 1, inf, -inf, 0 and general p; its gradient at 0 is 0") {
  manual_seed(26);
  const double inf = std::numeric_limits<double>::infinity();
  for (const Tensor& x : layouts_of(randn64({4, 3, 5}))) {
    for (double p : {2.0, 1.0, inf, -inf, 0.0, 3.0, 0.5, 1.5}) {
      CAPTURE(p);
      CHECK_ALLCLOSE(norm(x, p, {1}), reference_reduce(x, {1}, false, group_norm(p)), 1e-12, 1e-12);
      CHECK_ALLCLOSE(norm(x, p, {0, 2}, true), reference_reduce(x, {0, 2}, true, group_norm(p)), 1e-12, 1e-12);
      CHECK_ALLCLOSE(norm(x, p), reference_reduce(x, {}, false, group_norm(p)), 1e-12, 1e-12);
    }
  }
  const Tensor x = randn64({3, 4});
  CHECK_ALLCLOSE(x.norm(), norm(x), 0.0, 0.0);
  CHECK_ALLCLOSE(x.norm(1, 1), norm(x, 1, {1}), 0.0, 0.0);
  CHECK_ALLCLOSE(x.norm(3, {0}, true), norm(x, 3, {0}, true), 0.0, 0.0);
  // A row of zeros: the gradient there is 0, not 0 / 0; the other row's is x / norm.
  for (double p : {2.0, 3.0, 1.5}) {
    CAPTURE(p);
    Tensor z = float64_tensor({0, 0, 0, 3, -4, 0}, {2, 3}).requires_grad_();
    norm(z, p, {1}).sum().backward();
    const std::vector<double> g = z.grad().to_vector<double>();
    const double n = std::pow(std::pow(3.0, p) + std::pow(4.0, p), 1.0 / p);
    const std::vector<double> expected = {0, 0, 0, std::pow(3.0 / n, p - 1), -std::pow(4.0 / n, p - 1), 0};
    for (size_t i = 0; i < g.size(); ++i) CHECK(g[i] == doctest::Approx(expected[i]).epsilon(1e-12));
  }
  Tensor all_zero = zeros({4}, kFloat64).requires_grad_();
  norm(all_zero).backward();
  CHECK(all_zero.grad().to_vector<double>() == std::vector<double>(4, 0.0));
  CHECK_THROWS_CONTAINING(norm(zeros({2}, kInt64)), "norm: expected a floating-point tensor");
  CHECK_THROWS_CONTAINING(norm(zeros({0}, kFloat64), inf), "norm: cannot reduce over dim 0 of size 0");
  CHECK(norm(zeros({0}, kFloat64)).item<double>() == 0.0);
}

TEST_CASE("cumsum along each dim; integers give int64; empty and 0-d inputs") {
  manual_seed(27);
  for (const Tensor& x : layouts_of(randn64({4, 3, 5}))) {
    for (int64_t dim = 0; dim < 3; ++dim) {
      CAPTURE(dim);
      CHECK_ALLCLOSE(cumsum(x, dim), reference_cumsum(x, dim), 1e-12, 1e-12);
    }
    CHECK_ALLCLOSE(x.cumsum(-1), cumsum(x, 2), 0.0, 0.0);
  }
  const Tensor ints = from_vector<int64_t>({4, -9, 2, 3}, {2, 2});
  CHECK(cumsum(ints, 1).to_vector<int64_t>() == std::vector<int64_t>{4, -5, 2, 5});
  CHECK(cumsum(ints, 1).dtype() == kInt64);
  const Tensor flags = from_vector<bool>({true, false, true, true}, {4});
  CHECK(cumsum(flags, 0).to_vector<int64_t>() == std::vector<int64_t>{1, 1, 2, 3});
  const Tensor f32 = randn({3, 70});
  CHECK(cumsum(f32, 1).dtype() == kFloat32);
  CHECK_ALLCLOSE(cumsum(f32, 1), reference_cumsum(f32, 1).to(kFloat32), 1e-6, 1e-6);
  CHECK(cumsum(zeros({0, 3}, kFloat64), 0).sizes() == Shape{0, 3});
  CHECK(cumsum(scalar_tensor(2.5, kFloat64), 0).item<double>() == 2.5);
  CHECK_THROWS_CONTAINING(cumsum(ints, 2), "cumsum: dim 2 is out of range");
  // The gradient: the running sum of the output gradient from the other end.
  Tensor leaf = randn64({2, 4}).requires_grad_();
  cumsum(leaf, 1).backward(float64_tensor({1, 2, 3, 4, 10, 20, 30, 40}, {2, 4}));
  CHECK(leaf.grad().to_vector<double>() == std::vector<double>{10, 9, 7, 4, 100, 90, 70, 40});
}

TEST_CASE("any and all: bool out, any input dtype, NaN counts as true") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor x = float64_tensor({0, 0, 1.5, nan, 0, 2, 3, 4, 5}, {3, 3});
  CHECK(any(x).dtype() == kBool);
  CHECK(any(x).item<bool>());
  CHECK(!all(x).item<bool>());
  CHECK(any(x, 1).to_vector<bool>() == std::vector<bool>{true, true, true});
  CHECK(all(x, 1).to_vector<bool>() == std::vector<bool>{false, false, true});
  CHECK(all(x, 0, true).sizes() == Shape{1, 3});
  CHECK(all(x, 0, true).to_vector<bool>() == std::vector<bool>{false, false, true});
  CHECK(x.t().any(1).to_vector<bool>() == std::vector<bool>{true, true, true});
  CHECK(x.all(0).to_vector<bool>() == std::vector<bool>{false, false, true});
  const Tensor ints = from_vector<int64_t>({0, 0, 3, 0}, {2, 2});
  CHECK(any(ints, 1).to_vector<bool>() == std::vector<bool>{false, true});
  CHECK(!ints.all().item<bool>());
  const Tensor flags = from_vector<bool>({true, true, false, true}, {2, 2});
  CHECK(all(flags, 1).to_vector<bool>() == std::vector<bool>{true, false});
  CHECK(flags.any().item<bool>());
  const Tensor halves = x.to(kFloat16);
  CHECK(any(halves, 1).to_vector<bool>() == std::vector<bool>{true, true, true});
  CHECK(!any(zeros({0}, kFloat64)).item<bool>());
  CHECK(all(zeros({0}, kFloat64)).item<bool>());
  CHECK(!any(zeros({3}, kFloat64)).item<bool>());
}

TEST_CASE("empty inputs: amax of an empty dim is an error, as max's is; amax of no outputs is empty") {
  const Tensor empty_rows = zeros({0, 3}, kFloat64);
  CHECK_THROWS_CONTAINING(amax(empty_rows, {0}), "amax: cannot reduce over dim 0 of size 0");
  CHECK_THROWS_CONTAINING(amin(empty_rows), "amin: cannot reduce over dim 0 of size 0");
  CHECK_THROWS_CONTAINING(min(empty_rows), "min: the input 'self' is empty (shape [0, 3])");
  CHECK_THROWS_CONTAINING(std::get<0>(min(empty_rows, 0)), "min: cannot reduce over dim 0 of size 0");
  CHECK_THROWS_CONTAINING(argmin(empty_rows, 0), "argmin: cannot reduce over dim 0 of size 0");
  CHECK(amax(empty_rows, {1}).sizes() == Shape{0});
  CHECK_THROWS_CONTAINING(amax(randn64({2, 3}), {1, 1}), "amax: dim 1 appears more than once");
  CHECK_THROWS_CONTAINING(amin(randn64({2, 3}), {2}), "amin: dim 2 is out of range");
  CHECK_THROWS_CONTAINING(argmin(randn64({2, 3}), -3), "argmin: dim -3 is out of range");
}

TEST_CASE("gradcheck and gradgradcheck: min, amax, amin, logsumexp, prod, var, std, norm, cumsum") {
  manual_seed(28);
  const double inf = std::numeric_limits<double>::infinity();
  Tensor x = randn64({2, 3, 4}).requires_grad_();
  // Random normal values have no ties, and (almost surely) no zeros.
  const std::vector<std::pair<const char*, std::function<Tensor(const Tensor&)>>> reductions = {
      {"min", [](const Tensor& t) { return t.min(); }},
      {"min(dim)", [](const Tensor& t) { return std::get<0>(min(t, 1)); }},
      {"min(dim, keepdim) of a transpose",
       [](const Tensor& t) { return std::get<0>(min(t.transpose(0, 2), 0, true)); }},
      {"amax(dims)", [](const Tensor& t) { return amax(t, {0, 2}); }},
      {"amin(dim, keepdim)", [](const Tensor& t) { return t.amin(1, true); }},
      {"amax squared", [](const Tensor& t) { return amax(t, {-1}) * amax(t, {-1}); }},
      {"logsumexp", [](const Tensor& t) { return logsumexp(t, {1}); }},
      {"logsumexp(dims, keepdim) of a slice",
       [](const Tensor& t) { return logsumexp(t.slice(2, 0, 4, 2), {0, 2}, true); }},
      {"prod", [](const Tensor& t) { return prod(t); }},
      {"prod(dim)", [](const Tensor& t) { return prod(t, 2); }},
      {"prod(dim, keepdim) of a transpose", [](const Tensor& t) { return prod(t.transpose(0, 1), 0, true); }},
      {"var", [](const Tensor& t) { return var(t); }},
      {"var(dims, 0, keepdim)", [](const Tensor& t) { return var(t, {0, 2}, 0.0, true); }},
      {"std(dim)", [](const Tensor& t) { return t.std(1); }},
      {"norm", [](const Tensor& t) { return norm(t); }},
      {"norm(2, dim)", [](const Tensor& t) { return norm(t, 2, {1}); }},
      {"norm(1, dims)", [](const Tensor& t) { return norm(t, 1, {0, 2}); }},
      {"norm(inf, dim)", [inf](const Tensor& t) { return norm(t, inf, {2}); }},
      {"norm(-inf)", [inf](const Tensor& t) { return norm(t, -inf); }},
      {"norm(3, dim, keepdim)", [](const Tensor& t) { return norm(t, 3, {1}, true); }},
      {"norm(1.5) of a transpose", [](const Tensor& t) { return norm(t.transpose(0, 2), 1.5, {0}); }},
      {"cumsum(0)", [](const Tensor& t) { return cumsum(t, 0); }},
      {"cumsum(-1) of a transpose", [](const Tensor& t) { return cumsum(t.transpose(1, 2), -1); }},
      {"cumsum squared", [](const Tensor& t) { return cumsum(t, 1) * cumsum(t, 1); }},
  };
  for (const auto& [name, fn] : reductions) {
    INFO("op: " << name);
    CHECK_GRADCHECK([&fn](const tensor_list& t) { return fn(t[0]); }, tensor_list{x});
    check_double_backward(fn, x);
  }
}
