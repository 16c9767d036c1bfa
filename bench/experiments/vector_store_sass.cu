// Experiment: does a copy of a 16-byte vector of 2-byte structs (Half, BFloat16) compile
// to one 16-byte load and store, or to eight 2-byte ones? Two kernels per type compute
// y = 2x over 8 elements per thread: one copies the vector struct (AlignedVector, as
// cuda/vector.cuh does), one goes through a uint4 word. Not part of the build; compile and
// count the global memory instructions (docs/perf-notes.md has the result):
//   nvcc -std=c++17 -O3 -arch=sm_90a -cubin -I. -I.deps/root/usr/include \
//     bench/experiments/vector_store_sass.cu -o vector_store_sass.cubin
//   cuobjdump -sass vector_store_sass.cubin | grep -oE '(LDG|STG)[.A-Z0-9]*' | sort | uniq -c
#include <cstdint>
#include <cstring>

#include <minigrad/core/dtype.h>
#include <minigrad/cuda/vector.cuh>

namespace vector_store_sass {

using minigrad::BFloat16;
using minigrad::Half;
using minigrad::cuda::AlignedVector;

template <typename T>
__device__ AlignedVector<T, 8> twice(const AlignedVector<T, 8>& x) {
  AlignedVector<T, 8> y;
#pragma unroll
  for (int j = 0; j < 8; ++j) y.values[j] = T(2.0f * static_cast<float>(x.values[j]));
  return y;
}

template <typename T>
__global__ void through_struct(const T* in, T* out) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x) * 8;
  minigrad::cuda::store_vector<8>(out + i, twice(minigrad::cuda::load_vector<8>(in + i)));
}

template <typename T>
__global__ void through_word(const T* in, T* out) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x) * 8;
  uint4 bits = *reinterpret_cast<const uint4*>(in + i);
  AlignedVector<T, 8> x;
  memcpy(&x, &bits, sizeof(x));
  const AlignedVector<T, 8> y = twice(x);
  memcpy(&bits, &y, sizeof(bits));
  *reinterpret_cast<uint4*>(out + i) = bits;
}

}  // namespace vector_store_sass

template __global__ void vector_store_sass::through_struct<minigrad::Half>(const minigrad::Half*, minigrad::Half*);
template __global__ void vector_store_sass::through_word<minigrad::Half>(const minigrad::Half*, minigrad::Half*);
template __global__ void vector_store_sass::through_struct<minigrad::BFloat16>(const minigrad::BFloat16*, minigrad::BFloat16*);
template __global__ void vector_store_sass::through_word<minigrad::BFloat16>(const minigrad::BFloat16*, minigrad::BFloat16*);
