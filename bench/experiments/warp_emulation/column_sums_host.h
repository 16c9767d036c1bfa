#pragma once
// The emulation's stand-in for cuda/column_sums.cuh (rewrite.py copies it over the real one in
// the generated include directory): the same two functions, summing the partials on the host,
// in the kernel's order (blocks y, y + 16, ... for each of 16 lanes, then the 16 lane sums in
// order). The real kernel launches blocks of 32 x 16 threads, which emu.h does not emulate; it
// is unchanged code the GPU runs have checked, so the emulation checks what feeds it: the
// normalizations' partials.
#include <cuda_runtime.h>

#include <cstdint>

#include <minigrad/cuda/convert.cuh>
#include <minigrad/kernels/elementwise_functors.h>  // compute_t

namespace minigrad {
namespace cuda {

template <typename T>
struct ColumnSumOutputs {
  T* out[2];
};

constexpr int kPartialSplit = 16;

template <typename T>
void sum_column_partials(const compute_t<T>* partials, int64_t chunks, int64_t n, ColumnSumOutputs<T> outputs,
                         int sets, cudaStream_t) {
  using acc_t = compute_t<T>;
  for (int s = 0; s < sets; ++s) {
    T* const out = outputs.out[s];
    if (out == nullptr) continue;
    const compute_t<T>* set = partials + static_cast<int64_t>(s) * chunks * n;
    for (int64_t column = 0; column < n; ++column) {
      acc_t total = 0;
      for (int y = 0; y < kPartialSplit; ++y) {
        acc_t sum = 0;
        for (int64_t b = y; b < chunks; b += kPartialSplit) sum += set[b * n + column];
        total += sum;
      }
      out[column] = convert_element<T>(total);
    }
  }
}

template <typename T>
void sum_column_partials(const compute_t<T>* partials, int64_t chunks, int64_t n, T* out, cudaStream_t stream) {
  sum_column_partials(partials, chunks, n, ColumnSumOutputs<T>{{out, nullptr}}, 1, stream);
}

}  // namespace cuda
}  // namespace minigrad
