// layer_norm, rms_norm and layer_norm_gelu on the GPU (cuda/normalization.cu) against the
// CPU on the same values: values and the gradients of x, weight and bias, for row lengths
// that take every kernel (a warp per row, a block per row, the long-row loop; the scalar
// loop for odd lengths and unaligned rows), many rows for the backward's blocks that loop
// over rows, every floating dtype; dweight and dbias bitwise equal across runs; gradcheck
// in float64 on the GPU.
#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tests/cuda_test_support.h"
#include "tests/normalization_test_ops.h"

using namespace minigrad;
using namespace minigrad::test;

namespace {

// The fused op over the last dim of x.
Tensor apply(NormOp op, const Tensor& x, int64_t hidden, const std::optional<Tensor>& w,
             const std::optional<Tensor>& b) {
  return fused(op, x, {hidden}, w, b);
}

// The output and the gradients of x, weight and bias (undefined where absent), all on the CPU.
struct Result {
  Tensor y, grad_x, grad_weight, grad_bias;
};

// Runs op on copies of the CPU values x, w, b moved to `device` in `dtype`, with the
// upstream gradient `upstream`; `affine` false leaves weight and bias out.
Result run(NormOp op, const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& upstream, Device device,
           DType dtype, bool affine = true) {
  const int64_t hidden = x.size(-1);
  const Tensor xd = x.to(dtype).to(device).detach().requires_grad_();
  std::optional<Tensor> wd, bd;
  if (affine) wd = w.to(dtype).to(device).detach().requires_grad_();
  if (affine && has_bias(op)) bd = b.to(dtype).to(device).detach().requires_grad_();
  const Tensor y = apply(op, xd, hidden, wd, bd);
  CHECK(y.device() == device);
  CHECK(y.dtype() == dtype);
  (y * upstream.to(dtype).to(device)).sum().backward();
  auto on_cpu = [](const Tensor& t) { return t.defined() ? t.to(kCPU) : Tensor(); };
  return {y.to(kCPU), xd.grad().to(kCPU), wd ? on_cpu(wd->grad()) : Tensor(), bd ? on_cpu(bd->grad()) : Tensor()};
}

bool all_finite(const Tensor& t) {
  for (double v : t.to_vector<double>())
    if (!std::isfinite(v)) return false;
  return true;
}

// Compares every element (an element a kernel left unwritten is garbage or NaN, and fails).
void check_close(const Result& actual, const Result& expected, double rtol, double atol) {
  const std::vector<std::pair<Tensor, Tensor>> pairs = {{actual.y, expected.y},
                                                        {actual.grad_x, expected.grad_x},
                                                        {actual.grad_weight, expected.grad_weight},
                                                        {actual.grad_bias, expected.grad_bias}};
  for (size_t i = 0; i < pairs.size(); ++i) {
    CAPTURE(i);  // 0: y, 1: dx, 2: dweight, 3: dbias
    const auto& [a, e] = pairs[i];
    REQUIRE(a.defined() == e.defined());
    if (!a.defined()) continue;
    CHECK(all_finite(a));
    CHECK_ALLCLOSE(a.to(kFloat64), e.to(kFloat64), rtol, atol);
  }
}

// Row lengths for every kernel: a warp per row up to 1024 (1, 7 and 1025 odd: the scalar
// loop), a block per row up to 8192, the long-row loop beyond: its forward staged in shared
// memory where two rows fit an SM (12000 in every dtype, 20000 in all but float64), else
// reading the row three times (20000 in float64, 65536 in every dtype); 65536 the largest.
const std::vector<int64_t> kRowLengths = {1, 7, 32, 100, 1024, 1025, 4096, 8192, 8193, 12000, 20000, 65536};

Tensor sample_input(const Shape& shape) { return randn(shape, kFloat64) * 2.0 + 3.0; }
Tensor sample_affine(int64_t n) { return randn({n}, kFloat64) * 0.5 + 1.0; }

}  // namespace

TEST_CASE("normalizations on the GPU match the CPU for every row length, float64 and float32" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(400);
  for (int64_t n : kRowLengths) {
    CAPTURE(n);
    const int64_t rows = n >= 8192 ? 2 : 5;
    const Tensor x = sample_input({rows, n});
    const Tensor w = sample_affine(n), b = sample_affine(n) - 1.0;
    const Tensor upstream = randn({rows, n}, kFloat64);
    for (NormOp op : kNormOps) {
      CAPTURE(op_name(op));
      for (bool affine : {true, false}) {
        CAPTURE(affine);
        const Result cpu = run(op, x, w, b, upstream, kCPU, kFloat64, affine);
        check_close(run(op, x, w, b, upstream, kGpu, kFloat64, affine), cpu, 1e-9, 1e-9);
        check_close(run(op, x, w, b, upstream, kGpu, kFloat32, affine), cpu, 1e-3, 1e-3);
      }
    }
  }
}

