// The reductions beyond sum, mean and max on the GPU, against the CPU on the same values:
// min / argmin and amax / amin (the max kernels looking for the other extremum, over any
// dims), prod (its own kernels), cumsum (a per-line scan), and the composites logsumexp,
// var, std, norm, any and all; every layout the reduction launcher tells apart (rows,
// columns, split among blocks, the copy for scattered dims), non-contiguous inputs, empty
// and 0-d ones; gradcheck and gradgradcheck in float64 on the GPU.
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "tests/cuda_test_support.h"

using namespace minigrad;
using namespace minigrad::test;

namespace {

struct ReduceCase {
  Shape sizes;
  Shape dims;
};

// Each reaches one path of the launcher (cuda/reduce.cu), as in test_cuda_reduce.cpp.
const std::vector<ReduceCase> kCases = {
    {{5, 31}, {1}},           // rows shorter than a warp: one thread per row
    {{9, 1000}, {1}},         // a warp per row
    {{3, 4097}, {1}},         // a block per row, split among blocks
    {{2, 300001}, {1}},       // long rows: a second pass over the partials
    {{1000, 33}, {0}},        // columns
    {{4096, 256}, {0}},       // tall columns split among blocks
    {{3, 70, 9}, {1}},        // [outer, reduced, inner]
    {{4, 5, 6}, {0, 2}},      // scattered reduced dims: a contiguous copy first
    {{2, 3, 4, 5}, {-1, -2}}, // trailing dims merge into one row
    {{4, 5, 6}, {}},          // every dim
    {{0, 4}, {1}},            // no outputs
    {{}, {}},                 // 0-d
};

std::string case_name(const ReduceCase& c, bool keepdim) {
  return "sizes " + shape_str(c.sizes) + " dims " + shape_str(c.dims) + (keepdim ? " keepdim" : "");
}

// No ties (random normal values) for the floating types; a narrow range of integers, many
// ties, which the first index must win.
Tensor random_input(const Shape& sizes, DType dtype) {
  if (dtype == kInt64) return (randn(sizes) * 3.0).to(kInt64);
  if (dtype == kBool) return randn(sizes) > 0.5;
  return randn(sizes, kFloat64).to(dtype);
}

}  // namespace

TEST_CASE("min, argmin, amax and amin on the GPU pick the CPU's element in every dtype and layout" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(201);
  for (const ReduceCase& c : kCases) {
    for (bool keepdim : {false, true}) {
      INFO(case_name(c, keepdim));
      for (DType dtype : {kFloat64, kFloat32, kFloat16, kBFloat16, kInt64, kBool}) {
        CAPTURE(dtype);
        const Tensor x = random_input(c.sizes, dtype);
        const Tensor on_gpu = x.to(kGpu);
        if (shape_numel(c.sizes) > 0 || !c.dims.empty()) {
          CHECK_ALLCLOSE(amax(on_gpu, c.dims, keepdim), amax(x, c.dims, keepdim), 0.0, 0.0);
          CHECK_ALLCLOSE(amin(on_gpu, c.dims, keepdim), amin(x, c.dims, keepdim), 0.0, 0.0);
          CHECK(amin(on_gpu, c.dims, keepdim).dtype() == dtype);
        }
        if (c.dims.size() != 1 || shape_numel(c.sizes) == 0) continue;
        const int64_t dim = c.dims[0];
        const auto [values, indices] = min(on_gpu, dim, keepdim);
        CHECK(values.device() == kGpu);
        CHECK_ALLCLOSE(values, std::get<0>(min(x, dim, keepdim)), 0.0, 0.0);
        CHECK(indices.to_vector<int64_t>() == std::get<1>(min(x, dim, keepdim)).to_vector<int64_t>());
        CHECK(argmin(on_gpu, dim, keepdim).to_vector<int64_t>() == argmin(x, dim, keepdim).to_vector<int64_t>());
      }
    }
  }
  const Tensor x = randn({3, 1000003});
  CHECK(min(x.to(kGpu)).item<double>() == min(x).item<double>());
  // A NaN minimum, the first of equal minima across blocks.
  std::vector<double> row(2000000, 1.0);
  row[1500000] = -1.0;
  row[700000] = -1.0;
  CHECK(argmin(from_vector(row, {1, 2000000}).to(kGpu), 1).item<int64_t>() == 700000);
  row[1200000] = std::numeric_limits<double>::quiet_NaN();
  const Tensor with_nan = from_vector(row, {1, 2000000}).to(kGpu);
  CHECK(argmin(with_nan, 1).item<int64_t>() == 1200000);
  CHECK(std::isnan(min(with_nan).item<double>()));
  CHECK(min(full({5, 3000}, std::numeric_limits<double>::infinity(), kFloat64).to(kGpu)).item<double>() ==
        std::numeric_limits<double>::infinity());
}

