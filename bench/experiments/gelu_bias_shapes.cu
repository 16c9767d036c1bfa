// Experiment: linear_gelu's one-pass gelu' and bias gradient (cuda/gelu_bias_backward.cu) with
// its chunks' rows contiguous and interleaved, against the elementwise gelu_backward alone (the
// same bytes, no sums), bf16, GELU's tanh form, each shape's three runs taking turns. d_pre must
// have gelu_backward's bits in both orders; db differs between them only by the order of its sums.
//
// Why the order might matter: the kernel's grid is one wave of resident blocks, each walking its
// own chunk of rows. Contiguous chunks put the blocks at work at one time in regions of the
// tensors far from each other; interleaved ones (chunk y takes rows y, y + chunks, ...) keep them
// on neighbouring rows, so the grid sweeps memory in address order as the elementwise engine's
// one-shot blocks do. And the same kernel launched with chunks of 32 and of 64 rows, many waves
// of blocks that each do a little and leave (the elementwise engine's grid, which ran at the
// copy rate where resident blocks looping over tiles ran at 0.89), at the price of more partials.
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

#include <algorithm>
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
  // Not one wave: contiguous chunks of a fixed number of rows, as many blocks as that makes, the
  // block scheduler starting each where one finishes (more partials: [rows / chunk_rows, n]).
  const int64_t column_blocks = (n / 8 + cuda::kColumnThreads - 1) / cuda::kColumnThreads;
  auto short_chunks = [&](int64_t chunk_rows, const Tensor& d, const Tensor& db) {
    return [&, chunk_rows, d, db] {
      const int64_t chunks = (rows + chunk_rows - 1) / chunk_rows;
      const Tensor partials = empty({chunks, n}, TensorOptions(kFloat32).device(Device::cuda()));
      cuda::gelu_backward_bias_kernel<BFloat16, elementwise::GeluTanhBackward, 8, RowOrder::Contiguous>
          <<<dim3(static_cast<unsigned int>(column_blocks), static_cast<unsigned int>(chunks)), cuda::kColumnThreads, 0,
             cuda::current_stream()>>>(grad.data_ptr<BFloat16>(), pre.data_ptr<BFloat16>(), d.data_ptr<BFloat16>(),
                                       partials.data_ptr<float>(), rows, n, chunk_rows);
      cuda::sum_column_partials(partials.data_ptr<float>(), chunks, n, db.data_ptr<BFloat16>(),
                                cuda::current_stream());
    };
  };
  const Tensor d_32 = empty({rows, n}, bf16_gpu), db_32 = empty({n}, bf16_gpu);
  const Tensor d_64 = empty({rows, n}, bf16_gpu), db_64 = empty({n}, bf16_gpu);
  // gelu_backward alone allocates its output, as the op's fallback does.
  const std::vector<double> ms = experiments::interleaved_median_ms(
      {[&] { (void)gelu_backward(grad, pre, tanh); }, contiguous, interleaved, short_chunks(32, d_32, db_32),
       short_chunks(64, d_64, db_64)},
      kRuns);
  const Tensor d_alone = gelu_backward(grad, pre, tanh);
  const bool d_same = same_bits(d_contiguous, d_alone) && same_bits(d_interleaved, d_alone) &&
                      same_bits(d_32, d_alone) && same_bits(d_64, d_alone);
  const double db_diff = max(abs(db_contiguous.to(kFloat64) - db_interleaved.to(kFloat64))).item<double>();
  const double db_scale = max(abs(db_contiguous.to(kFloat64))).item<double>();
  const double db_diff_short = std::max(max(abs(db_32.to(kFloat64) - db_interleaved.to(kFloat64))).item<double>(),
                                        max(abs(db_64.to(kFloat64) - db_interleaved.to(kFloat64))).item<double>());
  const bool db_close = db_diff <= 1e-2 * db_scale && db_diff_short <= 1e-2 * db_scale;
  all_ok = all_ok && d_same && db_close;
  const double gb = 3.0 * static_cast<double>(rows * n) * 2 / 1e9;  // grad, pre read; d_pre written
  std::printf("[%lld, %lld] bf16 tanh, median of %d, ms (GB/s): gelu_backward alone %.4f (%.0f), with db contiguous "
              "%.4f (%.0f) %.3fx, interleaved %.4f (%.0f) %.3fx; d_pre %s, db orders differ by %.2e of %.2e\n",
              static_cast<long long>(rows), static_cast<long long>(n), kRuns, ms[0], gb / ms[0] * 1e3, ms[1],
              gb / ms[1] * 1e3, ms[1] / ms[0], ms[2], gb / ms[2] * 1e3, ms[2] / ms[0],
              d_same ? "same bits" : "DIFFERENT BITS", db_diff, db_scale);
  std::printf("  chunks of 32 rows (%lld blocks) %.4f (%.0f) %.3fx, of 64 rows %.4f (%.0f) %.3fx\n",
              static_cast<long long>(column_blocks * ((rows + 31) / 32)), ms[3], gb / ms[3] * 1e3, ms[3] / ms[0],
              ms[4], gb / ms[4] * 1e3, ms[4] / ms[0]);
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
