#pragma once
// The CUDA elementwise engine: out[i] = f(a[i], b[i], ...) for tensors on one GPU, the
// inputs broadcast to out's shape, any strides, on the current stream. The same maps as
// ops/cpu_loops.h's cpu_map, and called from there (elementwise_map) when out is on a GPU.
//
// out_t, a_t, ... are the element types (float, double, Half, BFloat16, int64_t, bool); f is
// a functor of kernels/elementwise_functors.h, called with each input in its compute type
// (and with the output element's linear index first, when it declares kTakesIndex). The
// caller has checked dtypes, devices and shapes. `op` names the op in error messages.
//
// launch_elementwise2 writes two outputs of one shape in one pass: f returns an OutputPair,
// `first` goes to out0 (rounded to out0_t) and `second` to out1.
//
// Plain C++ (no CUDA types), so the g++-compiled ops/ include it, in every build. The
// engine's definition is in cuda/elementwise.cuh, compiled for the entries of
// kernels/elementwise_list.h by cuda/elementwise_*.cu; a CPU-only build defines the same
// entries as stubs that raise (cuda/no_cuda_backend.cpp). A functor and types missing from
// the list fail to compile here, in the op that asks for them.
#include <array>

#include <minigrad/core/tensor.h>
#include <minigrad/kernels/elementwise_list.h>

namespace minigrad {
namespace cuda {

// One entry of the list: the engine for functor F, output type(s) out_t (one type, or
// elementwise::TwoOutputs<A, B>), input types in_t... out1 is null for one output.
template <typename F, typename out_t, typename... in_t>
struct ElementwiseKernel {
  using Inputs = std::array<const Tensor*, sizeof...(in_t)>;
  static void launch(const char* op, const Tensor& out0, const Tensor* out1, const Inputs& inputs, const F& f);
};

template <typename F, typename out_t, typename... in_t>
constexpr void check_listed() {
  static_assert(is_listed_elementwise<F, out_t, in_t...>::value,
                "this functor and these element types are not in kernels/elementwise_list.h: add an entry "
                "there, so that both backends have the kernel");
}

template <typename out_t, typename... in_t, typename F, typename... Tensors>
void launch_elementwise(const char* op, const F& f, const Tensor& out, const Tensors&... inputs) {
  static_assert(sizeof...(in_t) == sizeof...(Tensors), "one element type per input tensor");
  check_listed<F, out_t, in_t...>();
  ElementwiseKernel<F, out_t, in_t...>::launch(op, out, nullptr, {&inputs...}, f);
}

template <typename out0_t, typename out1_t, typename... in_t, typename F, typename... Tensors>
void launch_elementwise2(const char* op, const F& f, const Tensor& out0, const Tensor& out1,
                         const Tensors&... inputs) {
  static_assert(sizeof...(in_t) == sizeof...(Tensors), "one element type per input tensor");
  using Outputs = elementwise::TwoOutputs<out0_t, out1_t>;
  check_listed<F, Outputs, in_t...>();
  ElementwiseKernel<F, Outputs, in_t...>::launch(op, out0, &out1, {&inputs...}, f);
}

}  // namespace cuda
}  // namespace minigrad
