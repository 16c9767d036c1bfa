// Reductions on the GPU (cuda/reduce.cu) against the CPU kernels on the same values: sum,
// mean, max, argmax and sum_to over every layout the launcher tells apart (rows, columns,
// split among blocks, the copy for scattered dims), odd and empty sizes, every dtype;
// gradcheck and gradgradcheck in float64 on the GPU; backward on the GPU against the CPU's.
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "tests/cuda_test_support.h"
#include "tests/reference_indexing.h"

using namespace minigrad;
using namespace minigrad::test;

namespace {

struct ReduceCase {
  Shape sizes;
  Shape dims;
};

// Each reaches one path of the launcher (cuda/reduce.cu).
const std::vector<ReduceCase> kCases = {
    {{7, 1}, {1}},             // rows of 1: the reduced dim drops out
    {{5, 31}, {1}},            // rows shorter than a warp: one thread per row (column kernel)
    {{6, 33}, {-1}},           // a warp per row, a partial vector at the end
    {{9, 1000}, {1}},          // a warp per row, 32 elements per lane at most
    {{3, 4097}, {1}},          // a block per row, split among blocks
    {{2, 300001}, {1}},        // two long rows split among many blocks: a second pass
    {{1000, 33}, {0}},         // columns, 33 of them: no vectors
    {{4096, 256}, {0}},        // tall columns split among blocks: a second pass
    {{3, 70, 9}, {1}},         // [outer, reduced, inner]
    {{4, 5, 6}, {0, 2}},       // reduced dims scattered among kept ones: a contiguous copy first
    {{2, 3, 4, 5}, {0, 1}},    // leading dims merge into one column walk
    {{2, 3, 4, 5}, {-1, -2}},  // trailing dims merge into one row
    {{4, 5, 6}, {}},           // every dim
    {{1000003}, {}},           // a long full reduction: blocks of partials, then one block
    {{0, 4}, {0}},             // nothing to fold: sum 0, mean NaN
    {{0, 4}, {1}},             // no outputs
    {{}, {}},                  // 0-d
};

std::string case_name(const ReduceCase& c, bool keepdim) {
  return "sizes " + shape_str(c.sizes) + " dims " + shape_str(c.dims) + (keepdim ? " keepdim" : "");
}

// An input with no ties (random normal values), on the CPU.
Tensor random_input(const Shape& sizes, DType dtype) { return randn(sizes, kFloat64).to(dtype); }

// How far the CPU's and the GPU's sums of x may be apart, given the sums of |x| (magnitudes):
// the GPU adds in double; the CPU adds float32 in runs of 8 in float before double, within
// 8 float roundings of the largest sum of magnitudes (ops/reduce.cpp), float64 in double.
double sum_atol(const Tensor& magnitudes, DType dtype) {
  if (dtype != kFloat32 || magnitudes.numel() == 0) return 1e-9;
  return 8.0 * std::ldexp(1.0, -24) * max(magnitudes).item<double>();
}

}  // namespace

TEST_CASE("sum and mean on the GPU match the CPU in float64 and float32, every layout" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(100);
  for (const ReduceCase& c : kCases) {
    for (bool keepdim : {false, true}) {
      INFO(case_name(c, keepdim));
      for (DType dtype : {kFloat64, kFloat32}) {
        CAPTURE(dtype);
        const Tensor x = random_input(c.sizes, dtype);
        const Tensor on_gpu = x.to(kGpu);
        const Tensor s = sum(on_gpu, c.dims, keepdim);
        CHECK(s.device() == kGpu);
        CHECK(s.dtype() == dtype);
        const double atol = sum_atol(sum(abs(x), c.dims, keepdim), dtype);
        CHECK_ALLCLOSE(s, sum(x, c.dims, keepdim), 1e-6, atol);
        CHECK_ALLCLOSE(mean(on_gpu, c.dims, keepdim), mean(x, c.dims, keepdim), 1e-6, atol);
      }
    }
  }
}

TEST_CASE("sum and mean on the GPU: float16 and bfloat16 load natively and accumulate in float" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(101);
  for (const ReduceCase& c : kCases) {
    INFO(case_name(c, false));
    for (DType half : kHalfDTypes) {
      CAPTURE(half);
      const Tensor x = random_input(c.sizes, half);
      const Tensor s = sum(x.to(kGpu), c.dims);
      CHECK(s.dtype() == half);
      // The result is rounded once to 11 or 8 bits; the sums of up to 1e6 values reach ~1e3.
      CHECK_ALLCLOSE(s, sum(upcast(x), c.dims), 1e-2, 1e-2);
      CHECK_ALLCLOSE(mean(x.to(kGpu), c.dims, true), mean(upcast(x), c.dims, true), 1e-2, 1e-3);
    }
  }
}

