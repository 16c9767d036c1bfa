// softmax and log_softmax on the GPU (cuda/softmax.cu) against the CPU kernel on the same
// values: row lengths on both sides of the warp and block kernels, every dim, strided
// inputs, every floating dtype, -inf / +inf / NaN as the CPU treats them; the fused backward
// against the CPU's backward and the composite twin; gradcheck in float64 on the GPU.
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "tests/cuda_test_support.h"

using namespace minigrad;
using namespace minigrad::test;

namespace {

// Last-dim lengths around the kernels' limits: a warp per row up to 1024 elements (32 per
// lane; 1, 31 and 33 leave lanes or vector slots empty), a block per row beyond.
const std::vector<int64_t> kRowLengths = {1, 7, 31, 33, 64, 1000, 1024, 1025, 4097, 20000};

Tensor apply(bool log, const Tensor& x, int64_t dim) { return log ? log_softmax(x, dim) : softmax(x, dim); }

}  // namespace

TEST_CASE("softmax on the GPU matches the CPU for every row length, float64 and float32" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(200);
  for (int64_t n : kRowLengths) {
    CAPTURE(n);
    for (DType dtype : {kFloat64, kFloat32}) {
      CAPTURE(dtype);
      // Spread 3: exponentials over a wide range, so a wrong maximum or sum shows.
      const Tensor x = (randn({5, n}, kFloat64) * 3.0).to(dtype);
      const double tol = dtype == kFloat64 ? 1e-12 : 1e-5;
      for (bool log : {false, true}) {
        CAPTURE(log);
        const Tensor y = apply(log, x.to(kGpu), -1);
        CHECK(y.device() == kGpu);
        CHECK(y.dtype() == dtype);
        CHECK_ALLCLOSE(y, apply(log, x, -1), tol, tol * 1e-2);
      }
    }
  }
}

TEST_CASE("softmax on the GPU: float16 and bfloat16 compute in float" * doctest::skip(!cuda_is_available())) {
  manual_seed(201);
  for (int64_t n : kRowLengths) {
    CAPTURE(n);
    for (DType half : kHalfDTypes) {
      CAPTURE(half);
      const Tensor x = randn({3, n}).to(half);
      const Tensor y = softmax(x.to(kGpu), 1);
      CHECK(y.dtype() == half);
      // Rounded once to 11 or 8 bits.
      CHECK_ALLCLOSE(y, softmax(upcast(x), 1), 1e-2, 1e-5);
      CHECK_ALLCLOSE(log_softmax(x.to(kGpu), 1), log_softmax(upcast(x), 1), 1e-2, 1e-2);
    }
  }
}

TEST_CASE("softmax on the GPU along any dim and through strides" * doctest::skip(!cuda_is_available())) {
  manual_seed(202);
  const Tensor base = randn({4, 6, 40}, kFloat64);
  const Tensor gpu_base = base.to(kGpu);
  const std::vector<std::function<Tensor(const Tensor&)>> views = {
      [](const Tensor& b) { return b; },
      [](const Tensor& b) { return b.transpose(0, 2); },
      [](const Tensor& b) { return b.slice(2, 1, 40, 3); },
      [](const Tensor& b) { return b.select(1, 3).unsqueeze(1).expand({4, 5, 40}); },
  };
  for (const auto& view : views) {
    const Tensor x = view(base);
    const Tensor on_gpu = view(gpu_base);
    INFO("sizes " << shape_str(x.sizes()) << " strides " << shape_str(x.strides()));
    for (int64_t dim : {0, 1, 2, -1, -3}) {
      CAPTURE(dim);
      for (bool log : {false, true}) {
        const Tensor y = apply(log, on_gpu, dim);
        CHECK(y.is_contiguous());
        CHECK_ALLCLOSE(y, apply(log, x, dim), 1e-12, 1e-14);
      }
    }
  }
}

TEST_CASE("softmax on the GPU treats -inf, +inf and NaN as the CPU does, in both kernels" *
          doctest::skip(!cuda_is_available())) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (int64_t n : {8, 3000}) {  // a warp per row, a block per row
    CAPTURE(n);
    // Row 0: masked (-inf) except two zeros, -inf first. Row 1: all -inf (NaN). Row 2: a
    // NaN (the row becomes NaN). Row 3: a +inf (NaN too). Row 4: large values (stable).
    std::vector<double> values(static_cast<size_t>(5 * n), -inf);
    const size_t row = static_cast<size_t>(n);
    values[1] = 0.0;
    values[row - 1] = 0.0;
    for (size_t i = 2 * row; i < 5 * row; ++i) values[i] = static_cast<double>(i % 7);
    values[2 * row + row / 2] = nan;
    values[3 * row + 1] = inf;
    for (size_t i = 4 * row; i < 5 * row; ++i) values[i] = 1000.0 + static_cast<double>(i % 5);
    const Tensor x = from_vector(values, {5, n});
    for (DType dtype : {kFloat64, kFloat32}) {
      CAPTURE(dtype);
      for (bool log : {false, true}) {
        CAPTURE(log);
        const Tensor typed = x.to(dtype);
        CHECK_ALLCLOSE(apply(log, typed.to(kGpu), 1), apply(log, typed, 1), dtype == kFloat64 ? 1e-12 : 1e-5, 1e-12);
      }
    }
    const std::vector<double> masked = softmax(x.to(kGpu), 1).to_vector<double>();
    CHECK(masked[1] == 0.5);
    CHECK(masked[0] == 0.0);
  }
}

