#pragma once
// Marks a function that both the CPU and the CUDA kernels call: one definition of each
// formula (GELU, Philox, half conversions), compiled for host and device by nvcc.
#if defined(__CUDACC__)
#define MG_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define MG_HOST_DEVICE inline
#endif