TEST_CASE("sum on the GPU accumulates float32 in double, int64 and bool in int64" *
          doctest::skip(!cuda_is_available())) {
  // 2^24 + 1 == 2^24 in float32: a float32 accumulator would drop the ones.
  std::vector<float> values(5001, 1.0f);
  values[0] = 16777216.0f;
  const Tensor x = from_vector(values, {5001}).to(kGpu);
  CHECK(sum(x).item<double>() == 16777216.0 + 5000.0);
  CHECK(mean(x).item<float>() == static_cast<float>((16777216.0 + 5000.0) / 5001.0));

  const Tensor ints = from_vector<int64_t>({1, -2, 3, 4, 5, 6}, {2, 3}).to(kGpu);
  CHECK(sum(ints).dtype() == kInt64);
  CHECK(sum(ints).item<int64_t>() == 17);
  CHECK(sum(ints, {0}).to_vector<int64_t>() == std::vector<int64_t>{5, 3, 9});
  const Tensor big = full({3, 100000}, 3e9, kInt64);  // int64 sums past 2^53: exact
  CHECK(sum(big.to(kGpu), {1}).to_vector<int64_t>() == sum(big, {1}).to_vector<int64_t>());
  const Tensor flags = (randn({257, 65}) > 0.0);
  CHECK(sum(flags.to(kGpu)).item<int64_t>() == sum(flags).item<int64_t>());
  CHECK(sum(flags.to(kGpu), {0}).to_vector<int64_t>() == sum(flags, {0}).to_vector<int64_t>());
  CHECK(sum(flags.to(kGpu), {1}).to_vector<int64_t>() == sum(flags, {1}).to_vector<int64_t>());
}

TEST_CASE("reductions on the GPU read non-contiguous inputs through their strides" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(102);
  const Tensor base = randn({6, 5, 40}, kFloat64);
  const Tensor gpu_base = base.to(kGpu);
  // The same view of the CPU and of the GPU copy: same sizes, strides and values.
  const std::vector<std::function<Tensor(const Tensor&)>> views = {
      [](const Tensor& b) { return b.transpose(0, 2); },                              // [40, 5, 6]
      [](const Tensor& b) { return b.slice(2, 1, 40, 3); },                           // a step along the last dim
      [](const Tensor& b) { return b.permute({1, 2, 0}); },                           // [5, 40, 6]
      [](const Tensor& b) { return b.select(1, 2).unsqueeze(1).expand({6, 4, 40}); },  // stride 0 in the middle
      [](const Tensor& b) { return b.select(2, 7).unsqueeze(0).expand({3, 6, 5}); },   // stride 0 outermost
  };
  const std::vector<Shape> dims_lists = {{0}, {1}, {2}, {0, 2}, {1, 2}, {0, 1}, {}};
  for (const auto& view : views) {
    const Tensor x = view(base);
    const Tensor on_gpu = view(gpu_base);
    INFO("sizes " << shape_str(x.sizes()) << " strides " << shape_str(x.strides()));
    REQUIRE(!on_gpu.is_contiguous());
    REQUIRE(on_gpu.strides() == x.strides());
    for (const Shape& dims : dims_lists) {
      for (bool keepdim : {false, true}) {
        INFO("dims " << shape_str(dims) << " keepdim " << keepdim);
        CHECK_ALLCLOSE(sum(on_gpu, dims, keepdim), sum(x, dims, keepdim), 1e-10, 1e-10);
        CHECK_ALLCLOSE(mean(on_gpu, dims, keepdim), mean(x, dims, keepdim), 1e-10, 1e-10);
      }
    }
    for (int64_t dim = 0; dim < x.dim(); ++dim) {
      CAPTURE(dim);
      CHECK_ALLCLOSE(std::get<0>(max(on_gpu, dim)), std::get<0>(max(x, dim)), 0.0, 0.0);
      CHECK(argmax(on_gpu, dim, true).to_vector<int64_t>() == argmax(x, dim, true).to_vector<int64_t>());
    }
    CHECK(max(on_gpu).item<double>() == max(x).item<double>());
  }
}

