#pragma once
// The CUDA elementwise engine: out[i] = f(a[i], b[i], ...) for tensors on one GPU, the
// inputs broadcast to out's shape, any strides, on the current stream. The same maps as
// ops/cpu_loops.h's cpu_map, and called from there (elementwise_map) when out is on a GPU.
//
// out_t, a_t, ... are the element types (float, double, Half, BFloat16, int64_t, bool); f is
// a functor of ops/elementwise_functors.h, called with each input in its compute type (and
// with the output element's linear index first, when it declares kTakesIndex). The caller
// has checked dtypes, devices and shapes. `op` names the op in error messages.
//
// launch_elementwise2 writes two outputs of one shape in one pass: f returns an
// OutputPair, `first` goes to out0 (rounded to out0_t) and `second` to out1.
//
// Plain C++ (no CUDA types), so the g++-compiled ops/ include it. The definitions are in
// cuda/elementwise.cuh, instantiated for every functor and dtype the ops use in
// cuda/elementwise_*.cu: a combination not listed there is a link error, not a silent gap.
#include "core/tensor.h"

namespace minigrad {
namespace cuda {

template <typename out_t, typename a_t, typename F>
void launch_elementwise(const char* op, const Tensor& out, const Tensor& a, const F& f);

template <typename out_t, typename a_t, typename b_t, typename F>
void launch_elementwise(const char* op, const Tensor& out, const Tensor& a, const Tensor& b, const F& f);

template <typename out_t, typename a_t, typename b_t, typename c_t, typename F>
void launch_elementwise(const char* op, const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& c,
                        const F& f);

template <typename out_t, typename a_t, typename b_t, typename c_t, typename d_t, typename F>
void launch_elementwise(const char* op, const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& c,
                        const Tensor& d, const F& f);

template <typename out0_t, typename out1_t, typename a_t, typename F>
void launch_elementwise2(const char* op, const Tensor& out0, const Tensor& out1, const Tensor& a, const F& f);

template <typename out0_t, typename out1_t, typename a_t, typename b_t, typename F>
void launch_elementwise2(const char* op, const Tensor& out0, const Tensor& out1, const Tensor& a, const Tensor& b,
                         const F& f);

}  // namespace cuda
}  // namespace minigrad
