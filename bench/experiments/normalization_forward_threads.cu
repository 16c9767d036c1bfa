// Experiment: the normalizations' forward (cuda/normalization.cu) with rows held 32 elements a
// thread (the library's kElementsPerThread: 128 threads for rows of 4096 in bf16) and 16 (256
// threads), in bfloat16: layer_norm_gelu (exact GELU), layer_norm and rms_norm, the two forms'
// runs taking turns. The outputs must agree within a rounding of bf16 (the row's sums combine in
// another order); mean and rstd within float's.
//
// Why: the forward of layer_norm_gelu ran at 0.905 of the copy roofline and layer_norm's at 0.945,
// rms_norm's 1.5% behind torch.compile's, with one row a block of 128 threads (56 registers, 9
// blocks an SM). Twice the threads a row halve each thread's work between the row's two barriers
// (GELU's instructions included) at the price of a combine across 8 warps instead of 4.
//
// Not part of the build: the measurement behind the forward's elements a thread in
// docs/perf-notes.md. Build (after a CUDA build in build-gpu), or through scripts/gpu-check with
// EXPERIMENTS=normalization_forward_threads:
//   nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -I build-gpu/include \
//     -I .deps/root/usr/include -DMINIGRAD_WITH_CUDA=1 bench/experiments/normalization_forward_threads.cu \
//     build-gpu/libminigrad.a -L .deps/root/usr/lib/x86_64-linux-gnu -lfmt -lcublas -lcublasLt \
//     -o build-gpu/normalization_forward_threads

#include "normalization_source.h"  // the kernels' source, its entry points renamed

#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <vector>

#include <minigrad/minigrad.h>

#include "event_timing.h"

using namespace minigrad;
using normalization::Epilogue;
using normalization::NormKind;

namespace {

bool all_ok = true;  // the two forms agreed everywhere (the exit status)

struct Outputs {
  Tensor y, mean, rstd;
};

struct Case {
  const char* name;
  NormKind kind;
  Epilogue epilogue;
};

template <int kMaxElements>
std::function<void()> forward(const Case& c, const Tensor& x, const Tensor& weight, const Tensor& bias,
                              const Outputs& o) {
  const bool layer = c.kind == NormKind::Layer;
  return [=] {
    cuda::forward_rows<kMaxElements>("experiment", x, weight, layer ? bias : Tensor(), x.size(-1), c.kind, c.epilogue,
                                     1e-5, o.y, layer ? o.mean : Tensor(), o.rstd);
  };
}

double max_difference(const Tensor& a, const Tensor& b) {
  return max(abs(a.to(kFloat32) - b.to(kFloat32))).item<double>();
}

void compare(const Case& c, const Shape& shape) {
  const TensorOptions bf16_gpu = TensorOptions(kBFloat16).device(Device::cuda());
  const Tensor x = randn(shape, bf16_gpu);
  const int64_t hidden = shape.back();
  const Tensor weight = randn({hidden}, bf16_gpu), bias = randn({hidden}, bf16_gpu);
  const TensorOptions stats = TensorOptions(kFloat32).device(Device::cuda());
  std::vector<Outputs> o;
  for (int f = 0; f < 2; ++f)  // poisoned: an element neither form writes shows as NaN
    o.push_back({full(shape, std::nan(""), bf16_gpu), full({shape[0]}, std::nan(""), stats),
                 full({shape[0]}, std::nan(""), stats)});
  const std::vector<double> ms = experiments::interleaved_median_ms(
      {forward<32>(c, x, weight, bias, o[0]), forward<16>(c, x, weight, bias, o[1])}, 50);
  const double bytes = 2.0 * x.numel() * 2;  // read x, write y
  const double y_err = max_difference(o[1].y, o[0].y);
  const double rstd_err = max(abs(o[1].rstd / o[0].rstd - 1.0)).item<double>();
  const bool layer = c.kind == NormKind::Layer;
  const double mean_err = layer ? max_difference(o[1].mean, o[0].mean) : 0.0;
  const bool written = !any(isnan(o[0].y.to(kFloat32))).item<bool>() && !any(isnan(o[1].y.to(kFloat32))).item<bool>();
  // y within a few bf16 roundings of values up to about 4 (|xhat w + b| for randn inputs).
  const bool ok = written && y_err <= 0.07 && rstd_err <= 1e-5 && mean_err <= 1e-5;
  all_ok = all_ok && ok;
  std::printf("  %-16s [%lld, %lld]  32 a thread %7.4f ms (%4.0f GB/s)  16 a thread %7.4f ms (%4.0f GB/s) %.3fx"
              "  y %.1e, rstd %.1e, mean %.1e %s\n",
              c.name, static_cast<long long>(shape[0]), static_cast<long long>(shape[1]), ms[0], bytes / ms[0] * 1e-6,
              ms[1], bytes / ms[1] * 1e-6, ms[1] / ms[0], y_err, rstd_err, mean_err, ok ? "ok" : "MISMATCH");
}

}  // namespace

int main() {
  manual_seed(7);
  std::printf("normalization forward, bf16: rows held 32 or 16 elements a thread\n");
  const Case cases[] = {{"layer_norm_gelu", NormKind::Layer, Epilogue::GeluExact},
                        {"layer_norm", NormKind::Layer, Epilogue::Identity},
                        {"rms_norm", NormKind::RMS, Epilogue::Identity}};
  for (const Shape& shape : {Shape{16384, 4096}, Shape{16384, 3072}, Shape{65536, 1024}})
    for (const Case& c : cases) compare(c, shape);
  return all_ok ? 0 : 1;
}