TEST_CASE("max and argmax on the GPU pick the CPU's element in every dtype and layout" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(103);
  for (const ReduceCase& c : kCases) {
    if (c.dims.size() != 1 || shape_numel(c.sizes) == 0) continue;
    for (bool keepdim : {false, true}) {
      INFO(case_name(c, keepdim));
      for (DType dtype : {kFloat64, kFloat32, kFloat16, kBFloat16, kInt64}) {
        CAPTURE(dtype);
        // Integers from a narrow range: many ties, which the first index must win.
        const Tensor x = dtype == kInt64 ? (randn(c.sizes) * 3.0).to(kInt64) : random_input(c.sizes, dtype);
        const int64_t dim = c.dims[0];
        const Tensor values = std::get<0>(max(x.to(kGpu), dim, keepdim));
        CHECK(values.dtype() == dtype);
        CHECK_ALLCLOSE(values, std::get<0>(max(x, dim, keepdim)), 0.0, 0.0);
        CHECK(argmax(x.to(kGpu), dim, keepdim).to_vector<int64_t>() == argmax(x, dim, keepdim).to_vector<int64_t>());
      }
    }
  }
  const Tensor x = randn({3, 1000003});
  CHECK(max(x.to(kGpu)).item<double>() == max(x).item<double>());
  const Tensor flags = randn({40, 50}) > 1.5;
  CHECK(argmax(flags.to(kGpu), 1).to_vector<int64_t>() == argmax(flags, 1).to_vector<int64_t>());
}

TEST_CASE("max on the GPU: the first of equal maxima, and the first NaN, across threads and blocks" *
          doctest::skip(!cuda_is_available())) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  // One long row, split among blocks: the maxima sit in different blocks.
  std::vector<double> row(2000000, 0.0);
  row[1500000] = 1.0;
  row[700000] = 1.0;
  row[1900000] = 1.0;
  const Tensor long_row = from_vector(row, {1, 2000000}).to(kGpu);
  CHECK(argmax(long_row, 1).item<int64_t>() == 700000);
  row[1200000] = nan;
  row[1800000] = nan;
  const Tensor with_nan = from_vector(row, {1, 2000000}).to(kGpu);
  CHECK(argmax(with_nan, 1).item<int64_t>() == 1200000);
  CHECK(std::isnan(max(with_nan).item<double>()));

  // Columns: all equal, so every column's first row wins, split among blocks or not.
  for (int64_t rows : {3, 40, 5000}) {
    CAPTURE(rows);
    const Tensor equal = zeros({rows, 130}, kFloat32).to(kGpu);
    CHECK(argmax(equal, 0).to_vector<int64_t>() == std::vector<int64_t>(130, 0));
    CHECK(argmax(equal.t(), 1).to_vector<int64_t>() == std::vector<int64_t>(130, 0));
  }
  const Tensor minus_inf = full({5, 3000}, -inf, kFloat64).to(kGpu);
  CHECK(argmax(minus_inf, 1).to_vector<int64_t>() == std::vector<int64_t>(5, 0));
  CHECK(max(minus_inf).item<double>() == -inf);

  const Tensor small = from_vector<double>({1, nan, 3, nan, 0, 7, 5, 5, 2}, {3, 3}).to(kGpu);
  CHECK(argmax(small, 1).to_vector<int64_t>() == std::vector<int64_t>{1, 0, 0});
  CHECK(argmax(small, 0).to_vector<int64_t>() == std::vector<int64_t>{1, 0, 1});
}

TEST_CASE("empty and 0-d tensors on the GPU reduce as on the CPU" * doctest::skip(!cuda_is_available())) {
  const Tensor empty_rows = zeros({0, 3}, kFloat64).to(kGpu);
  CHECK(sum(empty_rows).item<double>() == 0.0);
  CHECK(sum(empty_rows, {0}).to_vector<double>() == std::vector<double>{0, 0, 0});
  CHECK(sum(empty_rows, {1}).sizes() == Shape{0});
  CHECK(std::isnan(mean(empty_rows).item<double>()));
  CHECK(sum(zeros({0}, kInt64).to(kGpu)).item<int64_t>() == 0);
  CHECK(std::get<0>(max(empty_rows, 1)).sizes() == Shape{0});
  CHECK(sum(empty_rows, {0}).device() == kGpu);
  CHECK_THROWS_CONTAINING(max(empty_rows), "max: the input 'self' is empty (shape [0, 3])");
  CHECK_THROWS_CONTAINING(std::get<0>(max(empty_rows, 0)), "max: cannot reduce over dim 0 of size 0");
  CHECK_THROWS_CONTAINING(argmax(empty_rows, 0), "argmax: cannot reduce over dim 0 of size 0");

  const Tensor s = scalar_tensor(2.5, kFloat64).to(kGpu);
  CHECK(sum(s).item<double>() == 2.5);
  CHECK(mean(s, {-1}, true).item<double>() == 2.5);
  CHECK(max(s).item<double>() == 2.5);
  CHECK(argmax(s, 0).item<int64_t>() == 0);
}

