// Lesson: fusing ops, and what it saves.
//
// The tutorial ends its custom-op chapter with two fused ops, FusedLayerNormGELU and
// FusedSoftmaxDropout, and the claim that fusing is faster because it "reduces memory
// access". This program checks the claim on minigrad's fused ops, each against its
// composite twin: the same math written as primitive ops (mean, subtraction, rsqrt, gelu,
// softmax, a dropout mask multiplied in), which the tape differentiates op by op.
//
//   fused_ops            on the GPU where one is present, else on the CPU
//   fused_ops cpu        on the CPU
//
// For each pair it prints
//   - that they compute the same thing: the largest difference of the outputs and of
//     every gradient (and for dropout, that both dropped the same elements);
//   - the time of forward + backward, median of several runs;
//   - the memory: the peak of live bytes allocated during forward + backward, and the sum of
//     all bytes allocated. Every allocated byte is written once and read at least once, so
//     twice the sum is a floor on the memory traffic of the intermediates: what fusing saves.
//
// Why a fused op moves less: a composite of k elementwise and row ops reads and writes a
// tensor-sized intermediate between each pair, and the tape keeps many of them for the
// backward. The fused forward reads x and writes y; its backward reads x and the incoming
// gradient and writes the input's gradient: 5 tensor-sized transfers for the pass, the
// fewest there are. (The backward needs the softmax; softmax_dropout recomputes it from x
// and a log-sum-exp per row rather than writing it in the forward and reading it back.)
//
// The tutorial's LayerNorm is not the standard one. It divides by std + eps, where std is
// the unbiased standard deviation (dividing by n - 1), and eps = 1e-12. The standard
// LayerNorm (PyTorch's, and minigrad's layer_norm) divides by sqrt(var + eps), var the
// biased variance (dividing by n), eps = 1e-5. Two differences follow, printed below:
//   - every output is smaller by sqrt((n - 1) / n): 0.05% at n = 1024, and for n = 2, 29%;
//   - for a row that is nearly constant (variance near 0, as a dead feature gives), the
//     tutorial's form divides the noise by its own tiny std and blows it up to unit size;
//     eps inside the sqrt bounds the output by |x - mean| / sqrt(eps).
//
// The program exits non-zero if a fused op and its twin disagree.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <fmt/core.h>

#include <minigrad/minigrad.h>

#include "samples/side_by_side.h"

using namespace minigrad;
using namespace minigrad::samples;