TEST_CASE("prod on the GPU matches the CPU in every dtype and layout; empty gives 1" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(202);
  for (const ReduceCase& c : kCases) {
    for (bool keepdim : {false, true}) {
      INFO(case_name(c, keepdim));
      // Near 1, so that long products neither overflow nor vanish.
      const Tensor x = add(mul(randn(c.sizes, kFloat64), 0.01), 1.0);
      const Tensor all_dims = prod(x.to(kGpu));
      CHECK_ALLCLOSE(all_dims, prod(x), 1e-10, 0.0);
      if (c.dims.size() != 1) continue;
      const int64_t dim = c.dims[0];
      CHECK_ALLCLOSE(prod(x.to(kGpu), dim, keepdim), prod(x, dim, keepdim), 1e-10, 0.0);
      // float32 accumulates in double on both; float16/bfloat16 in float on the GPU.
      const Tensor f32 = x.to(kFloat32);
      CHECK_ALLCLOSE(prod(f32.to(kGpu), dim, keepdim), prod(f32, dim, keepdim), 1e-6, 0.0);
      const Tensor h = x.to(kBFloat16);
      CHECK_ALLCLOSE(prod(h.to(kGpu), dim, keepdim), prod(upcast(h), dim, keepdim), 2e-2, 0.0);
      // Integers: -1, 1 and a few 2s, exact (and wrapping around the same way).
      const Tensor r = randn(c.sizes, kFloat64);
      const Tensor ints = add(sub(mul(gt(r, 0.0).to(kFloat64), 2.0), 1.0), gt(r, 2.5).to(kFloat64)).to(kInt64);
      CHECK(prod(ints.to(kGpu), dim, keepdim).to_vector<int64_t>() == prod(ints, dim, keepdim).to_vector<int64_t>());
      const Tensor flags = randn(c.sizes) > -1.5;
      CHECK(prod(flags.to(kGpu), dim, keepdim).to_vector<int64_t>() == prod(flags, dim, keepdim).to_vector<int64_t>());
    }
  }
  CHECK(prod(zeros({0, 3}, kFloat64).to(kGpu)).item<double>() == 1.0);
  CHECK(prod(zeros({0, 3}, kFloat64).to(kGpu), 0).to_vector<double>() == std::vector<double>(3, 1.0));
  CHECK(prod(from_vector<int64_t>({int64_t{1} << 62, 4}, {2}).to(kGpu)).item<int64_t>() == 0);
  // Non-contiguous inputs.
  const Tensor base = add(mul(randn({6, 5, 40}, kFloat64), 0.1), 1.0);
  const Tensor gpu_base = base.to(kGpu);
  CHECK_ALLCLOSE(prod(gpu_base.transpose(0, 2), 1), prod(base.transpose(0, 2), 1), 1e-12, 0.0);
  CHECK_ALLCLOSE(prod(gpu_base.slice(2, 1, 40, 3), 2, true), prod(base.slice(2, 1, 40, 3), 2, true), 1e-12, 0.0);
}

