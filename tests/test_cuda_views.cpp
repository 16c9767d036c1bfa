// Views and copies on the GPU: a view is metadata over the same storage on any device; the
// backward of slice and select (SliceBackward/SelectBackward: zeros + a strided copy), of
// expand (sum_to) and of the copies (to(), clone(), contiguous()) run on the GPU and agree
// with the CPU's; gradgradcheck in float64 on the GPU (gradcheck of each view runs from the
// op table, tests/test_cuda_op_table.cpp).
#include <functional>
#include <optional>
#include <string>
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

// ---- more views and joins, and the creation functions, on the GPU ----

namespace {

using JoinFn = std::function<Tensor(const tensor_list&)>;

// The new views and joins, each of three [4, 6, 5] tensors (the second and third read
// through a transpose and a slice on the GPU, so the copies see strided inputs).
const std::vector<std::pair<std::string, JoinFn>> kJoins = {
    {"narrow", [](const tensor_list& t) { return t[0].narrow(1, 2, 3); }},
    {"flatten", [](const tensor_list& t) { return t[0].flatten(1); }},
    {"flatten of a transpose (a copy)", [](const tensor_list& t) { return t[1].flatten(0, 1); }},
    {"unflatten", [](const tensor_list& t) { return t[0].unflatten(1, {2, 3}); }},
    {"movedim", [](const tensor_list& t) { return t[0].movedim({0, 2}, {2, 0}); }},
    {"swapaxes", [](const tensor_list& t) { return t[1].swapaxes(0, 2); }},
    {"mT", [](const tensor_list& t) { return t[0].mT(); }},
    {"chunk + stack", [](const tensor_list& t) { return stack(t[1].chunk(3, 1), 0); }},
    {"split + cat", [](const tensor_list& t) {
       const tensor_list p = t[2].split({1, 3, 2}, 1);
       return cat({p[2], p[0], p[1]}, 1);
     }},
    {"unbind + stack", [](const tensor_list& t) { return stack(t[1].unbind(2), 1); }},
    {"cat", [](const tensor_list& t) { return cat({t[0], t[1], t[2]}, 2); }},
    {"cat, legacy empty", [](const tensor_list& t) {
       return cat({zeros({0}, TensorOptions(t[0].dtype()).device(t[0].device())), t[0].flatten()}, 0);
     }},
    {"stack", [](const tensor_list& t) { return stack({t[0], t[2], t[1]}, -1); }},
    {"repeat", [](const tensor_list& t) { return t[1].narrow(0, 0, 2).repeat({2, 1, 3, 1}); }},
    {"flip", [](const tensor_list& t) { return t[1].flip({0, 2}); }},
    {"tril", [](const tensor_list& t) { return t[2].tril(-1); }},
    {"triu", [](const tensor_list& t) { return t[1].triu(2); }},
};

// Three [4, 6, 5] float64 leaves on `device`, the same values on either: drawn on the CPU,
// moved, then read on the device as they are, through a transpose and through a slice.
tensor_list join_inputs(Device device) {
  manual_seed(410);
  const Tensor a = randn({4, 6, 5}, kFloat64).to(device);
  const Tensor b = randn({5, 6, 4}, kFloat64).to(device).transpose(0, 2);
  const Tensor c = randn({4, 12, 5}, kFloat64).to(device).slice(1, 0, 12, 2);
  return {a.detach().requires_grad_(), b.detach().requires_grad_(), c.detach().requires_grad_()};
}

}  // namespace

TEST_CASE("the new views and joins on the GPU give the CPU's values and gradients" *
          doctest::skip(!cuda_is_available())) {
  for (const auto& [name, fn] : kJoins) {
    INFO(name);
    const tensor_list cpu = join_inputs(kCPU);
    const tensor_list gpu = join_inputs(kGpu);
    const Tensor cpu_out = fn(cpu);
    const Tensor gpu_out = fn(gpu);
    CHECK(gpu_out.device() == kGpu);
    CHECK_ALLCLOSE(gpu_out, cpu_out, 0.0, 0.0);
    const Tensor upstream = randn(cpu_out.sizes(), kFloat64);
    cpu_out.backward(upstream);
    gpu_out.backward(upstream.to(kGpu));
    for (size_t i = 0; i < cpu.size(); ++i) {
      CAPTURE(i);
      REQUIRE(gpu[i].grad().defined() == cpu[i].grad().defined());
      if (!cpu[i].grad().defined()) continue;
      CHECK(gpu[i].grad().device() == kGpu);
      CHECK_ALLCLOSE(gpu[i].grad(), cpu[i].grad(), 0.0, 1e-12);
    }
  }
  // Integer and bool tensors through the copies and the masks.
  const Tensor ints = arange(0.0, 12.0, 1.0, TensorOptions(kInt64).device(kGpu)).view({3, 4});
  CHECK(cat({ints, ints.flip({1})}, 0).cpu().to_vector<int64_t>() ==
        cat({ints.cpu(), ints.cpu().flip({1})}, 0).to_vector<int64_t>());
  CHECK(gt(ints, 4.0).triu(1).cpu().to_vector<bool>() == gt(ints.cpu(), 4.0).triu(1).to_vector<bool>());
  CHECK(ints.repeat({2, 1}).tril().cpu().to_vector<int64_t>() == ints.cpu().repeat({2, 1}).tril().to_vector<int64_t>());
  // A CPU tensor and a GPU tensor do not join.
  CHECK_THROWS_CONTAINING(cat({ints.cpu(), ints}, 0),
                          "cat: expected all tensors to be on cpu (the device of the tensor at position 0), but the "
                          "tensor at position 1 is on cuda:0");
  CHECK_THROWS_CONTAINING(stack({ints, ints.cpu()}, 0), "stack: expected all tensors to be on cuda:0");
}

