#pragma once
// The options the library was built with: MINIGRAD_WITH_CUDA (0 or 1), the version.
#include <minigrad/config.h>

// Marks a function that both the CPU and the CUDA kernels call: one definition of each
// formula (GELU, Philox, half conversions), compiled for host and device by nvcc.
#if defined(__CUDACC__)
#define MG_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define MG_HOST_DEVICE inline
#endif

// A branch the program almost never takes (an error check): the compiler lays the common
// path out straight and moves the other one away.
#if defined(__GNUC__) || defined(__clang__)
#define MG_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define MG_UNLIKELY(x) (x)
#endif
