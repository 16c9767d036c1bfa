#pragma once
// Element conversions inside CUDA kernels, between any two of minigrad's six element types.
//
// They give the values core's host conversion gives (core/tensor.cpp): the half types go
// through float, rounding to nearest even. On the device that rounding is one hardware
// instruction (cvt.rn.f16.f32 / cvt.rn.bf16.f32) instead of the bit-twiddling that
// minigrad::Half does on the host: a memory-bound conversion kernel has about a dozen
// instructions per element to spend before it stops running at the bandwidth limit.
// (Only NaN payloads may differ from the host's: both sides give a quiet NaN.)
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include <minigrad/core/dtype.h>
#include <minigrad/cuda/vector.cuh>

namespace minigrad {
namespace cuda {

template <typename T>
constexpr bool is_half_type = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

__device__ __forceinline__ float half_to_float(Half h) { return __half2float(__ushort_as_half(h.bits)); }
__device__ __forceinline__ float half_to_float(BFloat16 b) { return __bfloat162float(__ushort_as_bfloat16(b.bits)); }

template <typename H>
__device__ __forceinline__ H float_to_half(float f) {
  H h;
  if constexpr (std::is_same_v<H, Half>)
    h.bits = __half_as_ushort(__float2half_rn(f));
  else
    h.bits = __bfloat16_as_ushort(__float2bfloat16_rn(f));
  return h;
}

// convert_element<To>(v): v as a To. A floating value becomes an int64 by truncation
// toward zero, NaN giving 0 and values beyond int64's range saturating to its ends, as
// core's float_to_int64 does on the host. The intrinsics are that conversion instruction
// (cvt.rzi.s64.f32 / .f64), defined for every input, where a static_cast would be
// undefined behaviour for NaN and out-of-range values. Anything nonzero (NaN included)
// becomes true.
template <typename To, typename From>
__device__ __forceinline__ To convert_element(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (is_half_type<From>) {
    return convert_element<To>(half_to_float(v));
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (is_half_type<To>) {
    return float_to_half<To>(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, int64_t> && std::is_same_v<From, float>) {
    return static_cast<int64_t>(__float2ll_rz(v));
  } else if constexpr (std::is_same_v<To, int64_t> && std::is_same_v<From, double>) {
    return static_cast<int64_t>(__double2ll_rz(v));
  } else {
    return static_cast<To>(v);
  }
}

// The elements of a vector, each converted as convert_element<To> converts it. bfloat16 to
// float, the row kernels' commonest case, takes the vector a 32-bit word (two elements) at a
// time: a bfloat16 is the top half of the float with its value, so the low element is the
// word shifted left by 16 bits and the high one the word with its low 16 bits cleared, an
// instruction each. Converted one 16-bit element at a time, the high one costs two (a byte
// permute to move it down, then the shift), and the row kernels are bound by their
// instruction count, not by memory, at the bandwidth of an H200.
template <typename To, typename From, int N>
__device__ __forceinline__ void convert_vector(const AlignedVector<From, N> v, To (&out)[N]) {
  if constexpr (std::is_same_v<From, BFloat16> && std::is_same_v<To, float> && N % 2 == 0) {
    uint32_t words[N / 2];
    memcpy(words, &v, sizeof(words));
#pragma unroll
    for (int i = 0; i < N / 2; ++i) {
      out[2 * i] = __uint_as_float(words[i] << 16);
      out[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
    }
  } else {
#pragma unroll
    for (int e = 0; e < N; ++e) out[e] = convert_element<To>(v.values[e]);
  }
}

// A vector of N zeros of T (the rows and vectors a kernel writes without reading: masked out,
// or ignored).
template <typename T, int N>
__device__ __forceinline__ AlignedVector<T, N> zero_vector() {
  AlignedVector<T, N> zeros;
#pragma unroll
  for (int e = 0; e < N; ++e) zeros.values[e] = convert_element<T>(0.0f);
  return zeros;
}

}  // namespace cuda
}  // namespace minigrad