TEST_CASE("the fused backward on the GPU matches the CPU's and the composite twin's" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(203);
  for (int64_t n : {1, 33, 1000, 1025, 5000}) {
    CAPTURE(n);
    const Tensor x = randn({6, n}, kFloat64) * 2.0;
    const Tensor upstream = randn({6, n}, kFloat64);
    for (int64_t dim : {0, 1}) {
      CAPTURE(dim);
      for (bool log : {false, true}) {
        CAPTURE(log);
        const Tensor cpu_leaf = x.detach().requires_grad_();
        apply(log, cpu_leaf, dim).backward(upstream);
        const Tensor fused = gpu_leaf(x);
        apply(log, fused, dim).backward(upstream.to(kGpu));
        CHECK(fused.grad().device() == kGpu);
        CHECK_ALLCLOSE(fused.grad(), cpu_leaf.grad(), 1e-10, 1e-12);

        // The twin, from primitive ops on the GPU, differentiated by the tape.
        const Tensor twin = gpu_leaf(x);
        const Tensor e = exp(twin);
        const Tensor composite = log ? twin - ::minigrad::log(sum(e, {dim}, true)) : e / sum(e, {dim}, true);
        composite.backward(upstream.to(kGpu));
        CHECK_ALLCLOSE(fused.grad(), twin.grad(), 1e-9, 1e-12);
      }
    }
    // An expanded upstream gradient (what .sum() hands back): made contiguous first.
    const Tensor leaf = gpu_leaf(x);
    softmax(leaf, 1).sum().backward();
    CHECK_ALLCLOSE(leaf.grad(), zeros({6, n}, kFloat64), 0.0, 1e-12);
  }
}

TEST_CASE("the fused backward on the GPU in float32, float16 and bfloat16" * doctest::skip(!cuda_is_available())) {
  manual_seed(204);
  for (int64_t n : {40, 1024, 3000}) {
    CAPTURE(n);
    const Tensor x = randn({4, n});
    const Tensor upstream = randn({4, n});
    for (DType dtype : {kFloat32, kFloat16, kBFloat16}) {
      CAPTURE(dtype);
      for (bool log : {false, true}) {
        CAPTURE(log);
        const Tensor cpu_leaf = upcast(x.to(dtype)).detach().requires_grad_();
        apply(log, cpu_leaf, 1).backward(upcast(upstream.to(dtype)));
        const Tensor leaf = gpu_leaf(x.to(dtype));
        apply(log, leaf, 1).backward(upstream.to(dtype).to(kGpu));
        CHECK(leaf.grad().dtype() == dtype);
        // softmax's gradient is y * (g - sum(g * y)) with y ~ 1/n: its errors scale with 1/n.
        const double scale = log ? 1.0 : 1.0 / static_cast<double>(n);
        const bool is_float = dtype == kFloat32;
        CHECK_ALLCLOSE(leaf.grad(), cpu_leaf.grad(), is_float ? 1e-4 : 2e-2, (is_float ? 1e-6 : 2e-2) * scale);
      }
    }
  }
}

TEST_CASE("gradcheck on the GPU: softmax and log_softmax in float64" * doctest::skip(!cuda_is_available())) {
  manual_seed(205);
  const Tensor x = randn({2, 3, 4}, TensorOptions(kFloat64).device(kGpu)).requires_grad_();
  for (int64_t dim : {0, 1, -1}) {
    CAPTURE(dim);
    CHECK_GRADCHECK([dim](const tensor_list& t) { return softmax(t[0], dim); }, tensor_list{x});
    CHECK_GRADCHECK([dim](const tensor_list& t) { return log_softmax(t[0], dim); }, tensor_list{x});
    CHECK_GRADCHECK([dim](const tensor_list& t) { return softmax(t[0].transpose(0, 2), dim); }, tensor_list{x});
    CHECK_GRADCHECK([dim](const tensor_list& t) { return log_softmax(t[0].slice(2, 0, 4, 3), dim); }, tensor_list{x});
  }
  // Rows for the block kernel, checked by random projections (the full Jacobian is 4M entries).
  GradcheckOptions projections;
  projections.random_projections = 8;
  const Tensor long_rows = randn({2, 1100}, TensorOptions(kFloat64).device(kGpu)).requires_grad_();
  CHECK_GRADCHECK_OPTS([](const tensor_list& t) { return softmax(t[0], 1); }, tensor_list{long_rows}, projections);
  CHECK_GRADCHECK_OPTS([](const tensor_list& t) { return log_softmax(t[0], 1); }, tensor_list{long_rows}, projections);
}

