// Lesson: checking a backward with finite differences.
//
// A backward is hand-written calculus, and calculus slips (a forgotten product-rule term, a
// wrong sign) give gradients that look plausible and train badly. gradcheck compares the
// backward against the definition of the derivative,
//   df/dx_i ~ (f(x + eps e_i) - f(x - eps e_i)) / (2 eps),
// for every input element and every output element, in float64 so rounding stays far
// below the differences being measured. We check the library's relu and gelu, an op of our
// own, an op with a deliberately wrong backward (gradcheck must catch it), and then the
// cheaper random-projection mode for inputs too large for the full Jacobian.
//
// The program exits non-zero if a correct op fails or the wrong one passes, so it cannot
// silently stop testing what it claims to.
#include <string>

#include <fmt/core.h>

#include <minigrad/minigrad.h>

using namespace minigrad;

namespace {

// softplus(x) scaled by a weight: f(x, w) = w * log(1 + exp(x)). Two inputs, so gradcheck
// checks one gradient per input:
//   df/dx = w * sigmoid(x),   df/dw = log(1 + exp(x)).
struct ScaledSoftplus : Function<ScaledSoftplus> {
  static Tensor forward(Context& ctx, const Tensor& x, const Tensor& w) {
    ctx.save_for_backward({x, w});
    return w * log(1.0 + exp(x));
  }

  static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
    const tensor_list saved = ctx.saved_tensors();
    const Tensor& x = saved[0];
    const Tensor& w = saved[1];
    const Tensor& grad = grad_outputs[0];
    // needs_input_grad skips the work for an input nobody wants a gradient for.
    Tensor grad_x = ctx.needs_input_grad(0) ? grad * w * sigmoid(x) : Tensor();
    Tensor grad_w = ctx.needs_input_grad(1) ? grad * log(1.0 + exp(x)) : Tensor();
    return {grad_x, grad_w};
  }
};

// SiLU, silu(x) = x * sigmoid(x), with a classic mistake in backward: it differentiates
// the factor x and treats sigmoid(x) as a constant, forgetting the product rule. The right
// derivative is
//   sigmoid(x) * (1 + x * (1 - sigmoid(x))),
// but this backward returns just sigmoid(x): close for x near 0, wrong elsewhere.
struct SiLUForgotProductRule : Function<SiLUForgotProductRule> {
  static Tensor forward(Context& ctx, const Tensor& x) {
    ctx.save_for_backward({x});
    return x * sigmoid(x);
  }

  static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
    const Tensor x = ctx.saved_tensors()[0];
    return {grad_outputs[0] * sigmoid(x)};
  }
};

Tensor random_input(const Shape& shape) { return randn(shape, dtype(kFloat64)).requires_grad_(); }

// Prints the report and says whether it came out as expected.
bool report(const std::string& what, const GradcheckReport& r, bool should_pass) {
  const bool as_expected = r.passed == should_pass;
  fmt::print("{}\n  {}\n", what, r.summary());
  if (!as_expected)
    fmt::print("  UNEXPECTED: this check should have {}\n", should_pass ? "passed" : "failed");
  return as_expected;
}

}  // namespace

int main() {
  manual_seed(2024);
  bool all_as_expected = true;

  fmt::print("== Correct backwards ==\n");
  {
    // relu has a kink at 0, where it has no derivative: a finite difference straddling it
    // measures the average slope 0.5. Keeping every input at least 0.1 away from 0 (far
    // more than eps = 1e-6) checks the derivative where it exists.
    Tensor x = randn({4, 5}, dtype(kFloat64));
    x = where(x >= 0.0, x + 0.1, x - 0.1).requires_grad_();
    all_as_expected &= report("relu (library), inputs kept away from 0:",
                              gradcheck([](const tensor_list& in) { return relu(in[0]); }, {x}), true);

    all_as_expected &= report("gelu (library):",
                              gradcheck([](const tensor_list& in) { return gelu(in[0]); }, {random_input({4, 5})}),
                              true);

    all_as_expected &= report(
        "ScaledSoftplus (ours, two inputs: both gradients are checked):",
        gradcheck([](const tensor_list& in) { return ScaledSoftplus::apply(in[0], in[1]); },
                  {random_input({3, 4}), random_input({3, 4})}),
        true);
  }

  fmt::print("\n== Why relu's inputs were kept away from 0 ==\n");
  {
    Tensor at_kink = from_vector<double>({0.0, 1e-7}, {2}).requires_grad_();
    all_as_expected &= report("relu at x = 0 and x = 1e-7 (a false alarm, expected to fail):",
                              gradcheck([](const tensor_list& in) { return relu(in[0]); }, {at_kink}), false);
    fmt::print("  Within eps of the kink the difference quotient sees both slopes; the op is fine.\n");
  }

  fmt::print("\n== A wrong backward is caught ==\n");
  {
    Tensor x = random_input({3, 4});
    const GradcheckReport r =
        gradcheck([](const tensor_list& in) { return SiLUForgotProductRule::apply(in[0]); }, {x});
    all_as_expected &= report("SiLU whose backward forgot the product rule:", r, false);
    if (r.worst_input >= 0 && r.worst_element >= 0) {
      const double x_worst = x.detach().flatten().to_vector<double>()[static_cast<size_t>(r.worst_element)];
      fmt::print("  worst entry: input {}, element {} (x = {:.6f}), output element {}\n", r.worst_input,
                 r.worst_element, x_worst, r.worst_output);
      fmt::print("  backward says {:.6f}, finite differences say {:.6f}\n", r.worst_analytical,
                 r.worst_numerical);
      fmt::print("  The missing term x * sigmoid(x) * (1 - sigmoid(x)) is largest where |x| is about 1.5.\n");
    }
  }

  fmt::print("\n== Random projections for large inputs ==\n");
  {
    // The full Jacobian of a 256 x 256 elementwise op has 65536^2 entries and would take
    // 65536 backward passes. A projection compares one number, v^T J u, for random v and
    // u: one backward and two forwards. A wrong gradient almost surely changes it.
    GradcheckOptions projections;
    projections.random_projections = 8;
    const Shape large = {256, 256};

    all_as_expected &= report("gelu (library), 256 x 256, 8 projections:",
                              gradcheck([](const tensor_list& in) { return gelu(in[0]); }, {random_input(large)},
                                        projections),
                              true);
    all_as_expected &= report(
        "ScaledSoftplus (ours), 256 x 256, 8 projections per input:",
        gradcheck([](const tensor_list& in) { return ScaledSoftplus::apply(in[0], in[1]); },
                  {random_input(large), random_input(large)}, projections),
        true);
    all_as_expected &= report(
        "SiLU with the wrong backward, 256 x 256, 8 projections (must fail):",
        gradcheck([](const tensor_list& in) { return SiLUForgotProductRule::apply(in[0]); }, {random_input(large)},
                  projections),
        false);
  }

  if (!all_as_expected) {
    fmt::print("\nFAILED: a gradient check did not come out as expected\n");
    return 1;
  }
  fmt::print("\nEvery check came out as expected: correct ops pass, the wrong one is caught.\n");
  return 0;
}
