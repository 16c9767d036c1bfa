// Lesson 1: writing your own differentiable op.
//
// An op joins autograd by deriving from Function<T> and giving two static functions:
//   forward(ctx, inputs...)      computes the output, and keeps in ctx what backward needs;
//   backward(ctx, grad_outputs)  turns the gradient of the output into one per input.
// Function<T>::apply runs forward and records a node on the tape; backward() on a result
// later calls our backward with the gradient flowing in. Here we write ReLU and GELU the
// way the tutorial does, and check them against hand-computed values and against the
// library's own relu() and gelu().
#include <cmath>
#include <vector>

#include <fmt/core.h>

#include <minigrad/minigrad.h>

using namespace minigrad;

namespace {

constexpr double kPi = 3.14159265358979323846;
const double kSqrt2 = std::sqrt(2.0);
const double kSqrt2Pi = std::sqrt(2.0 * kPi);

// relu(x) = max(x, 0). Its derivative is 1 where x > 0 and 0 where x < 0, so backward
// must know the sign of each input element: forward saves the input for it.
struct MyReLU : Function<MyReLU> {
  static Tensor forward(Context& ctx, const Tensor& x) {
    ctx.save_for_backward({x});
    return clamp_min(x, 0.0);
  }

  static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
    const Tensor x = ctx.saved_tensors()[0];
    const Tensor& grad = grad_outputs[0];
    // Pass the gradient through where the input was positive and zero it elsewhere.
    // At exactly x = 0 relu has no derivative; taking 0 there is PyTorch's convention.
    return {where(x > 0.0, grad, zeros_like(grad))};
  }
};

// gelu(x) = x * Phi(x), with Phi the standard normal CDF, written with erf:
//   Phi(x) = (1 + erf(x / sqrt(2))) / 2.
// Product rule: gelu'(x) = Phi(x) + x * phi(x), with phi the normal PDF
//   phi(x) = exp(-x^2 / 2) / sqrt(2 pi).
// Both halves are built from minigrad ops, so this is a "composite" custom op.
struct MyGELU : Function<MyGELU> {
  static Tensor forward(Context& ctx, const Tensor& x) {
    ctx.save_for_backward({x});
    return 0.5 * x * (1.0 + erf(x / kSqrt2));
  }

  static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
    const Tensor x = ctx.saved_tensors()[0];
    const Tensor cdf = 0.5 * (1.0 + erf(x / kSqrt2));
    const Tensor pdf = exp(-(x * x) / 2.0) / kSqrt2Pi;
    return {grad_outputs[0] * (cdf + x * pdf)};
  }
};

// gelu'(x) in plain double arithmetic, element by element: an independent reference.
std::vector<float> gelu_derivative_by_hand(const std::vector<float>& xs) {
  std::vector<float> out;
  for (float xf : xs) {
    const double x = xf;
    const double cdf = 0.5 * (1.0 + std::erf(x / kSqrt2));
    const double pdf = std::exp(-x * x / 2.0) / kSqrt2Pi;
    out.push_back(static_cast<float>(cdf + x * pdf));
  }
  return out;
}

double max_abs_difference(const Tensor& a, const Tensor& b) { return abs(a - b).max().item<double>(); }

}  // namespace

int main() {
  bool ok = true;
  // float32 rounding of a handful of erf/exp evaluations: a few ulps of values near 1.
  const double tolerance = 1e-6;

  fmt::print("== ReLU as a custom Function ==\n");
  Tensor x = tensor({1.f, -2.f, 3.f}, requires_grad());
  Tensor y = MyReLU::apply(x);
  fmt::print("x         = {}\n", x);
  fmt::print("relu(x)   = {}\n", y);
  fmt::print("y was made by '{}': apply() recorded our op on the tape.\n", y.grad_fn()->name());
  y.sum().backward();
  fmt::print("x.grad    = {}\n", x.grad());
  fmt::print("The gradient is 1 where x was positive and 0 where it was negative.\n");
  if (x.grad().to_vector<float>() != std::vector<float>{1.f, 0.f, 1.f}) {
    fmt::print("unexpected: x.grad should be [1, 0, 1]\n");
    ok = false;
  }

  Tensor x_library = x.detach().requires_grad_();
  relu(x_library).sum().backward();
  fmt::print("library relu gives x.grad = {}: our op agrees with the built-in one.\n\n", x_library.grad());
  ok = ok && max_abs_difference(x.grad(), x_library.grad()) == 0.0;

  fmt::print("== GELU as a custom Function ==\n");
  Tensor xg = tensor({1.f, -2.f, 3.f}, requires_grad());
  Tensor yg = MyGELU::apply(xg);
  yg.sum().backward();
  const Tensor by_hand = from_vector(gelu_derivative_by_hand(xg.to_vector<float>()), xg.sizes());
  const double diff_formula = max_abs_difference(xg.grad(), by_hand);
  fmt::print("gelu(x)              = {}\n", yg);
  fmt::print("x.grad from backward = {}\n", xg.grad());
  fmt::print("Phi(x) + x*phi(x)    = {}  (evaluated directly in double)\n", by_hand);
  fmt::print("max |difference|     = {:.3e}\n", diff_formula);
  fmt::print("Backward computes the derivative we derived on paper.\n\n");
  ok = ok && diff_formula <= tolerance;

  Tensor xg_library = xg.detach().requires_grad_();
  Tensor yg_library = gelu(xg_library);
  yg_library.sum().backward();
  const double diff_forward = max_abs_difference(yg, yg_library);
  const double diff_backward = max_abs_difference(xg.grad(), xg_library.grad());
  fmt::print("library gelu(x)      = {}\n", yg_library);
  fmt::print("library x.grad       = {}\n", xg_library.grad());
  fmt::print("max |difference|     = {:.3e} (forward), {:.3e} (gradient)\n", diff_forward, diff_backward);
  fmt::print("The library computes the same formula in one fused kernel per pass (ops/gelu.cpp);\n"
             "ours takes several ops, each a trip over memory. Same answer, different cost.\n");
  ok = ok && diff_forward <= tolerance && diff_backward <= tolerance;

  if (!ok) {
    fmt::print("FAILED: a gradient did not match its reference\n");
    return 1;
  }
  fmt::print("\nAll gradients match.\n");
  return 0;
}