TEST_CASE("normalizations on the GPU: float16 and bfloat16 against float64" * doctest::skip(!cuda_is_available())) {
  manual_seed(401);
  for (int64_t n : kRowLengths) {
    CAPTURE(n);
    const int64_t rows = n >= 8192 ? 2 : 4;
    for (DType half : kHalfDTypes) {
      CAPTURE(half);
      // float64 on the values rounded to the half type, so only the computation differs.
      const Tensor x = sample_input({rows, n}).to(half).to(kFloat64);
      const Tensor w = sample_affine(n).to(half).to(kFloat64), b = (sample_affine(n) - 1.0).to(half).to(kFloat64);
      const Tensor upstream = randn({rows, n}, kFloat64).to(half).to(kFloat64);
      const double tol = half == kBFloat16 ? 3e-2 : 5e-3;
      for (NormOp op : kNormOps) {
        CAPTURE(op_name(op));
        const Result expected = run(op, x, w, b, upstream, kCPU, kFloat64);
        const Result actual = run(op, x, w, b, upstream, kGpu, half);
        // dweight and dbias sum `rows` terms of size ~1: their absolute error grows with it.
        check_close(actual, expected, tol, tol * static_cast<double>(rows));
      }
    }
  }
}

TEST_CASE("normalizations on the GPU: many rows (blocks that loop over rows), dweight/dbias the same bits every run" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(402);
  for (const Shape& shape : {Shape{3000, 256}, Shape{3000, 100}, Shape{3001, 33}, Shape{300, 10000}}) {
    CAPTURE(shape_str(shape));
    const int64_t n = shape[1];
    const Tensor x = sample_input(shape);
    const Tensor w = sample_affine(n), b = sample_affine(n) - 1.0;
    const Tensor upstream = randn(shape, kFloat64);
    for (NormOp op : kNormOps) {
      CAPTURE(op_name(op));
      const Result cpu = run(op, x, w, b, upstream, kCPU, kFloat64);
      const Result first = run(op, x, w, b, upstream, kGpu, kFloat32);
      const Result second = run(op, x, w, b, upstream, kGpu, kFloat32);
      // 3000 rows summed in float: relative 1e-3 of terms of size ~1.
      check_close(first, cpu, 1e-3, 2e-2);
      CHECK(same_bits(first.grad_weight, second.grad_weight));
      if (has_bias(op)) CHECK(same_bits(first.grad_bias, second.grad_bias));
      CHECK(same_bits(first.grad_x, second.grad_x));
      check_close(run(op, x, w, b, upstream, kGpu, kBFloat16), cpu, 3e-2, 1.0);
    }
  }
}

TEST_CASE("normalizations on the GPU: unaligned and strided inputs" * doctest::skip(!cuda_is_available())) {
  manual_seed(403);
  const int64_t rows = 6, n = 64;
  for (NormOp op : kNormOps) {
    CAPTURE(op_name(op));
    const Tensor base = sample_input({rows * n + 1});
    const Tensor w = sample_affine(n), b = sample_affine(n) - 1.0;
    const std::optional<Tensor> bias = has_bias(op) ? std::optional<Tensor>(b) : std::nullopt;
    const std::optional<Tensor> gpu_bias = bias ? std::optional<Tensor>(bias->to(kGpu)) : std::nullopt;
    // Views made on the GPU (a copy to the GPU would be aligned and contiguous again).
    const Tensor gpu_base = base.to(kGpu);
    // One element in: contiguous rows whose pointer is not 16-byte aligned (the scalar loop).
    const std::vector<std::function<Tensor(const Tensor&)>> views = {
        [&](const Tensor& t) { return t.slice(0, 1, rows * n + 1).reshape({rows, n}); },
        // Rows strided by `rows` (made contiguous by the op).
        [&](const Tensor& t) { return t.slice(0, 0, rows * n).reshape({n, rows}).transpose(0, 1); }};
    for (const auto& view : views) {
      const Tensor y = apply(op, view(gpu_base), n, w.to(kGpu), gpu_bias);
      CHECK(all_finite(y.to(kCPU)));
      CHECK_ALLCLOSE(y.to(kCPU), apply(op, view(base), n, w, bias), 1e-10, 1e-10);
    }
  }
}

TEST_CASE("gradcheck: the normalizations on the GPU" * doctest::skip(!cuda_is_available())) {
  manual_seed(404);
  for (NormOp op : kNormOps) {
    CAPTURE(op_name(op));
    for (int64_t n : {1, 6, 9}) {
      CAPTURE(n);
      const Tensor x = sample_input({3, n}).to(kGpu).requires_grad_();
      const Tensor w = sample_affine(n).to(kGpu).requires_grad_();
      const Tensor b = sample_affine(n).to(kGpu).requires_grad_();
      const auto fn = [op, n](const tensor_list& t) {
        return apply(op, t[0], n, t[1], t.size() > 2 ? std::optional<Tensor>(t[2]) : std::nullopt);
      };
      const tensor_list inputs = has_bias(op) ? tensor_list{x, w, b} : tensor_list{x, w};
      CHECK_GRADCHECK(fn, inputs);
    }
  }
}

TEST_CASE("normalizations on the GPU: empty inputs" * doctest::skip(!cuda_is_available())) {
  for (NormOp op : kNormOps) {
    CAPTURE(op_name(op));
    const Tensor x = zeros({0, 8}, TensorOptions(kFloat32).device(kGpu)).requires_grad_();
    const Tensor w = ones({8}, TensorOptions(kFloat32).device(kGpu)).requires_grad_();
    const Tensor b = ones({8}, TensorOptions(kFloat32).device(kGpu)).requires_grad_();
    const Tensor y = apply(op, x, 8, w, has_bias(op) ? std::optional<Tensor>(b) : std::nullopt);
    CHECK(y.sizes() == Shape{0, 8});
    y.sum().backward();
    CHECK(same_bits(w.grad().to(kCPU), zeros({8})));
  }
}
