// Lesson: the common pitfalls of custom ops, and how minigrad answers each one.
//
// The tutorial ends with three pitfalls: memory layout (a transposed tensor is not
// contiguous), device mismatch (a tensor where the kernel does not expect it), and gradient
// leaks (a backward that lacks what it needs). A fourth belongs with them: changing a tensor
// in place after an op saved it for backward. In minigrad the first simply works, and the
// others are loud errors that name the op and say what to do, instead of wrong numbers.
//
// The program exits non-zero if any of the expected errors does not happen.
#include <string>
#include <vector>

#include <fmt/core.h>

#include <minigrad/minigrad.h>

using namespace minigrad;

namespace {

// Runs `attempt`, which should throw minigrad::Error, and prints the error's message.
// Returns whether it did throw.
template <typename F>
bool expect_error(const std::string& what, F attempt) {
  try {
    attempt();
  } catch (const Error& e) {
    fmt::print("{}\n  -> minigrad::Error: {}\n", what, e.what());
    return true;
  }
  fmt::print("{}\n  -> UNEXPECTED: no error\n", what);
  return false;
}

// The tutorial's BadOp: forward forgets to save x, and backward needs it anyway.
struct BadOp : Function<BadOp> {
  static Tensor forward(Context&, const Tensor& x) { return pow(x, 2.0); }
  static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
    const Tensor x = ctx.saved_tensors()[0];
    return {grad_outputs[0] * x * 2.0};
  }
};

// The tutorial's BadOp in its other form: backward gives up and returns no gradient. PyTorch
// would quietly treat that as zero; minigrad refuses, since x asked for a gradient.
struct NoGradientOp : Function<NoGradientOp> {
  static Tensor forward(Context&, const Tensor& x) { return pow(x, 2.0); }
  static tensor_list backward(Context&, tensor_list) { return {Tensor()}; }
};

// The tutorial's GoodOp: save in forward what backward will need.
struct GoodOp : Function<GoodOp> {
  static Tensor forward(Context& ctx, const Tensor& x) {
    ctx.save_for_backward({x});
    return pow(x, 2.0);
  }
  static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
    const Tensor x = ctx.saved_tensors()[0];
    return {grad_outputs[0] * x * 2.0};
  }
};

void section(const char* title) { fmt::print("\n== {} ==\n", title); }

void describe_layout(const char* name, const Tensor& t) {
  fmt::print("{}: sizes {}, strides {}, is_contiguous() = {}\n", name, shape_str(t.sizes()), shape_str(t.strides()),
             t.is_contiguous());
}

}  // namespace

