#pragma once
// The experiments' timers: the median of `runs` timings of f between CUDA events on the
// current stream, after 3 warm-up runs (which fill the caching allocator and any plan
// caches), in milliseconds; and the same for several functions whose runs take turns
// (interleaved_median_ms). Header-only, so that each experiment stays one file to compile.
#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
#include <vector>

#include <minigrad/cuda/runtime.h>

namespace minigrad {
namespace experiments {

// The medians of `runs` timings of each of fs, the runs taking turns (f0, f1, ..., f0, f1,
// ...), after 3 warm-up rounds. A GEMM-bound function's time drifts by 5% and more over a few
// seconds (the chip's clock follows its power and heat): timed one after the other, two
// functions see different clocks, and their ratio shows the drift; taking turns, both see the
// same.
inline std::vector<double> interleaved_median_ms(const std::vector<std::function<void()>>& fs, int runs) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  for (int i = 0; i < 3; ++i)
    for (const auto& f : fs) f();
  std::vector<std::vector<float>> times(fs.size());
  for (int i = 0; i < runs; ++i) {
    for (size_t k = 0; k < fs.size(); ++k) {
      cudaEventRecord(start, cuda::current_stream());
      fs[k]();
      cudaEventRecord(stop, cuda::current_stream());
      cudaEventSynchronize(stop);
      float ms = 0;
      cudaEventElapsedTime(&ms, start, stop);
      times[k].push_back(ms);
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::vector<double> medians;
  for (auto& t : times) {
    std::sort(t.begin(), t.end());
    medians.push_back(t[t.size() / 2]);
  }
  return medians;
}

// The median of `runs` timings of f alone.
template <typename F>
double median_ms(F&& f, int runs) {
  return interleaved_median_ms({std::function<void()>(std::ref(f))}, runs).front();
}

}  // namespace experiments
}  // namespace minigrad
