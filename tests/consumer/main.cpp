// A program outside minigrad's tree: its own op as a Function, checked with gradcheck, and
// (where minigrad has its CUDA backend) its own CUDA kernel as a Function. Exit status 0
// when every check passes.
#include <cstdio>

#include <minigrad/minigrad.h>

using namespace minigrad;

// cube(x) = x^3, d/dx = 3 x^2. Forward saves x; backward is written with public ops, so it
// is recorded too and the op can be differentiated twice.
struct Cube : Function<Cube> {
  static Tensor forward(Context& ctx, const Tensor& x) {
    ctx.save_for_backward({x});
    return x * x * x;
  }
  static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
    const Tensor x = ctx.saved_tensors()[0];
    return {grad_outputs[0] * 3.0 * x * x};
  }
};

#if CONSUMER_WITH_KERNEL
Tensor cube_with_kernel(const Tensor& x);  // cube_kernel.cu
#endif

static bool report(const char* what, bool ok) {
  std::printf("  %-56s %s\n", what, ok ? "ok" : "FAILED");
  return ok;
}

int main() {
  bool ok = true;
  std::printf("minigrad %d.%d.%d, CUDA backend: %s\n", MINIGRAD_VERSION_MAJOR, MINIGRAD_VERSION_MINOR,
              MINIGRAD_VERSION_PATCH, MINIGRAD_WITH_CUDA ? "yes" : "no");
  manual_seed(1);
  const Tensor x = randn({3, 4}, kFloat64);
  auto cube = [](const tensor_list& in) { return Cube::apply(in[0]); };
  ok &= report("Cube: forward equals pow(x, 3)", allclose(Cube::apply(x), pow(x, 3.0)));
  ok &= report("Cube: gradcheck", gradcheck(cube, {x.detach().requires_grad_()}).passed);
  ok &= report("Cube: gradgradcheck", gradgradcheck(cube, {x.detach().requires_grad_()}).passed);
#if CONSUMER_WITH_KERNEL
  if (cuda_is_available()) {
    const Tensor xc = x.cuda();
    ok &= report("cube kernel on the GPU equals Cube on the CPU",
                 allclose(cube_with_kernel(xc).cpu(), Cube::apply(x)));
    auto kernel = [](const tensor_list& in) { return cube_with_kernel(in[0]); };
    ok &= report("cube kernel: gradcheck on the GPU", gradcheck(kernel, {xc.detach().requires_grad_()}).passed);
  } else {
    std::printf("  no GPU here: the CUDA kernel was built, not run\n");
  }
#endif
  return ok ? 0 : 1;
}