TEST_CASE("sum_to on the GPU: the backward of broadcasting" * doctest::skip(!cuda_is_available())) {
  manual_seed(104);
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{512, 1024}, {1024}},       // the add-with-broadcast backward: columns
      {{512, 1024}, {512, 1}},     // rows
      {{2, 3, 4}, {3, 1}},         // scattered: a copy first
      {{2, 3, 4}, {1, 1, 4}},
      {{2, 3, 4}, {}},
      {{2, 1, 4}, {1, 4}},
      {{64, 33, 7}, {33, 7}},
  };
  for (const auto& [from, to] : cases) {
    INFO(shape_str(from) << " -> " << shape_str(to));
    for (DType dtype : {kFloat64, kFloat32}) {
      const Tensor x = random_input(from, dtype);
      CHECK_ALLCLOSE(sum_to(x.to(kGpu), to), sum_to(x, to), 1e-6, sum_atol(sum_to(abs(x), to), dtype));
    }
    const Tensor h = random_input(from, kBFloat16);
    CHECK_ALLCLOSE(sum_to(h.to(kGpu), to), sum_to(upcast(h), to), 1e-2, 1e-2);
  }
  const Tensor x = randn({2, 3, 4}).to(kGpu);
  CHECK(sum_to(x, {2, 3, 4}).is_same(x));
}

TEST_CASE("gradcheck on the GPU: sum, mean, max and sum_to in float64" * doctest::skip(!cuda_is_available())) {
  manual_seed(105);
  const Tensor x = randn({3, 4, 5}, TensorOptions(kFloat64).device(kGpu)).requires_grad_();
  for (bool keepdim : {false, true}) {
    CAPTURE(keepdim);
    CHECK_GRADCHECK([&](const tensor_list& t) { return sum(t[0], {1}, keepdim); }, tensor_list{x});
    CHECK_GRADCHECK([&](const tensor_list& t) { return sum(t[0], {-1, 0}, keepdim); }, tensor_list{x});
    CHECK_GRADCHECK([&](const tensor_list& t) { return mean(t[0], {-2}, keepdim); }, tensor_list{x});
    CHECK_GRADCHECK([&](const tensor_list& t) { return mean(t[0], {}, keepdim); }, tensor_list{x});
    CHECK_GRADCHECK([&](const tensor_list& t) { return std::get<0>(max(t[0], -1, keepdim)); }, tensor_list{x});
    CHECK_GRADCHECK([&](const tensor_list& t) { return std::get<0>(max(t[0], 0, keepdim)); }, tensor_list{x});
    CHECK_GRADCHECK([&](const tensor_list& t) { return sum(t[0].transpose(0, 2), {0}, keepdim); }, tensor_list{x});
    CHECK_GRADCHECK([&](const tensor_list& t) { return std::get<0>(max(t[0].slice(2, 0, 5, 2), 1, keepdim)); },
                    tensor_list{x});
  }
  CHECK_GRADCHECK([](const tensor_list& t) { return t[0].max(); }, tensor_list{x});
  CHECK_GRADCHECK([](const tensor_list& t) { return t[0].transpose(1, 2).max(); }, tensor_list{x});
  CHECK_GRADCHECK([](const tensor_list& t) { return sum_to(t[0], {4, 1}); }, tensor_list{x});
  CHECK_GRADCHECK([](const tensor_list& t) { return sum_to(t[0], {5}); }, tensor_list{x});
}

TEST_CASE("backward on the GPU matches the CPU: sum, mean, max, broadcasting" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(106);
  const Tensor x = randn({8, 300}, kFloat64);
  const Tensor upstream_rows = randn({8}, kFloat64);
  const Tensor upstream_cols = randn({1, 300}, kFloat64);
  auto grads = [&](const Tensor& leaf_values, const std::function<Tensor(const Tensor&)>& f,
                   const Tensor& upstream) {
    const Tensor cpu_leaf = leaf_values.detach().requires_grad_();
    f(cpu_leaf).backward(upstream);
    const Tensor gpu = gpu_leaf(leaf_values);
    f(gpu).backward(upstream.to(kGpu));
    CHECK(gpu.grad().device() == kGpu);
    CHECK_ALLCLOSE(gpu.grad(), cpu_leaf.grad(), 1e-12, 1e-12);
  };
  grads(x, [](const Tensor& t) { return sum(t, {1}); }, upstream_rows);
  grads(x, [](const Tensor& t) { return mean(t, {0}, true); }, upstream_cols);
  grads(x, [](const Tensor& t) { return std::get<0>(max(t, 1)); }, upstream_rows);
  grads(x, [](const Tensor& t) { return std::get<0>(max(t, 0, true)); }, upstream_cols);
  grads(x, [](const Tensor& t) { return std::get<0>(t.transpose(0, 1).max(1)); }, randn({300}, kFloat64));

  // The broadcast operand of an add gets the gradient summed over the broadcast dim.
  const Tensor bias_values = randn({300}, kFloat64);
  const Tensor bias = gpu_leaf(bias_values);
  (x.to(kGpu) + bias).backward(ones({8, 300}, TensorOptions(kFloat64).device(kGpu)));
  CHECK(bias.grad().to_vector<double>() == std::vector<double>(300, 8.0));
}