TEST_CASE("gradcheck and gradgradcheck on the GPU: the new views and joins in float64" *
          doctest::skip(!cuda_is_available())) {
  const tensor_list inputs = join_inputs(kGpu);
  GradcheckOptions options;
  options.allow_unused = true;  // most cases read one or two of the three inputs
  for (const auto& [name, fn] : kJoins) {
    INFO(name);
    CHECK_GRADCHECK_OPTS(fn, inputs, options);
    const Tensor v = randn(fn(inputs).sizes(), TensorOptions(kFloat64).device(kGpu)).requires_grad_();
    CHECK_GRADGRADCHECK_OPTS([&fn = fn](const tensor_list& t) { return fn(t) * fn(t); }, inputs, tensor_list{v},
                             options);
  }
}

TEST_CASE("creation on the GPU: linspace, eye, randint, rand_like, randn_like as on the CPU" *
          doctest::skip(!cuda_is_available())) {
  const TensorOptions on_gpu = TensorOptions(kFloat64).device(kGpu);
  const Tensor l = linspace(-2.0, 3.0, 11, on_gpu);
  CHECK(l.device() == kGpu);
  CHECK_ALLCLOSE(l, linspace(-2.0, 3.0, 11, kFloat64), 0.0, 0.0);
  const Tensor e = eye(3, 5, on_gpu);
  CHECK(e.device() == kGpu);
  CHECK_ALLCLOSE(e, eye(3, 5, kFloat64), 0.0, 0.0);

  // randint: the same integers on either device for the same generator state.
  for (const Shape& sizes : {Shape{1000}, Shape{7, 13}, Shape{0, 3}}) {
    CAPTURE(shape_str(sizes));
    manual_seed(411);
    const Tensor gpu = randint(-50, 1000, sizes, TensorOptions(kInt64).device(kGpu));
    manual_seed(411);
    const Tensor cpu = randint(-50, 1000, sizes);
    CHECK(gpu.device() == kGpu);
    CHECK(gpu.dtype() == kInt64);
    CHECK(gpu.cpu().to_vector<int64_t>() == cpu.to_vector<int64_t>());
  }
  // Near the largest allowed range, where u * range uses every bit of the double.
  const int64_t half = int64_t(1) << 52;  // a range of 2^53 - 3
  manual_seed(412);
  const Tensor wide_gpu = randint(-half, half - 3, {4096}, TensorOptions(kInt64).device(kGpu));
  manual_seed(412);
  CHECK(wide_gpu.cpu().to_vector<int64_t>() == randint(-half, half - 3, {4096}).to_vector<int64_t>());

  // rand_like and randn_like draw on the argument's device.
  const Tensor x = zeros({64, 33}, on_gpu).t();
  manual_seed(413);
  const Tensor u = rand_like(x);
  const Tensor n = randn_like(x);
  CHECK(u.device() == kGpu);
  CHECK(n.device() == kGpu);
  CHECK(u.sizes() == Shape{33, 64});
  manual_seed(413);
  CHECK_ALLCLOSE(u, rand({33, 64}, kFloat64), 0.0, 0.0);  // rand: the same bits on either device
  CHECK_ALLCLOSE(n, randn({33, 64}, kFloat64), 1e-12, 1e-12);
}

TEST_CASE("from_blob over device memory: writes reach it, the deleter runs once" *
          doctest::skip(!cuda_is_available())) {
  // Device memory owned by another tensor, which the deleter releases.
  manual_seed(414);
  Tensor owner = randn({6}, TensorOptions(kFloat32).device(kGpu));
  const std::vector<float> values = owner.cpu().to_vector<float>();
  void* memory = owner.raw_data();
  int calls = 0;
  {
    const Tensor t = from_blob(memory, {2, 3}, [&calls, keep = owner](void*) mutable {
      ++calls;
      keep = Tensor();
    }, TensorOptions(kFloat32).device(kGpu));
    owner = Tensor();  // the blob's deleter holds the memory now
    CHECK(t.device() == kGpu);
    CHECK(t.cpu().to_vector<float>() == values);
    Tensor column = t.select(1, 2);
    column.mul_(2.0);
    CHECK(t.cpu().to_vector<float>()[5] == values[5] * 2.0f);
    CHECK(calls == 0);
  }
  CHECK(calls == 1);
}
