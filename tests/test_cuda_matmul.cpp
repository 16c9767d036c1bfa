// matmul on the GPU (cuBLAS, cuda/matmul.cpp) against the CPU kernel on the same values:
// 1-D, 2-D, batched and broadcast shapes, odd sizes, transposed / sliced / expanded
// operands (and that transposed views reach cuBLAS without a copy), TF32 off by default,
// float16 and bfloat16, empty sizes; gradcheck in float64 of strided operands and backward
// on the GPU (every shape class's gradient checks run from the op table).
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "tests/cuda_test_support.h"
#include <minigrad/config.h>  // MINIGRAD_WITH_CUDA
#if MINIGRAD_WITH_CUDA
#include <minigrad/cuda/matmul.h>
#include <minigrad/cuda/runtime.h>
#endif

using namespace minigrad;
using namespace minigrad::test;

namespace {

struct ShapeCase {
  Shape a, b;
};

const std::vector<ShapeCase> kShapeCases = {
    {{3}, {3}},                     // dot product
    {{3}, {3, 4}},                  // vector x matrix
    {{2, 3}, {3}},                  // matrix x vector
    {{2, 3}, {3, 4}},               // one product: cublasGemmEx
    {{5, 2, 3}, {5, 3, 4}},         // strided batched
    {{2, 1, 2, 3}, {5, 3, 4}},      // batch dims broadcast on both sides: 'self' expanded by a copy
    {{5, 2, 3}, {3, 4}},            // 'other' shared by the batch: folds into one [10, 3] x [3, 4]
    {{4, 1, 9}, {9, 7}},            // rows of one, folded
    {{2, 3}, {2, 3, 4}},            // 'self' shared by the batch: stride 0
    {{3}, {2, 3, 4}},               // vector x batch
    {{2, 2, 3}, {3}},               // batch x vector
    {{2, 3, 1, 5}, {3, 5, 6}},      // broadcast inner batch dim
    {{33, 1}, {1, 65}},             // outer product (k = 1)
};

// a and b on the CPU; the product on the GPU of their copies there.
Tensor gpu_matmul(const Tensor& a, const Tensor& b) { return matmul(a.to(kGpu), b.to(kGpu)); }

}  // namespace

TEST_CASE("matmul on the GPU matches the CPU on every shape class, float64 and float32" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(300);
  for (const ShapeCase& c : kShapeCases) {
    INFO("self " << shape_str(c.a) << " other " << shape_str(c.b));
    const Tensor a = randn(c.a, kFloat64);
    const Tensor b = randn(c.b, kFloat64);
    const Tensor out = gpu_matmul(a, b);
    CHECK(out.device() == kGpu);
    CHECK(out.sizes() == matmul(a, b).sizes());
    CHECK_ALLCLOSE(out, matmul(a, b), 1e-12, 1e-12);
    CHECK_ALLCLOSE(gpu_matmul(a.to(kFloat32), b.to(kFloat32)), matmul(a.to(kFloat32), b.to(kFloat32)), 1e-5, 1e-5);
  }
}

TEST_CASE("matmul on the GPU: sizes that are no multiple of any tile" * doctest::skip(!cuda_is_available())) {
  manual_seed(301);
  for (int64_t m : {1, 17, 100}) {
    for (int64_t k : {1, 33, 257}) {
      for (int64_t n : {1, 3, 100}) {
        INFO("m " << m << " k " << k << " n " << n);
        const Tensor a = randn({m, k}, kFloat64);
        const Tensor b = randn({k, n}, kFloat64);
        CHECK_ALLCLOSE(gpu_matmul(a, b), matmul(a, b), 1e-12, 1e-12);
        const Tensor batch = randn({3, m, k}, kFloat64);
        CHECK_ALLCLOSE(gpu_matmul(batch, b), matmul(batch, b), 1e-12, 1e-12);
        CHECK_ALLCLOSE(gpu_matmul(a.to(kFloat32), b.to(kFloat32)), matmul(a.to(kFloat32), b.to(kFloat32)), 1e-4,
                       1e-4);
      }
    }
  }
}

