// Experiment: linear_gelu's one-pass gelu' and bias gradient (cuda/gelu_bias_backward.cu) with
// its chunks' rows contiguous and interleaved, against the elementwise gelu_backward alone (the
// same bytes, no sums), bf16, GELU's tanh form, each shape's three runs taking turns. d_pre must
// have gelu_backward's bits in both orders; db differs between them only by the order of its sums.
//
// Why the order might matter: the kernel's grid is one wave of resident blocks, each walking its
// own chunk of rows. Contiguous chunks put the blocks at work at one time in regions of the
// tensors far from each other; interleaved ones (chunk y takes rows y, y + chunks, ...) keep them
// on neighbouring rows, so the grid sweeps memory in address order as the elementwise engine's
// one-shot blocks do.
//
// Not part of the build: the measurement behind RowOrder's choice in docs/perf-notes.md. Build
// (after a CUDA build in build-gpu), or through scripts/gpu-check with EXPERIMENTS=gelu_bias_shapes:
//   nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -I build-gpu/include \
//     -I .deps/root/usr/include -DMINIGRAD_WITH_CUDA=1 bench/experiments/gelu_bias_shapes.cu \
//     build-gpu/libminigrad.a -L .deps/root/usr/lib/x86_64-linux-gnu -lfmt -lcublas -lcublasLt \
//     -o build-gpu/gelu_bias_shapes

// The included file defines the library's entry point, which libminigrad.a defines too.
#define gelu_backward_and_bias_grad experiment_gelu_backward_and_bias_grad
#include "../../cuda/gelu_bias_backward.cu"
#undef gelu_backward_and_bias_grad

#include <cstdio>

#include <minigrad/minigrad.h>

#include "event_timing.h"

using namespace minigrad;

namespace {

constexpr int kRuns = 25;
bool all_ok = true;

bool same_bits(const Tensor& a, const Tensor& b) { return a.to_vector<double>() == b.to_vector<double>(); }

void run_shape(int64_t rows, int64_t n) {
  const TensorOptions bf16_gpu = TensorOptions(kBFloat16).device(Device::cuda());
  const auto tanh = GeluApproximation::Tanh;
  const Tensor grad = randn({rows, n}, bf16_gpu), pre = randn({rows, n}, bf16_gpu) * 2.0;
  const Tensor d_contiguous = empty({rows, n}, bf16_gpu), db_contiguous = empty({n}, bf16_gpu);
  const Tensor d_interleaved = empty({rows, n}, bf16_gpu), db_interleaved = empty({n}, bf16_gpu);
  using cuda::RowOrder;
  auto contiguous = [&] {
    cuda::backward_and_bias_rows<RowOrder::Contiguous>(grad, pre, tanh, d_contiguous, db_contiguous);
  };
  auto interleaved = [&] {
    cuda::backward_and_bias_rows<RowOrder::Interleaved>(grad, pre, tanh, d_interleaved, db_interleaved);
  };
  // gelu_backward alone allocates its output, as the op's fallback does.
  const std::vector<double> ms = experiments::interleaved_median_ms(
      {[&] { (void)gelu_backward(grad, pre, tanh); }, contiguous, interleaved}, kRuns);
  const Tensor d_alone = gelu_backward(grad, pre, tanh);
  const bool d_same = same_bits(d_contiguous, d_alone) && same_bits(d_interleaved, d_alone);
  const double db_diff = max(abs(db_contiguous.to(kFloat64) - db_interleaved.to(kFloat64))).item<double>();
  const double db_scale = max(abs(db_contiguous.to(kFloat64))).item<double>();
  const bool db_close = db_diff <= 1e-2 * db_scale;
  all_ok = all_ok && d_same && db_close;
  const double gb = 3.0 * static_cast<double>(rows * n) * 2 / 1e9;  // grad, pre read; d_pre written
  std::printf("[%lld, %lld] bf16 tanh, median of %d, ms (GB/s): gelu_backward alone %.4f (%.0f), with db contiguous "
              "%.4f (%.0f) %.3fx, interleaved %.4f (%.0f) %.3fx; d_pre %s, db orders differ by %.2e of %.2e\n",
              static_cast<long long>(rows), static_cast<long long>(n), kRuns, ms[0], gb / ms[0] * 1e3, ms[1],
              gb / ms[1] * 1e3, ms[1] / ms[0], ms[2], gb / ms[2] * 1e3, ms[2] / ms[0],
              d_same ? "same bits" : "DIFFERENT BITS", db_diff, db_scale);
}

}  // namespace

int main() {
  manual_seed(7);
  run_shape(8192, 16384);  // linear_gelu's benchmark shape: [8192, 4096] -> 16384
  run_shape(8192, 4096);
  run_shape(16384, 3072);
  std::printf("gelu_bias_shapes: %s\n", all_ok ? "all checks passed" : "SOME CHECKS FAILED");
  return all_ok ? 0 : 1;
}
