#pragma once
// The CUDA elementwise engine: out[i] = f(a[i], b[i], ...) for tensors on one GPU, the
// inputs broadcast to out's shape, any strides, on the current stream. The same maps as
// ops/cpu_loops.h's cpu_map, and called from there (elementwise_map) when out is on a GPU.
//
// out_t, a_t, ... are the element types (float, double, Half, BFloat16, int64_t, bool); f is
// a functor of kernels/elementwise_functors.h, called with each input in its compute type.
// The caller has checked dtypes, devices and shapes. `op` names the op in error messages.
//
// Plain C++ (no CUDA types), so the g++-compiled ops/ include it, in every build. The
// engine's definition is in cuda/elementwise.cuh, compiled for the entries of
// kernels/elementwise_list.h by cuda/elementwise_*.cu; a CPU-only build defines the same
// entries as stubs that raise (cuda/no_cuda_backend.cpp). A functor and types missing from
// the list fail to compile here, in the op that asks for them.
#include <array>

#include "core/tensor.h"
#include "kernels/elementwise_list.h"

namespace minigrad {
namespace cuda {

// One entry of the list: the engine for functor F, output type out_t, input types in_t...
template <typename F, typename out_t, typename... in_t>
struct ElementwiseKernel {
  using Inputs = std::array<const Tensor*, sizeof...(in_t)>;
  static void launch(const char* op, const Tensor& out, const Inputs& inputs, const F& f);
};

template <typename out_t, typename... in_t, typename F, typename... Tensors>
void launch_elementwise(const char* op, const F& f, const Tensor& out, const Tensors&... inputs) {
  static_assert(sizeof...(in_t) == sizeof...(Tensors), "one element type per input tensor");
  static_assert(is_listed_elementwise<F, out_t, in_t...>::value,
                "this functor and these element types are not in kernels/elementwise_list.h: add an entry "
                "there, so that both backends have the kernel");
  ElementwiseKernel<F, out_t, in_t...>::launch(op, out, {&inputs...}, f);
}

}  // namespace cuda
}  // namespace minigrad