TEST_CASE("matmul on the GPU reads transposed, sliced, permuted and expanded operands" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(302);
  // Each pair is built the same way from CPU tensors and from their GPU copies.
  using Operands = std::pair<Tensor, Tensor>;
  const Tensor p = randn({6, 10}, kFloat64);
  const Tensor q = randn({12, 6}, kFloat64);
  const Tensor batch_p = randn({4, 10, 6}, kFloat64);
  const Tensor batch_q = randn({4, 12, 10}, kFloat64);
  const Tensor wide = randn({10, 20}, kFloat64);
  const Tensor four_d = randn({4, 3, 10, 6}, kFloat64);
  const std::vector<std::pair<const char*, std::function<Operands(const std::vector<Tensor>&)>>> cases = {
      {"a.t() x b.t()", [](const std::vector<Tensor>& t) { return Operands{t[0].t(), t[1].t()}; }},
      {"a.t() x b", [](const std::vector<Tensor>& t) { return Operands{t[0].t(), t[1].t().contiguous()}; }},
      {"a x b.t()", [](const std::vector<Tensor>& t) { return Operands{t[0].t().contiguous(), t[1].t()}; }},
      {"batched transposes",
       [](const std::vector<Tensor>& t) { return Operands{t[2].transpose(-1, -2), t[3].transpose(-1, -2)}; }},
      {"rows with a gap (ld > cols)",
       [](const std::vector<Tensor>& t) { return Operands{t[4].slice(1, 0, 6), t[1].t()}; }},
      {"a step along the columns: copied",
       [](const std::vector<Tensor>& t) { return Operands{t[4].slice(1, 0, 12, 2), t[1].t()}; }},
      {"a row broadcast to every row: copied",
       [](const std::vector<Tensor>& t) { return Operands{t[0].slice(0, 0, 1).expand({7, 10}), t[0].t()}; }},
      {"a batch stride 0",
       [](const std::vector<Tensor>& t) {
         return Operands{t[2], t[1].t().slice(1, 0, 5).unsqueeze(0).expand({4, 6, 5})};
       }},
      {"a permuted batch (ld = batch * cols)",
       [](const std::vector<Tensor>& t) { return Operands{t[2].transpose(0, 1).contiguous().transpose(0, 1), t[0]}; }},
      {"batch dims that do not merge: copied",
       [](const std::vector<Tensor>& t) { return Operands{t[5].slice(0, 0, 4, 2), t[1].t()}; }},
  };
  const std::vector<Tensor> on_cpu = {p, q, batch_p, batch_q, wide, four_d};
  std::vector<Tensor> on_gpu;
  for (const Tensor& t : on_cpu) on_gpu.push_back(t.to(kGpu));
  for (const auto& [name, make] : cases) {
    INFO(name);
    const Operands cpu = make(on_cpu);
    const Operands gpu = make(on_gpu);
    REQUIRE(gpu.first.strides() == cpu.first.strides());
    REQUIRE(gpu.second.strides() == cpu.second.strides());
    CHECK_ALLCLOSE(matmul(gpu.first, gpu.second), matmul(cpu.first, cpu.second), 1e-12, 1e-12);
  }
}

#if MINIGRAD_WITH_CUDA
TEST_CASE("transposed views reach cuBLAS as a flag, not a copy" * doctest::skip(!cuda_is_available())) {
  // 1024 x 1024 float32: 4 MiB per matrix, a whole number of the allocator's blocks, so the
  // peak counts exactly the output when no operand is copied.
  const int64_t n = 1024;
  const size_t matrix_bytes = static_cast<size_t>(n * n) * sizeof(float);
  const Tensor a = randn({n, n}).to(kGpu);
  const Tensor b = randn({n, n}).to(kGpu);
  const Tensor batch = randn({4, n / 2, n / 2}).to(kGpu);  // also 4 MiB
  const std::vector<std::pair<Tensor, Tensor>> products = {
      {a, b.t()},  // forward of x w^T, and backward's grad_out x w
      {a.t(), b},  // backward's x^T x grad_out
      {a.t(), b.t()},
      {batch.transpose(-1, -2), batch},
      {batch, batch.transpose(-1, -2)},
  };
  for (const auto& [x, y] : products) {
    cuda::synchronize();
    const size_t before = cuda::allocator_stats(0).allocated_bytes;
    cuda::reset_peak_stats(0);
    const Tensor out = matmul(x, y);
    CHECK(cuda::allocator_stats(0).peak_allocated_bytes - before == matrix_bytes);
  }
}