namespace {

// ---- the tutorial's LayerNorm against the standard one ----
void tutorial_layer_norm_differs() {
  fmt::print("The tutorial's LayerNorm, (x - mean) / (std + 1e-12) with the unbiased std, against layer_norm:\n");
  for (int64_t n : {2, 1024}) {
    const Tensor x = randn({1, n}, kFloat64);
    const Tensor tutorial = (x - mean(x, {-1}, true)) / (minigrad::std(x, {-1}, 1.0, true) + 1e-12);
    const Tensor standard = layer_norm(x, {n});
    fmt::print("  n = {:4}: tutorial / standard = {:.5f} (sqrt((n - 1) / n) = {:.5f})\n", n,
               (tutorial / standard).mean().item().toDouble(), std::sqrt((n - 1.0) / n));
  }
  // A nearly constant row: 1 plus noise of size 1e-6.
  const Tensor flat = 1.0 + 1e-6 * randn({1, 1024}, kFloat64);
  const Tensor tutorial = (flat - mean(flat, {-1}, true)) / (minigrad::std(flat, {-1}, 1.0, true) + 1e-12);
  fmt::print("  a nearly constant row (noise 1e-6): largest output {:.3f} (tutorial) vs {:.5f} (layer_norm)\n\n",
             max(abs(tutorial)).item().toDouble(), max(abs(layer_norm(flat, {1024}))).item().toDouble());
}

// ---- LayerNorm + GELU ----
bool layer_norm_gelu_lesson(Device device, DType dtype, int64_t rows, int64_t hidden, double tolerance) {
  fmt::print("LayerNorm + GELU, [{}, {}] {} on {}:\n", rows, hidden, dtype_name(dtype), device.str());
  const TensorOptions options = TensorOptions(dtype).device(device);
  Tensor x = (3.0 * randn({rows, hidden}, options) + 0.5).detach().requires_grad_();
  Tensor weight = (1.0 + 0.1 * randn({hidden}, options)).detach().requires_grad_();
  Tensor bias = (0.1 * randn({hidden}, options)).detach().requires_grad_();
  const Tensor grad = randn({rows, hidden}, options);

  auto gradients = [&](const std::function<Tensor()>& f) {
    for (Tensor* leaf : {&x, &weight, &bias}) leaf->mutable_grad() = Tensor();  // gradients written fresh
    const Tensor y = f();
    y.backward(grad);
    return tensor_list{y.detach(), x.grad(), weight.grad(), bias.grad()};
  };
  auto fused = [&] { return layer_norm_gelu(x, {hidden}, weight, bias); };
  auto twin = [&] { return composite::layer_norm_gelu(x, {hidden}, weight, bias); };
  const tensor_list f = gradients(fused), t = gradients(twin);
  bool ok = agree("output", t[0], f[0], tolerance);
  ok = agree("grad x", t[1], f[1], tolerance) && ok;
  ok = agree("grad weight", t[2], f[2], tolerance * rows) && ok;
  ok = agree("grad bias", t[3], f[3], tolerance * rows) && ok;

  const Measured twin_m = measure(device, [&] { gradients(twin); });
  const Measured fused_m = measure(device, [&] { gradients(fused); });
  print_side_by_side("", twin_m, fused_m);
  fmt::print("\n");
  return ok;
}

// ---- softmax + dropout ----
bool softmax_dropout_lesson(Device device, DType dtype, const Shape& shape, double tolerance) {
  fmt::print("softmax + dropout (p = 0.1, causal), {} {} on {}:\n", shape_str(shape), dtype_name(dtype),
             device.str());
  const TensorOptions options = TensorOptions(dtype).device(device);
  Tensor x = (2.0 * randn(shape, options)).detach().requires_grad_();
  const Tensor grad = randn(shape, options);
  constexpr double kP = 0.1;
  // Two generators in the same state draw the same mask: the fused op draws it inside its
  // kernel (and again in its backward, from the same seed and offset: it is never stored),
  // the twin as a tensor it multiplies in.
  Generator fused_generator(2024), twin_generator(2024);

  auto gradients = [&](const std::function<Tensor()>& f) {
    x.mutable_grad() = Tensor();
    const Tensor y = f();
    y.backward(grad);
    return tensor_list{y.detach(), x.grad()};
  };
  auto fused = [&] {
    return softmax_dropout(x, -1, kP, /*training=*/true, std::nullopt, /*is_causal=*/true, std::nullopt,
                           &fused_generator);
  };
  auto twin = [&] {
    return composite::softmax_dropout(x, -1, kP, /*training=*/true, std::nullopt, /*is_causal=*/true, std::nullopt,
                                      &twin_generator);
  };
  const tensor_list f = gradients(fused), t = gradients(twin);
  const bool same_mask = equal(eq(f[0], 0.0), eq(t[0], 0.0));
  fmt::print("  {:<32} {}\n", "the same elements dropped", same_mask ? "yes" : "NO");
  bool ok = same_mask;
  ok = agree("output", t[0], f[0], tolerance) && ok;
  ok = agree("grad x", t[1], f[1], tolerance) && ok;

  const Measured twin_m = measure(device, [&] { gradients(twin); });
  const Measured fused_m = measure(device, [&] { gradients(fused); });
  print_side_by_side("", twin_m, fused_m);
  fmt::print("  The tutorial's version saves input, softmax and mask for the backward (three tensors);\n"
             "  the fused op saves the input and one log-sum-exp per row, computes the softmax again\n"
             "  from them and draws the mask again from its seed.\n\n");
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  Device device = cuda_is_available() ? Device::cuda() : kCPU;
  if (argc > 1 && std::strcmp(argv[1], "cpu") == 0) device = kCPU;
  manual_seed(0);
  tutorial_layer_norm_differs();
  bool ok;
  if (device.is_cuda()) {
    // The reference shapes of the benchmarks, in bf16 as a model trains: the twin's bf16
    // intermediates round at every op, so the two agree to bf16's precision, not better.
    ok = layer_norm_gelu_lesson(device, kBFloat16, 16384, 4096, 0.07);
    ok = softmax_dropout_lesson(device, kBFloat16, {4, 16, 1024, 1024}, 0.02) && ok;
  } else {
    ok = layer_norm_gelu_lesson(device, kFloat32, 2048, 1024, 2e-4);
    ok = softmax_dropout_lesson(device, kFloat32, {4, 4, 256, 256}, 1e-5) && ok;
  }
  if (!ok) {
    fmt::print("FAILED: a fused op and its twin disagree\n");
    return 1;
  }
  return 0;
}
