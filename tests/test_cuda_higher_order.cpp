// Higher-order gradients on the GPU: the table of tests/higher_order_table.h with every
// input on cuda:0 (gradgradcheck in float64 runs the first and the second backward there),
// and the device copies, whose double backward crosses devices.
#include "tests/cuda_test_support.h"
#include "tests/higher_order_table.h"

using namespace minigrad;
using namespace minigrad::test;

TEST_CASE("every twice-differentiable op passes gradgradcheck in float64 on the GPU" *
          doctest::skip(!cuda_is_available())) {
  run_higher_order_table(Order::Twice, kGpu);
}

TEST_CASE("every once-differentiable op refuses a second backward on the GPU, naming the op" *
          doctest::skip(!cuda_is_available())) {
  run_higher_order_table(Order::Once, kGpu);
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