TEST_CASE("float32 matmul on the GPU does not use TF32 unless asked" * doctest::skip(!cuda_is_available())) {
  manual_seed(303);
  const Tensor a = randn({256, 2048});
  const Tensor b = randn({2048, 256});
  const Tensor exact = matmul(a.to(kFloat64), b.to(kFloat64));
  // float32 sums of 2048 products stay within ~1e-4 of the exact value; TF32 rounds each
  // input to a 10-bit mantissa, ~5e-4 per product, ~2e-2 over the sum.
  CHECK(!cuda::matmul_allow_tf32());
  CHECK_ALLCLOSE(gpu_matmul(a, b), exact, 0.0, 2e-3);
  cuda::set_matmul_allow_tf32(true);
  const AllcloseReport tf32 = allclose_report(gpu_matmul(a, b), exact, 0.0, 2e-3);
  cuda::set_matmul_allow_tf32(false);
  CHECK(!tf32.passed);
  CHECK(tf32.max_abs_error < 0.5);
}
#endif

TEST_CASE("matmul on the GPU: float16 and bfloat16 accumulate in float (half-precision cuBLAS)" * doctest::skip(!cuda_is_available())) {
  manual_seed(304);
  for (DType half : kHalfDTypes) {
    CAPTURE(half);
    for (const ShapeCase& c : kShapeCases) {
      INFO("self " << shape_str(c.a) << " other " << shape_str(c.b));
      const Tensor a = randn(c.a).to(half);
      const Tensor b = randn(c.b).to(half);
      const Tensor out = gpu_matmul(a, b);
      CHECK(out.dtype() == half);
      CHECK_ALLCLOSE(out, matmul(upcast(a), upcast(b)), 1e-2, 2e-2);
    }
    const Tensor a = randn({3, 64, 200}).to(half);
    const Tensor b = randn({200, 48}).to(half);
    // Sums of 200 products reach ~15: rounded to 8 bits (bfloat16), ~0.06 apart.
    CHECK_ALLCLOSE(gpu_matmul(a, b), matmul(upcast(a), upcast(b)), 1e-2, 5e-2);
    CHECK_ALLCLOSE(matmul(a.to(kGpu).transpose(-1, -2), a.to(kGpu)), matmul(upcast(a).transpose(-1, -2), upcast(a)),
                   1e-2, 1e-1);
  }
}

TEST_CASE("matmul on the GPU of empty tensors" * doctest::skip(!cuda_is_available())) {
  const TensorOptions gpu = TensorOptions(kFloat64).device(kGpu);
  CHECK(matmul(zeros({0, 3}, gpu), zeros({3, 4}, gpu)).sizes() == Shape{0, 4});
  CHECK(matmul(zeros({0, 2, 3}, gpu), zeros({3, 4}, gpu)).sizes() == Shape{0, 2, 4});
  // An empty inner dim sums nothing: zeros, whatever the output held before.
  const Tensor a = gpu_leaf(ones({2, 0}, kFloat64));
  const Tensor b = gpu_leaf(ones({0, 3}, kFloat64));
  const Tensor out = matmul(a, b);
  CHECK(out.to_vector<double>() == std::vector<double>(6, 0.0));
  out.backward(ones({2, 3}, gpu));
  CHECK(a.grad().sizes() == Shape{2, 0});
  CHECK(b.grad().sizes() == Shape{0, 3});
  CHECK(matmul(ones({0}, gpu), ones({0}, gpu)).item<double>() == 0.0);
  CHECK(matmul(ones({3, 2, 0}, gpu), ones({0, 5}, gpu)).to_vector<double>() == std::vector<double>(30, 0.0));
  CHECK_THROWS_CONTAINING(matmul(zeros({2, 3}, kFloat64), zeros({3, 2}, gpu)),
                          "matmul: expected all tensors on one device");
}

// gradcheck and gradgradcheck of every shape class on the GPU run from the op table
// (tests/test_cuda_op_table.cpp); here the operands that reach cuBLAS as strided views.
TEST_CASE("gradcheck on the GPU: transposed and sliced operands" * doctest::skip(!cuda_is_available())) {
  manual_seed(305);
  const TensorOptions gpu = TensorOptions(kFloat64).device(kGpu);
  const Tensor x = randn({4, 5}, gpu).requires_grad_();
  const Tensor y = randn({6, 4}, gpu).requires_grad_();
  CHECK_GRADCHECK([](const tensor_list& t) { return matmul(t[0].t(), t[1].t()); }, (tensor_list{x, y}));
  const Tensor z = randn({3, 4, 2}, gpu).requires_grad_();
  const Tensor w = randn({3, 6}, gpu).requires_grad_();
  CHECK_GRADCHECK([](const tensor_list& t) { return matmul(t[0].transpose(0, 2), t[1].slice(1, 0, 6, 2)); },
                  (tensor_list{z, w}));
}

