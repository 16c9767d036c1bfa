// Every row of the op table (tests/op_table.h) on the GPU: values and gradients against the
// CPU's in every dtype the row takes, gradcheck and gradgradcheck in float64 on the GPU
// (the first and the second backward run there), the once-differentiable errors, empty
// inputs; then the device copies, whose double backward crosses devices.
#include "tests/cuda_test_support.h"
#include "tests/op_table_checks.h"

using namespace minigrad;
using namespace minigrad::test;

TEST_CASE("op table on the GPU: values and gradients match the CPU's in every dtype a row takes" *
          doctest::skip(!cuda_is_available())) {
  for (DType dtype : {kFloat64, kFloat32, kFloat16, kBFloat16}) {
    INFO("dtype: " << dtype_name(dtype));
    check_rows([dtype](const OpInfo& row) { return row.takes(dtype); },
               [dtype](const OpInfo& row) { return check_device_vs_cpu(row, kGpu, dtype); });
  }
}

TEST_CASE("op table on the GPU: gradcheck in float64; the rows without a gradient record none" *
          doctest::skip(!cuda_is_available())) {
  check_rows(every_row, [](const OpInfo& row) { return check_gradcheck(row, kGpu); });
}

TEST_CASE("op table on the GPU: the twice-differentiable rows pass gradgradcheck in float64" *
          doctest::skip(!cuda_is_available())) {
  check_rows(twice_row, [](const OpInfo& row) { return check_gradgradcheck(row, kGpu); });
}

TEST_CASE("op table on the GPU: the once-differentiable rows refuse a second backward, naming their Function" *
          doctest::skip(!cuda_is_available())) {
  check_rows(once_row, [](const OpInfo& row) { return check_once_differentiable(row, kGpu); });
}

TEST_CASE("op table on the GPU: a size-0 dim gives what it gives on the CPU" * doctest::skip(!cuda_is_available())) {
  check_rows([](const OpInfo& row) { return row.test_empty; },
             [](const OpInfo& row) { return check_empty(row, kGpu); });
}

TEST_CASE("to(device) is twice differentiable both ways" * doctest::skip(!cuda_is_available())) {
  manual_seed(77);
  const Tensor on_cpu = randn({2, 3}, kFloat64).requires_grad_();
  const Tensor on_gpu = randn({2, 3}, kFloat64).to(kGpu).requires_grad_();
  // The result on the other device: the first gradient comes back across, the second too.
  CHECK_GRADGRADCHECK([](const tensor_list& x) { return x[0].to(kGpu) * x[0].to(kGpu); }, tensor_list{on_cpu});
  CHECK_GRADGRADCHECK([](const tensor_list& x) { return x[0].to(kCPU) * x[0].to(kCPU); }, tensor_list{on_gpu});
  CHECK_GRADGRADCHECK([](const tensor_list& x) { return x[0].cuda().cpu(); }, tensor_list{on_cpu});
}

TEST_CASE("the second derivatives on the GPU match the CPU's" * doctest::skip(!cuda_is_available())) {
  // gradgradcheck compares each device with finite differences on that device; this checks
  // the two devices against each other on one op with a non-zero second derivative.
  manual_seed(78);
  const Tensor x = randn({3, 4}, kFloat64);
  auto second = [](const Tensor& input) {
    const Tensor leaf = input.detach().requires_grad_();
    const Tensor y = (tanh(leaf) * softmax(leaf, 1)).sum();
    const Tensor g = autograd::grad({y}, {leaf}, {}, std::nullopt, /*create_graph=*/true)[0];
    return autograd::grad({(g * g).sum()}, {leaf})[0];
  };
  CHECK_ALLCLOSE(second(x.to(kGpu)).cpu(), second(x), 1e-10, 1e-12);
}
