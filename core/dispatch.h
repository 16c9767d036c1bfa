#pragma once
// dispatch_floating: runs a generic lambda with the C++ type of a floating dtype, for the
// CPU loops (ops/) and the CUDA launchers (cuda/) alike. Plain C++, no CUDA types, so both
// compilers include it. (dispatch_all, over every dtype, is in core/dtype.h.)
#include <minigrad/core/dtype.h>
#include <minigrad/core/error.h>

namespace minigrad {

// Calls f(T{}) with T the C++ type of a floating dtype: float, double, Half or BFloat16.
// The caller has checked that it is one; any other dtype is an internal error.
//   dispatch_floating(x.dtype(), [&](auto tag) { using scalar_t = decltype(tag); ... });
template <typename F>
void dispatch_floating(DType t, F&& f) {
  switch (t) {
    case DType::Float32: f(float{}); return;
    case DType::Float64: f(double{}); return;
    case DType::Float16: f(Half{}); return;
    case DType::BFloat16: f(BFloat16{}); return;
    default: MG_CHECK(false, "dispatch_floating: {} is not a floating dtype", t);
  }
}

}  // namespace minigrad