TEST_CASE("cumsum on the GPU matches the CPU along every dim, every dtype, non-contiguous inputs" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(203);
  const std::vector<Shape> shapes = {{5, 1000}, {1000, 7}, {3, 70, 9}, {1, 1}, {0, 4}, {}};
  for (const Shape& sizes : shapes) {
    for (int64_t dim = 0; dim < std::max<int64_t>(1, static_cast<int64_t>(sizes.size())); ++dim) {
      INFO("sizes " << shape_str(sizes) << " dim " << dim);
      // float64 and float32 add in double on both, in the same order: the same bits.
      for (DType dtype : {kFloat64, kFloat32}) {
        const Tensor x = random_input(sizes, dtype);
        const Tensor on_gpu = cumsum(x.to(kGpu), dim);
        CHECK(on_gpu.dtype() == dtype);
        CHECK_ALLCLOSE(on_gpu, cumsum(x, dim), 0.0, 0.0);
      }
      for (DType dtype : {kInt64, kBool}) {
        const Tensor x = random_input(sizes, dtype);
        CHECK(cumsum(x.to(kGpu), dim).dtype() == kInt64);
        CHECK(cumsum(x.to(kGpu), dim).to_vector<int64_t>() == cumsum(x, dim).to_vector<int64_t>());
      }
      const Tensor h = random_input(sizes, kFloat16);
      CHECK_ALLCLOSE(cumsum(h.to(kGpu), dim), cumsum(upcast(h), dim), 2e-3, 2e-2);
    }
  }
  const Tensor base = randn({6, 5, 40}, kFloat64);
  const Tensor gpu_base = base.to(kGpu);
  for (int64_t dim = 0; dim < 3; ++dim) {
    CAPTURE(dim);
    CHECK_ALLCLOSE(cumsum(gpu_base.transpose(0, 2), dim), cumsum(base.transpose(0, 2), dim), 0.0, 0.0);
    CHECK_ALLCLOSE(cumsum(gpu_base.slice(2, 1, 40, 3), dim), cumsum(base.slice(2, 1, 40, 3), dim), 0.0, 0.0);
  }
}

TEST_CASE("logsumexp, var, std, norm, any and all on the GPU match the CPU" * doctest::skip(!cuda_is_available())) {
  manual_seed(204);
  const double inf = std::numeric_limits<double>::infinity();
  for (const ReduceCase& c : kCases) {
    if (shape_numel(c.sizes) == 0) continue;
    for (bool keepdim : {false, true}) {
      INFO(case_name(c, keepdim));
      const Tensor x = random_input(c.sizes, kFloat64);
      const Tensor g = x.to(kGpu);
      CHECK_ALLCLOSE(logsumexp(g, c.dims, keepdim), logsumexp(x, c.dims, keepdim), 1e-10, 1e-12);
      CHECK_ALLCLOSE(var(g, c.dims, 1.0, keepdim), var(x, c.dims, 1.0, keepdim), 1e-10, 1e-12);
      CHECK_ALLCLOSE(minigrad::std(g, c.dims, 0.0, keepdim), minigrad::std(x, c.dims, 0.0, keepdim), 1e-10, 1e-12);
      for (double p : {2.0, 1.0, inf, -inf, 0.0, 3.0}) {
        CAPTURE(p);
        CHECK_ALLCLOSE(norm(g, p, c.dims, keepdim), norm(x, p, c.dims, keepdim), 1e-10, 1e-12);
      }
      if (c.dims.size() == 1) {
        const Tensor flags = random_input(c.sizes, kBool);
        CHECK(any(flags.to(kGpu), c.dims[0], keepdim).to_vector<bool>() == any(flags, c.dims[0], keepdim).to_vector<bool>());
        CHECK(all(flags.to(kGpu), c.dims[0], keepdim).to_vector<bool>() == all(flags, c.dims[0], keepdim).to_vector<bool>());
      }
    }
  }
  const Tensor rows = from_vector<double>({-inf, -inf, inf, 1, 1000, 1000}, {3, 2}).to(kGpu);
  const std::vector<double> stable = logsumexp(rows, {1}).to_vector<double>();
  CHECK(stable[0] == -inf);
  CHECK(stable[1] == inf);
  CHECK(stable[2] == doctest::Approx(1000 + std::log(2.0)).epsilon(1e-15));
  CHECK(any(zeros({3, 0}).to(kGpu), 1).to_vector<bool>() == std::vector<bool>(3, false));
  CHECK(all(zeros({3, 0}).to(kGpu), 1).to_vector<bool>() == std::vector<bool>(3, true));
  CHECK(any(from_vector<double>({0, std::nan("")}, {2}).to(kGpu)).item<bool>());
}