int main() {
  manual_seed(7);
  bool all_as_expected = true;

  section("Pitfall 1: memory layout");
  {
    // transpose() makes a view: the same memory read with swapped strides, no copy. A kernel
    // that walks memory in order would read it wrong; minigrad's kernels take strides (or
    // make a contiguous copy first where they need one), so the view needs no care.
    Tensor x = randn({3, 4, 5}, dtype(kFloat64)).requires_grad_();
    Tensor w = randn({3, 2}, dtype(kFloat64)).requires_grad_();
    Tensor x_copy = x.detach().clone().requires_grad_();
    Tensor w_copy = w.detach().clone().requires_grad_();

    Tensor transposed = x.transpose(0, 2);
    Tensor contiguous = x_copy.transpose(0, 2).contiguous();
    describe_layout("x.transpose(0, 2)             ", transposed);
    describe_layout("x.transpose(0, 2).contiguous()", contiguous);

    auto layer = [](const Tensor& in, const Tensor& weight) { return matmul(gelu(in) + relu(in), weight); };
    Tensor out_view = layer(transposed, w);
    Tensor out_copy = layer(contiguous, w_copy);
    out_view.sum().backward();
    out_copy.sum().backward();

    const bool same_output = allclose(out_view, out_copy);
    const bool same_grad_x = allclose(x.grad(), x_copy.grad());
    const bool same_grad_w = allclose(w.grad(), w_copy.grad());
    fmt::print("matmul(gelu(t) + relu(t), w) from the view and from the copy: outputs {}, x.grad {}, w.grad {}\n",
               same_output ? "match" : "DIFFER", same_grad_x ? "match" : "DIFFER", same_grad_w ? "match" : "DIFFER");
    all_as_expected &= same_output && same_grad_x && same_grad_w;
  }

  section("Pitfall 2: dtype and device mismatch");
  {
    // minigrad never promotes silently: mixing float32 and float64 is usually a mistake
    // (a float64 tensor slipping into a float32 model doubles its memory and time).
    Tensor a = ones({3});
    Tensor b = ones({3}, dtype(kFloat64));
    all_as_expected &= expect_error("float32 tensor + float64 tensor:", [&] { add(a, b); });
    fmt::print("The fix is an explicit conversion: a + b.to(kFloat32) = {}\n", a + b.to(kFloat32));

    // Without a CUDA backend (or without a GPU) there is no memory to put the tensor in.
    // Where a GPU is present the move succeeds, and the mismatch shows up one step later,
    // when a CPU tensor meets a GPU tensor in one op.
    Tensor on_gpu;
    try {
      on_gpu = a.to(Device::cuda());
    } catch (const Error& e) {
      fmt::print("a.to(Device::cuda()):\n  -> minigrad::Error: {}\n", e.what());
    }
    if (on_gpu.defined()) {
      fmt::print("a.to(Device::cuda()) worked: this machine has a GPU\n");
      all_as_expected &= expect_error("CPU tensor + CUDA tensor:", [&] { add(a, on_gpu); });
    }
    fmt::print("The tutorial's fix: remember x.device(), move to where the kernel runs, move the result back.\n");
  }

  section("Pitfall 3: gradient leaks");
  {
    Tensor x = tensor({1.f, 2.f, 3.f}, requires_grad());
    all_as_expected &= expect_error("BadOp (forward never saved x, backward asks for it):",
                                    [&] { BadOp::apply(x).sum().backward(); });
    all_as_expected &= expect_error("NoGradientOp (backward returns Tensor() for x, which requires grad):",
                                    [&] { NoGradientOp::apply(x).sum().backward(); });
    GoodOp::apply(x).sum().backward();
    fmt::print("GoodOp saves x in forward: d(x^2)/dx at x = {} is {}\n", x, x.grad());
    const bool good_is_right = x.grad().to_vector<float>() == std::vector<float>{2.f, 4.f, 6.f};
    if (!good_is_right) fmt::print("UNEXPECTED: GoodOp's gradient should be 2x\n");
    all_as_expected &= good_is_right;
  }

  section("Pitfall 4: a saved tensor changed in place");
  {
    // GoodOp saved w to compute its gradient later. Updating w in place before backward
    // (here: an optimizer step taken too early) would make backward use the new w with the
    // old graph. Every in-place write bumps the tensor's version counter, and backward
    // checks that each saved tensor is still at the version it was saved at.
    Tensor w = tensor({0.5f, -1.f, 2.f}, requires_grad());
    Tensor loss = GoodOp::apply(w).sum();
    const uint64_t version_saved = w.version();
    {
      NoGradGuard no_grad;
      w.add_(ones_like(w), -0.1);
    }
    fmt::print("w's version: {} when saved, {} after the in-place step\n", version_saved, w.version());
    all_as_expected &= expect_error("backward after w was changed in place:", [&] { loss.backward(); });

    Tensor w_ok = tensor({0.5f, -1.f, 2.f}, requires_grad());
    Tensor loss_ok = GoodOp::apply(w_ok).sum();
    loss_ok.backward();
    {
      NoGradGuard no_grad;
      w_ok.add_(w_ok.grad(), -0.1);
    }
    fmt::print("In the right order (backward, then step) the gradient was {} and w is now {}\n", w_ok.grad(), w_ok);
  }

  if (!all_as_expected) {
    fmt::print("\nFAILED: a pitfall did not behave as expected\n");
    return 1;
  }
  fmt::print("\nEvery pitfall was either handled or reported clearly.\n");
  return 0;
}