TEST_CASE("softmax on the GPU: empty and 0-d tensors" * doctest::skip(!cuda_is_available())) {
  CHECK(softmax(zeros({0, 4}, kFloat64).to(kGpu), 1).sizes() == Shape{0, 4});
  CHECK(softmax(zeros({0, 4}, kFloat64).to(kGpu), 0).sizes() == Shape{0, 4});
  CHECK(log_softmax(zeros({3, 0}, kFloat64).to(kGpu), 1).sizes() == Shape{3, 0});
  CHECK(softmax(scalar_tensor(3.0, kFloat64).to(kGpu), 0).item<double>() == 1.0);
  CHECK(log_softmax(scalar_tensor(3.0, kFloat64).to(kGpu), -1).item<double>() == 0.0);
  const Tensor leaf = gpu_leaf(zeros({0, 4}, kFloat64));
  softmax(leaf, 1).sum().backward();
  CHECK(leaf.grad().sizes() == Shape{0, 4});
}

TEST_CASE("softmax double backward on the GPU: the same Functions as on the CPU, gradgradcheck in float64" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(206);
  const Tensor x = randn({2, 3, 4}, TensorOptions(kFloat64).device(kGpu));
  for (bool log : {false, true}) {
    CAPTURE(log);
    // The gradient is recorded by the backward Function (the fused row kernel in forward).
    Tensor leaf = x.detach().requires_grad_();
    const Tensor upstream = randn({2, 3, 4}, TensorOptions(kFloat64).device(kGpu));
    const Tensor g = autograd::grad({apply(log, leaf, 1)}, {leaf}, {upstream}, std::nullopt, /*create_graph=*/true)[0];
    REQUIRE(g.grad_fn() != nullptr);
    CHECK(g.grad_fn()->name().find(log ? "LogSoftmaxBackward" : "SoftmaxBackward") != std::string::npos);
    for (int64_t dim : {0, 1, -1}) {
      CAPTURE(dim);
      CHECK_GRADGRADCHECK([&](const tensor_list& t) { return apply(log, t[0], dim); },
                          tensor_list{x.detach().requires_grad_()});
      CHECK_GRADGRADCHECK([&](const tensor_list& t) { return apply(log, t[0].transpose(0, 2), dim); },
                          tensor_list{x.detach().requires_grad_()});
    }
  }
}

TEST_CASE("softmax double backward on the GPU agrees with the CPU's, every row kernel and dtype" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(207);
  for (int64_t n : {1, 33, 1025, 9000}) {
    CAPTURE(n);
    const Tensor x = randn({3, n}, kFloat64);
    const Tensor upstream = randn({3, n}, kFloat64);
    for (bool log : {false, true}) {
      CAPTURE(log);
      for (DType dtype : {kFloat64, kFloat32, kFloat16, kBFloat16}) {
        CAPTURE(dtype);
        // d/dx of sum(g * g), g the recorded gradient for `upstream`.
        auto second = [&](const Tensor& x_in, const Tensor& up) {
          Tensor leaf = x_in.detach().requires_grad_();
          const Tensor g = autograd::grad({apply(log, leaf, 1)}, {leaf}, {up}, std::nullopt, true)[0];
          return autograd::grad({(g * g).sum()}, {leaf})[0];
        };
        const DType cpu_dtype = is_half(dtype) ? kFloat32 : dtype;
        const Tensor on_gpu = second(x.to(dtype).to(kGpu), upstream.to(dtype).to(kGpu));
        const Tensor on_cpu = second(x.to(dtype).to(cpu_dtype), upstream.to(dtype).to(cpu_dtype));
        CHECK(on_gpu.dtype() == dtype);
        const double scale = log ? 1.0 : 1.0 / static_cast<double>(n);
        const double tol = dtype == kFloat64 ? 1e-10 : dtype == kFloat32 ? 1e-4 : 5e-2;
        CHECK_ALLCLOSE(on_gpu, on_cpu, tol, tol * scale);
      }
    }
  }
  // 0-d and empty on the GPU.
  Tensor scalar = scalar_tensor(0.3, kFloat64).to(kGpu).requires_grad_();
  const Tensor d = autograd::grad({softmax(scalar, 0)}, {scalar}, {}, std::nullopt, true)[0];
  CHECK(d.item<double>() == 0.0);
  Tensor empty_leaf = gpu_leaf(zeros({0, 4}, kFloat64));
  const Tensor g = autograd::grad({log_softmax(empty_leaf, 1).sum()}, {empty_leaf}, {}, std::nullopt, true)[0];
  CHECK(g.sizes() == Shape{0, 4});
}
