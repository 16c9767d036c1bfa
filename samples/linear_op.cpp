// Lesson: a C++ op with a hand-written backward, and how gradcheck tells a right one from a
// wrong one.
//
// The tutorial's C++ extension computes input x weight and gives two backward functions:
//   backward_input(grad_output, weight)  = grad_output x weight^T
//   backward_weight(grad_output, input)  = grad_output^T x input
// Here that op is a minigrad Function, exactly as written. The second formula is the
// gradient of PyTorch's linear layer, whose weight is [out, in] and whose product is
// input x weight^T; for input x weight, with the weight [in, out], the gradient is
// input^T x grad_output. So the op as written fails: with a weight that is not square the
// engine refuses a gradient of the wrong shape, and with a square one gradcheck finds the
// values transposed. The fixed Function passes, and so does minigrad's linear, which keeps
// PyTorch's layout (and so the tutorial's formula).
//
// Then one layer timed side by side, each two ways: linear (the two products and a sum by
// hand, in ops/linear.cpp) against the composite matmul + add that the tape differentiates
// op by op; and the layer with its activation, linear_gelu (on the GPU the bias and GELU
// ride in cuBLASLt's GEMM epilogue, and the bias gradient is summed in the gelu' pass)
// against matmul + add + gelu.
//
//   linear_op            on the GPU where one is present, else on the CPU
//   linear_op cpu        on the CPU
//
// The program exits non-zero if a check it expects to pass fails, or one it expects to
// fail passes.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <fmt/core.h>

#include <minigrad/minigrad.h>

#include "samples/device.h"

using namespace minigrad;
using minigrad::samples::synchronize;