TEST_CASE("int64 sums on the GPU wrap around on overflow, as on the CPU" * doctest::skip(!cuda_is_available())) {
  const int64_t big = std::numeric_limits<int64_t>::max();
  const int64_t small = std::numeric_limits<int64_t>::min();
  CHECK(sum(from_vector<int64_t>({big, 1}, {2}).to(kGpu)).item<int64_t>() == small);
  CHECK(sum(from_vector<int64_t>({big, big, -big, -big + 5}, {4}).to(kGpu)).item<int64_t>() == 5);
  // Many partial sums that overflow, across threads and blocks (a second pass): the same
  // bits as the CPU's wrapped total.
  const Tensor huge = full({4, 300001}, static_cast<double>(int64_t{1} << 61), kInt64);
  CHECK(sum(huge.to(kGpu)).item<int64_t>() == sum(huge).item<int64_t>());
  CHECK(sum(huge.to(kGpu), {1}).to_vector<int64_t>() == sum(huge, {1}).to_vector<int64_t>());
  CHECK(sum(huge.to(kGpu), {0}).to_vector<int64_t>() == sum(huge, {0}).to_vector<int64_t>());
}

TEST_CASE("max() on the GPU splits the gradient among tied maxima, NaN included" *
          doctest::skip(!cuda_is_available())) {
  const Tensor ties = gpu_leaf(from_vector<double>({2, 7, 7, 1, 7, 0}, {2, 3}));
  ties.max().backward();
  CHECK(ties.grad().device() == kGpu);
  const double third = 1.0 / 3.0;
  CHECK_ALLCLOSE(ties.grad(), from_vector<double>({0, third, third, 0, third, 0}, {2, 3}), 1e-15, 0.0);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor with_nan = gpu_leaf(from_vector<double>({1, nan, 3, nan}, {4}));
  with_nan.max().backward();
  CHECK(with_nan.grad().to_vector<double>() == std::vector<double>{0, 0.5, 0, 0.5});
  // max(dim) keeps the first maximum's index.
  const Tensor rows = gpu_leaf(from_vector<double>({2, 7, 7, 1, 7, 0}, {2, 3}));
  std::get<0>(max(rows, 1)).sum().backward();
  CHECK(rows.grad().to_vector<double>() == std::vector<double>{0, 1, 0, 0, 1, 0});
}

TEST_CASE("double backward on the GPU: sum, mean, max(dim) and max(), gradgradcheck in float64" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(107);
  const TensorOptions gpu = TensorOptions(kFloat64).device(kGpu);
  const Tensor x = randn({3, 4, 5}, gpu).requires_grad_();
  const std::vector<std::function<Tensor(const Tensor&)>> reductions = {
      [](const Tensor& t) { return sum(t, {1}) * sum(t, {1}); },
      [](const Tensor& t) { return mean(t, {0, 2}, true) * mean(t, {0, 2}, true); },
      [](const Tensor& t) { return std::get<0>(max(t, -1)) * std::get<0>(max(t, -1)); },
      [](const Tensor& t) { return std::get<0>(max(t, 0, true)) * std::get<0>(max(t, 0, true)); },
      [](const Tensor& t) { return t.max() * t.max(); },
  };
  for (size_t i = 0; i < reductions.size(); ++i) {
    CAPTURE(i);
    const auto& fn = reductions[i];
    const Tensor v = randn(fn(x.detach()).sizes(), gpu).requires_grad_();
    const Tensor g = autograd::grad({fn(x)}, {x}, {v}, std::nullopt, /*create_graph=*/true)[0];
    CHECK(g.device() == kGpu);
    CHECK(g.requires_grad());
    CHECK_GRADGRADCHECK_OPTS([&fn](const tensor_list& t) { return fn(t[0]); }, tensor_list{x}, tensor_list{v},
                             GradcheckOptions{});
  }
}
