#pragma once
// The experiments' one timer: the median of `runs` timings of f between CUDA events on the
// current stream, after 3 warm-up runs (which fill the caching allocator and any plan
// caches), in milliseconds. Header-only, so that each experiment stays one file to compile.
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include <minigrad/cuda/runtime.h>

namespace minigrad {
namespace experiments {

template <typename F>
double median_ms(F&& f, int runs) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  for (int i = 0; i < 3; ++i) f();
  std::vector<float> times;
  for (int i = 0; i < runs; ++i) {
    cudaEventRecord(start, cuda::current_stream());
    f();
    cudaEventRecord(stop, cuda::current_stream());
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    times.push_back(ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace experiments
}  // namespace minigrad