namespace {

// The tutorial's op: y = x W with W [in, out], its backward_weight as the tutorial wrote it.
struct TutorialMatmul : Function<TutorialMatmul> {
  static Tensor forward(Context& ctx, const Tensor& x, const Tensor& w) {
    ctx.save_for_backward({x, w});
    return matmul(x, w);
  }
  static tensor_list backward(Context& ctx, tensor_list grads) {
    const tensor_list saved = ctx.saved_tensors();
    const Tensor& x = saved[0];
    const Tensor& w = saved[1];
    const Tensor backward_input = matmul(grads[0], w.t());
    const Tensor backward_weight = matmul(grads[0].t(), x);  // [out, in]: the weight is [in, out]
    return {backward_input, backward_weight};
  }
};

// The same op with backward_weight = x^T x dy, and only the gradients asked for.
struct FixedMatmul : Function<FixedMatmul> {
  static Tensor forward(Context& ctx, const Tensor& x, const Tensor& w) {
    ctx.save_for_backward({x, w});
    return matmul(x, w);
  }
  static tensor_list backward(Context& ctx, tensor_list grads) {
    const tensor_list saved = ctx.saved_tensors();
    Tensor dx, dw;
    if (ctx.needs_input_grad(0)) dx = matmul(grads[0], saved[1].t());
    if (ctx.needs_input_grad(1)) dw = matmul(saved[0].t(), grads[0]);
    return {dx, dw};
  }
};

bool expect(bool ok, bool expected, const std::string& what) {
  fmt::print("  {:<58} {}{}\n", what, ok ? "passes" : "FAILS", ok == expected ? "" : "   <- not what was expected");
  return ok == expected;
}

// Median milliseconds of forward + backward, after warm-up.
double time_ms(Device device, const std::function<void()>& step) {
  for (int i = 0; i < 3; ++i) step();
  std::vector<double> ms;
  for (int i = 0; i < 15; ++i) {
    synchronize(device);
    const auto start = std::chrono::steady_clock::now();
    step();
    synchronize(device);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const bool cpu_only = argc > 1 && std::strcmp(argv[1], "cpu") == 0;
  const Device device = cuda_is_available() && !cpu_only ? Device::cuda() : kCPU;
  manual_seed(42);
  bool ok = true;

  fmt::print("The tutorial's backward_weight, gradcheck in float64:\n");
  const Tensor x = randn({4, 3}, kFloat64).requires_grad_();
  const Tensor wide = randn({3, 5}, kFloat64).requires_grad_();
  const Tensor square = randn({3, 3}, kFloat64).requires_grad_();
  bool refused = false;
  try {
    TutorialMatmul::apply(x, wide).sum().backward();
  } catch (const Error& e) {
    refused = true;
    fmt::print("  weight [3, 5]: the engine refuses the gradient:\n    {}\n", e.what());
  }
  ok = expect(!refused, false, "the tutorial's op, weight [3, 5]") && ok;
  const auto tutorial = [](const tensor_list& t) { return TutorialMatmul::apply(t[0], t[1]); };
  const auto fixed = [](const tensor_list& t) { return FixedMatmul::apply(t[0], t[1]); };
  ok = expect(gradcheck(tutorial, {x, square}).passed, false, "the tutorial's op, weight [3, 3], gradcheck") && ok;
  ok = expect(gradcheck(fixed, {x, wide}).passed, true, "backward_weight = x^T dy, weight [3, 5], gradcheck") && ok;
  // linear's weight is [out, in]: its backward_weight is the tutorial's dy^T x.
  const Tensor w_out_in = randn({5, 3}, kFloat64).requires_grad_();
  const Tensor b = randn({5}, kFloat64).requires_grad_();
  ok = expect(gradcheck([](const tensor_list& t) { return linear(t[0], t[1], t[2]); }, {x, w_out_in, b}).passed,
              true, "linear, weight [5, 3] (PyTorch's layout), gradcheck") &&
       ok;

  // The GPU gets a layer of a small transformer's size; the CPU one that takes a second.
  const bool gpu = device.is_cuda();
  const int64_t batch = gpu ? 8192 : 512, in = gpu ? 1024 : 256, out = gpu ? 4096 : 1024;
  fmt::print("\nOne layer [{}, {}] -> {} in float32 on {}, forward + backward, median ms:\n", batch, in, out,
             device.str());
  const TensorOptions options = TensorOptions(kFloat32).device(device);
  const Tensor input = randn({batch, in}, options).requires_grad_();
  const Tensor weight = (randn({out, in}, options) * 0.03).detach().requires_grad_();
  const Tensor bias = randn({out}, options).requires_grad_();
  const Tensor grad = randn({batch, out}, options);
  auto run = [&](const std::function<Tensor()>& layer) {
    return [&, layer] {
      for (const Tensor* leaf : {&input, &weight, &bias}) Tensor(*leaf).mutable_grad() = Tensor();
      layer().backward(grad);
    };
  };
  const double linear_ms = time_ms(device, run([&] { return linear(input, weight, bias); }));
  const double composite_ms = time_ms(device, run([&] { return composite::linear(input, weight, bias); }));
  constexpr auto kTanh = GeluApproximation::Tanh;
  const double linear_gelu_ms = time_ms(device, run([&] { return linear_gelu(input, weight, bias, kTanh); }));
  const double composite_gelu_ms =
      time_ms(device, run([&] { return composite::linear_gelu(input, weight, bias, kTanh); }));
  fmt::print("  {:<46} {:8.3f}\n  {:<46} {:8.3f}\n", "linear", linear_ms, "composite::linear (matmul + add)",
             composite_ms);
  fmt::print("  {:<46} {:8.3f}\n  {:<46} {:8.3f}\n", "linear_gelu (tanh)", linear_gelu_ms,
             "composite::linear_gelu (matmul + add + gelu)", composite_gelu_ms);
  fmt::print("  Each is one GEMM forward and two backward, and the GEMMs are most of the time: what a\n"
             "  fused layer saves is the passes around them (the bias, the activation, their gradients).\n");
  return ok ? 0 : 1;
}
