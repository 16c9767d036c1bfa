// Experiment: the normalizations' backward (cuda/normalization.cu) with 256 threads a row
// (the library's kBackwardTargetThreads) and with 512, timed side by side in one run in
// bfloat16 on the benchmark's rows, [16384, 4096], and on rows of 3072: layer_norm_gelu (exact
// GELU), layer_norm and rms_norm, weight and bias gradients wanted. The outputs are checked
// against each other. Not part of the build: the measurement behind kBackwardTargetThreads in
// docs/perf-notes.md. The kernels are the library's own, included from the source; only the
// threads a row differ, so only rows of 2049 to 4096 elements (bf16) take another kernel.
//
// What 512 threads change for rows of 4096: a thread holds one vector of 8 elements (its xhat,
// dxhat and dweight/dbias sums: 32 registers) where 256 threads held two, 58 registers a
// thread instead of 123, so an SM holds 2 blocks of 512 threads (32 warps) instead of 2 of 256
// (16 warps): twice the loads in flight. What it costs: the row's fixed work (its statistics,
// the combine across the block, now 16 warps) paid over 8 elements a thread instead of 16.
//
// Build (after a CUDA build in build-gpu; about a minute), or through scripts/gpu-check with
// EXPERIMENTS=normalization_backward_threads:
//   nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -I build-gpu/include \
//     -I .deps/root/usr/include -DMINIGRAD_WITH_CUDA=1 bench/experiments/normalization_backward_threads.cu \
//     build-gpu/libminigrad.a -L .deps/root/usr/lib/x86_64-linux-gnu -lfmt -lcublas -lcublasLt \
//     -o build-gpu/normalization_backward_threads

#include "normalization_source.h"  // the kernels' source, its entry points renamed

#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>

#include <minigrad/minigrad.h>

#include "event_timing.h"

using namespace minigrad;
using normalization::Epilogue;
using normalization::NormKind;

namespace {

bool all_ok = true;  // 512 threads agreed with 256 everywhere (the exit status)

struct Gradients {
  Tensor dx, dweight, dbias;
  double ms = 0;
};

struct Case {
  const char* name;
  NormKind kind;
  Epilogue epilogue;
};

template <int kTargetThreads>
Gradients backward(const Case& c, const Tensor& grad, const Tensor& x, const Tensor& weight, const Tensor& bias,
                   const Tensor& mean, const Tensor& rstd) {
  const int64_t hidden = x.size(-1);
  const bool with_bias = c.kind == NormKind::Layer;
  Gradients g{full(x.sizes(), std::nan(""), x.options()), full({hidden}, std::nan(""), x.options()),
              with_bias ? full({hidden}, std::nan(""), x.options()) : Tensor()};
  g.ms = experiments::median_ms(
      [&] {
        cuda::backward_rows<kTargetThreads>("experiment", grad, x, weight, with_bias ? bias : Tensor(),
                                            c.kind == NormKind::Layer ? mean : Tensor(), rstd, hidden, c.kind,
                                            c.epilogue, g.dx, g.dweight, g.dbias);
      },
      25);
  return g;
}

double max_difference(const Tensor& a, const Tensor& b) {
  if (!a.defined()) return 0;
  return max(abs(a.to(kFloat32) - b.to(kFloat32))).item<double>();
}

void compare(const Case& c, const Shape& shape) {
  const TensorOptions bf16_gpu = TensorOptions(kBFloat16).device(Device::cuda());
  const Tensor x = randn(shape, bf16_gpu), grad = randn(shape, bf16_gpu);
  const int64_t hidden = shape.back();
  const Tensor weight = randn({hidden}, bf16_gpu), bias = randn({hidden}, bf16_gpu);
  const TensorOptions stats = TensorOptions(kFloat32).device(Device::cuda());
  const Tensor y = empty(shape, bf16_gpu), mean = empty({shape[0]}, stats), rstd = empty({shape[0]}, stats);
  const bool layer = c.kind == NormKind::Layer;
  cuda::experiment_normalization_forward("experiment", x, weight, layer ? bias : Tensor(), hidden, c.kind,
                                         c.epilogue, 1e-5, y, layer ? mean : Tensor(), rstd);
  const Gradients narrow = backward<256>(c, grad, x, weight, bias, mean, rstd);
  const Gradients wide = backward<512>(c, grad, x, weight, bias, mean, rstd);
  // dx: the row's two sums combine in another order (16 warps instead of 8), so within a bf16
  // rounding. dweight and dbias: each thread sums its columns over its block's rows in the same
  // order under both (the same grid when both hold 2 blocks an SM), so the same bits then.
  const double dx_err = max_difference(wide.dx, narrow.dx);
  const double dw_err = max_difference(wide.dweight, narrow.dweight);
  const double db_err = max_difference(wide.dbias, narrow.dbias);
  const bool ok = dx_err <= 6e-2 && dw_err <= 1e-2 * std::sqrt(static_cast<double>(shape[0])) &&
                  db_err <= 1e-2 * std::sqrt(static_cast<double>(shape[0]));
  all_ok = all_ok && ok;
  const double bytes = 3.0 * x.numel() * 2;  // read x and dy, write dx
  std::printf("  %-16s [%lld, %lld]  256 a row %8.4f ms (%5.0f GB/s)   512 a row %8.4f ms (%5.0f GB/s)   "
              "512 vs 256: dx %.1e, dw %.1e, db %.1e %s\n",
              c.name, static_cast<long long>(shape[0]), static_cast<long long>(shape[1]), narrow.ms,
              bytes / narrow.ms * 1e-6, wide.ms, bytes / wide.ms * 1e-6, dx_err, dw_err, db_err,
              ok ? "ok" : "MISMATCH");
}

}  // namespace

int main() {
  manual_seed(7);
  std::printf("normalization backward, bf16, dx, dweight and dbias, threads a row:\n");
  const Case cases[] = {{"layer_norm_gelu", NormKind::Layer, Epilogue::GeluExact},
                        {"layer_norm", NormKind::Layer, Epilogue::Identity},
                        {"rms_norm", NormKind::RMS, Epilogue::Identity}};
  for (const Shape& shape : {Shape{16384, 4096}, Shape{16384, 3072}})
    for (const Case& c : cases) compare(c, shape);
  return all_ok ? 0 : 1;
}