TEST_CASE("backward on the GPU matches the CPU: a linear layer and a batched product" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(306);
  // y = x w^T as in a linear layer: grad_x = grad_y w, grad_w = grad_y^T x.
  const Tensor x = randn({3, 8, 16}, kFloat64);
  const Tensor w = randn({32, 16}, kFloat64);
  const Tensor upstream = randn({3, 8, 32}, kFloat64);
  const Tensor x_cpu = x.detach().requires_grad_();
  const Tensor w_cpu = w.detach().requires_grad_();
  matmul(x_cpu, w_cpu.t()).backward(upstream);
  const Tensor x_gpu = gpu_leaf(x);
  const Tensor w_gpu = gpu_leaf(w);
  matmul(x_gpu, w_gpu.t()).backward(upstream.to(kGpu));
  CHECK(x_gpu.grad().device() == kGpu);
  CHECK(w_gpu.grad().device() == kGpu);
  CHECK_ALLCLOSE(x_gpu.grad(), x_cpu.grad(), 1e-12, 1e-12);
  CHECK_ALLCLOSE(w_gpu.grad(), w_cpu.grad(), 1e-12, 1e-12);

  const Tensor a = randn({2, 1, 5, 7}, kFloat64);
  const Tensor b = randn({4, 7, 3}, kFloat64);
  const Tensor grad = randn({2, 4, 5, 3}, kFloat64);
  const Tensor a_cpu = a.detach().requires_grad_();
  const Tensor b_cpu = b.detach().requires_grad_();
  matmul(a_cpu, b_cpu).backward(grad);
  const Tensor a_gpu = gpu_leaf(a);
  const Tensor b_gpu = gpu_leaf(b);
  matmul(a_gpu, b_gpu).backward(grad.to(kGpu));
  CHECK_ALLCLOSE(a_gpu.grad(), a_cpu.grad(), 1e-12, 1e-12);
  CHECK_ALLCLOSE(b_gpu.grad(), b_cpu.grad(), 1e-12, 1e-12);
}

TEST_CASE("the weight gradient of a batched input on the GPU: one folded product, the CPU's values" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(307);
  // a [B, T, k] x b [k, n]: grad_b = a2^T x grad2 over the B*T rows, in one GEMM.
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{4, 33, 16}, {16, 24}}, {{2, 3, 9, 8}, {8, 5}}, {{4, 33, 16}, {16}}, {{4, 33, 16}, {1, 16, 24}}};
  for (const auto& [a_sizes, b_sizes] : cases) {
    INFO("self " << shape_str(a_sizes) << " other " << shape_str(b_sizes));
    for (DType dtype : {kFloat64, kFloat32}) {
      CAPTURE(dtype);
      const Tensor a = randn(a_sizes, kFloat64).to(dtype);
      const Tensor b = randn(b_sizes, kFloat64).to(dtype);
      const Tensor a_cpu = a.detach().requires_grad_();
      const Tensor b_cpu = b.detach().requires_grad_();
      const Tensor out = matmul(a_cpu, b_cpu);
      const Tensor upstream = randn(out.sizes(), kFloat64).to(dtype);
      out.backward(upstream);
      const Tensor a_gpu = gpu_leaf(a);
      const Tensor b_gpu = gpu_leaf(b);
      matmul(a_gpu, b_gpu).backward(upstream.to(kGpu));
      CHECK(b_gpu.grad().sizes() == b.sizes());
      const double tolerance = dtype == kFloat64 ? 1e-12 : 1e-4;
      CHECK_ALLCLOSE(b_gpu.grad(), b_cpu.grad(), tolerance, tolerance);
      CHECK_ALLCLOSE(a_gpu.grad(), a_cpu.grad(), tolerance, tolerance);
    }
  }
  // A transposed batch: the fold reads it through a copy.
  const Tensor base = randn({5, 3, 4}, TensorOptions(kFloat64).device(kGpu)).requires_grad_();
  const Tensor w = randn({4, 2}, TensorOptions(kFloat64).device(kGpu)).requires_grad_();
  CHECK_GRADCHECK([](const tensor_list& t) { return matmul(t[0].transpose(0, 1), t[1]); }, (tensor_list{base, w}));
}