TEST_CASE("gradcheck and gradgradcheck on the GPU in float64: the more reductions" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(205);
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor x = randn({3, 4, 5}, TensorOptions(kFloat64).device(kGpu)).requires_grad_();
  const std::vector<std::pair<const char*, std::function<Tensor(const Tensor&)>>> reductions = {
      {"min", [](const Tensor& t) { return t.min(); }},
      {"min(dim)", [](const Tensor& t) { return std::get<0>(min(t, 1)); }},
      {"amax(dims, keepdim)", [](const Tensor& t) { return amax(t, {0, 2}, true); }},
      {"amin(dim) of a transpose", [](const Tensor& t) { return amin(t.transpose(0, 2), {1}); }},
      {"logsumexp", [](const Tensor& t) { return logsumexp(t, {-1}); }},
      {"prod", [](const Tensor& t) { return prod(t); }},
      {"prod(dim, keepdim)", [](const Tensor& t) { return prod(t, 1, true); }},
      {"var(dims)", [](const Tensor& t) { return var(t, {0, 2}); }},
      {"std", [](const Tensor& t) { return minigrad::std(t); }},
      {"norm", [](const Tensor& t) { return norm(t); }},
      {"norm(inf, dim)", [inf](const Tensor& t) { return norm(t, inf, {1}); }},
      {"norm(3, dim)", [](const Tensor& t) { return norm(t, 3, {2}); }},
      {"cumsum", [](const Tensor& t) { return cumsum(t, 1); }},
      {"cumsum squared of a transpose", [](const Tensor& t) {
         const Tensor c = cumsum(t.transpose(0, 2), 0);
         return c * c;
       }},
  };
  for (const auto& [name, fn] : reductions) {
    INFO("op: " << name);
    CHECK_GRADCHECK([&fn](const tensor_list& t) { return fn(t[0]); }, tensor_list{x});
    CHECK_GRADGRADCHECK([&fn](const tensor_list& t) { return fn(t[0]); }, tensor_list{x});
  }
  // prod with one zero and with two in a row: the gradient and its gradient.
  Tensor zs = from_vector<double>({1.5, 0, 0.9, 1.2, 0, 0.8, -0.5, 2, 0, 0, 0, 1.1}, {3, 4}).to(kGpu).requires_grad_();
  CHECK_GRADCHECK([](const tensor_list& t) { return prod(t[0], 1); }, tensor_list{zs});
  CHECK_GRADGRADCHECK([](const tensor_list& t) { return prod(t[0], 1); }, tensor_list{zs});
  // norm's gradient at a zero row is 0 on the GPU too.
  Tensor zero_row = from_vector<double>({0, 0, 3, 4}, {2, 2}).to(kGpu).requires_grad_();
  norm(zero_row, 2, {1}).sum().backward();
  CHECK_ALLCLOSE(zero_row.grad(), from_vector<double>({0, 0, 0.6, 0.8}, {2, 2}), 1e-15, 0.0);
}
