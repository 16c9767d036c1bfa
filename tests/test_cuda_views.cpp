// Views and copies on the GPU: a view is metadata over the same storage on any device; the
// backward of slice and select (SliceBackward/SelectBackward: zeros + a strided copy), of
// expand (sum_to) and of the copies (to(), clone(), contiguous()) run on the GPU and agree
// with the CPU's; gradgradcheck in float64 on the GPU (gradcheck of each view runs from the
// op table, tests/test_cuda_op_table.cpp).
#include <functional>
#include <optional>
#include <vector>

#include "tests/cuda_test_support.h"

using namespace minigrad;
using namespace minigrad::test;

namespace {

using ViewFn = std::function<Tensor(const Tensor&)>;

// Views of a [4, 6, 5] tensor, each differentiable.
const std::vector<std::pair<const char*, ViewFn>> kViews = {
    {"slice", [](const Tensor& t) { return t.slice(1, 1, 6, 2); }},
    {"slice, negative bounds", [](const Tensor& t) { return t.slice(-1, -4, -1); }},
    {"select", [](const Tensor& t) { return t.select(0, 2); }},
    {"select, negative index", [](const Tensor& t) { return t.select(-1, -1); }},
    {"transpose", [](const Tensor& t) { return t.transpose(0, 2); }},
    {"permute", [](const Tensor& t) { return t.permute({2, 0, 1}); }},
    {"view", [](const Tensor& t) { return t.view({24, 5}); }},
    {"reshape of a transpose (a copy)", [](const Tensor& t) { return t.transpose(0, 1).reshape({-1}); }},
    {"expand", [](const Tensor& t) { return t.slice(1, 0, 1).expand({3, 4, 7, 5}); }},
    {"unsqueeze, squeeze", [](const Tensor& t) { return t.unsqueeze(1).squeeze(1).squeeze(); }},
    {"contiguous of a transpose", [](const Tensor& t) { return t.transpose(1, 2).contiguous(); }},
    {"clone of a slice", [](const Tensor& t) { return t.slice(2, 1, 4).clone(); }},
};

}  // namespace

TEST_CASE("views on the GPU share storage and read the same values as on the CPU" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(400);
  const Tensor x = randn({4, 6, 5}, kFloat64);
  const Tensor on_gpu = x.to(kGpu);
  for (const auto& [name, view] : kViews) {
    INFO(name);
    const Tensor v = view(on_gpu);
    CHECK(v.device() == kGpu);
    CHECK_ALLCLOSE(v, view(x), 0.0, 0.0);
  }
  const Tensor sliced = on_gpu.slice(1, 1, 6, 2);
  CHECK(sliced.storage() == on_gpu.storage());
  CHECK(sliced.contiguous().storage() != on_gpu.storage());
}

TEST_CASE("the backward of every view runs on the GPU and matches the CPU" * doctest::skip(!cuda_is_available())) {
  manual_seed(401);
  const Tensor x = randn({4, 6, 5}, kFloat64);
  for (const auto& [name, view] : kViews) {
    INFO(name);
    const Tensor cpu_leaf = x.detach().requires_grad_();
    const Tensor cpu_out = view(cpu_leaf);
    const Tensor upstream = randn(cpu_out.sizes(), kFloat64);
    cpu_out.backward(upstream);
    const Tensor leaf = gpu_leaf(x);
    view(leaf).backward(upstream.to(kGpu));
    CHECK(leaf.grad().device() == kGpu);
    CHECK_ALLCLOSE(leaf.grad(), cpu_leaf.grad(), 0.0, 1e-12);
  }
}

TEST_CASE("copies between devices and dtypes are differentiable" * doctest::skip(!cuda_is_available())) {
  manual_seed(402);
  const Tensor x = randn({3, 4}, kFloat64);
  const Tensor upstream = randn({3, 4}, kFloat64);

  // CPU leaf -> GPU -> back: the gradient comes home to the CPU.
  const Tensor cpu_leaf = x.detach().requires_grad_();
  const Tensor moved = cpu_leaf.cuda();
  CHECK(moved.device() == kGpu);
  moved.backward(upstream.to(kGpu));
  CHECK(cpu_leaf.grad().device() == kCPU);
  CHECK_ALLCLOSE(cpu_leaf.grad(), upstream, 0.0, 0.0);

  // GPU leaf -> CPU.
  const Tensor leaf = gpu_leaf(x);
  leaf.cpu().backward(upstream);
  CHECK(leaf.grad().device() == kGpu);
  CHECK_ALLCLOSE(leaf.grad(), upstream, 0.0, 0.0);

  // A dtype conversion on the GPU: the gradient converts back.
  for (DType dtype : {kFloat32, kFloat16, kBFloat16}) {
    CAPTURE(dtype);
    const Tensor converted_leaf = gpu_leaf(x);
    const Tensor converted = converted_leaf.to(dtype);
    CHECK(converted.device() == kGpu);
    converted.backward(upstream.to(dtype).to(kGpu));
    CHECK(converted_leaf.grad().dtype() == kFloat64);
    CHECK_ALLCLOSE(converted_leaf.grad(), upstream.to(dtype).to(kFloat64), 0.0, 0.0);
  }

  // to() onto the device a tensor is already on is the tensor itself.
  const Tensor on_gpu = x.to(kGpu);
  CHECK(on_gpu.to(kGpu).is_same(on_gpu));
  CHECK(on_gpu.contiguous().is_same(on_gpu));
  CHECK(!on_gpu.clone().is_same(on_gpu));
}

TEST_CASE("double backward on the GPU: views and copies, gradgradcheck in float64" * doctest::skip(!cuda_is_available())) {
  manual_seed(404);
  const Tensor x = randn({4, 6, 5}, TensorOptions(kFloat64).device(kGpu)).requires_grad_();
  for (const auto& [name, view] : kViews) {
    INFO(name);
    const Tensor v = randn(view(x.detach()).sizes(), TensorOptions(kFloat64).device(kGpu)).requires_grad_();
    const Tensor g = autograd::grad({view(x)}, {x}, {v}, std::nullopt, /*create_graph=*/true)[0];
    CHECK(g.device() == kGpu);
    CHECK(g.requires_grad());
    CHECK_GRADGRADCHECK_OPTS([&view = view](const tensor_list& t) { return view(t[0]) * view(t[0]); },
                             tensor_list{x}, tensor_list{v}, GradcheckOptions{});
  }
  // The gradient of a move between devices moves back through a recorded conversion.
  const Tensor small = randn({3, 4}, TensorOptions(kFloat64).device(kGpu)).requires_grad_();
  CHECK_GRADGRADCHECK([](const tensor_list& t) { return t[0].cpu() * t[0].cpu(); }, tensor_list{small});
  const Tensor host = randn({3, 4}, kFloat64).requires_grad_();
  CHECK_GRADGRADCHECK([](const tensor_list& t) { return t[0].cuda() * t[0].cuda(); }, tensor_list{host});
}
