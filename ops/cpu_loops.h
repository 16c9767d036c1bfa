#pragma once
// Machinery every CPU reference kernel shares: the argument checks, and elementwise maps
// with broadcasting over any strides. A kernel in ops/ is then a formula:
//   return unary_float_op("exp", x, [](auto v) { return std::exp(v); });
#include <array>

#include "core/shape.h"
#include "core/strided_loop.h"
#include "core/tensor.h"

namespace minigrad {

// ---- argument checks: each error names the op and the argument ----
void check_defined(const char* op, const char* arg, const Tensor& t);
void check_floating(const char* op, const char* arg, const Tensor& t);
void check_same_dtype(const char* op, const char* a_name, const Tensor& a, const char* b_name, const Tensor& b);
void check_same_device(const char* op, const char* a_name, const Tensor& a, const char* b_name, const Tensor& b);
// Until the CUDA backend has a kernel for an op, its input must be on the CPU.
void check_cpu(const char* op, const char* arg, const Tensor& t);

// ---- elementwise maps: out[i] = f(a[i], b[i], ...) with inputs broadcast to out's shape ----
template <typename out_t, typename a_t, typename F>
void cpu_map(const Tensor& out, const Tensor& a, F f) {
  out_t* po = static_cast<out_t*>(out.raw_data());
  const a_t* pa = static_cast<const a_t*>(a.raw_data());
  if (a.sizes() == out.sizes() && a.is_contiguous() && out.is_contiguous()) {
    const int64_t n = out.numel();
    for (int64_t i = 0; i < n; ++i) po[i] = f(pa[i]);
    return;
  }
  const Shape sa = broadcast_strides(a, out.sizes());
  for_each_offset<2>(out.sizes(), {out.strides().data(), sa.data()},
                     [&](const std::array<int64_t, 2>& o) { po[o[0]] = f(pa[o[1]]); });
}

template <typename out_t, typename a_t, typename b_t, typename F>
void cpu_map(const Tensor& out, const Tensor& a, const Tensor& b, F f) {
  out_t* po = static_cast<out_t*>(out.raw_data());
  const a_t* pa = static_cast<const a_t*>(a.raw_data());
  const b_t* pb = static_cast<const b_t*>(b.raw_data());
  if (a.sizes() == out.sizes() && b.sizes() == out.sizes() && a.is_contiguous() && b.is_contiguous() &&
      out.is_contiguous()) {
    const int64_t n = out.numel();
    for (int64_t i = 0; i < n; ++i) po[i] = f(pa[i], pb[i]);
    return;
  }
  const Shape sa = broadcast_strides(a, out.sizes());
  const Shape sb = broadcast_strides(b, out.sizes());
  for_each_offset<3>(out.sizes(), {out.strides().data(), sa.data(), sb.data()},
                     [&](const std::array<int64_t, 3>& o) { po[o[0]] = f(pa[o[1]], pb[o[2]]); });
}

template <typename out_t, typename a_t, typename b_t, typename c_t, typename F>
void cpu_map(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& c, F f) {
  out_t* po = static_cast<out_t*>(out.raw_data());
  const a_t* pa = static_cast<const a_t*>(a.raw_data());
  const b_t* pb = static_cast<const b_t*>(b.raw_data());
  const c_t* pc = static_cast<const c_t*>(c.raw_data());
  const Shape sa = broadcast_strides(a, out.sizes());
  const Shape sb = broadcast_strides(b, out.sizes());
  const Shape sc = broadcast_strides(c, out.sizes());
  for_each_offset<4>(out.sizes(), {out.strides().data(), sa.data(), sb.data(), sc.data()},
                     [&](const std::array<int64_t, 4>& o) { po[o[0]] = f(pa[o[1]], pb[o[2]], pc[o[3]]); });
}

// ---- floating-point ops: float32/float64 computed directly, float16/bfloat16 upcast ----
// f is a generic lambda called with float or double values.

template <typename F>
Tensor unary_float_op(const char* op, const Tensor& x, F f) {
  check_defined(op, "self", x);
  check_floating(op, "self", x);
  check_cpu(op, "self", x);
  if (is_half(x.dtype()))
    return copy_as(unary_float_op(op, copy_as(x, kFloat32, x.device()), f), x.dtype(), x.device());
  Tensor out = empty(x.sizes(), TensorOptions(x.dtype()).device(x.device()));
  if (x.dtype() == kFloat32)
    cpu_map<float, float>(out, x, f);
  else
    cpu_map<double, double>(out, x, f);
  return out;
}

template <typename F>
Tensor binary_float_op(const char* op, const Tensor& a, const Tensor& b, F f) {
  check_defined(op, "self", a);
  check_defined(op, "other", b);
  check_floating(op, "self", a);
  check_same_device(op, "self", a, "other", b);
  check_same_dtype(op, "self", a, "other", b);
  check_cpu(op, "self", a);
  if (is_half(a.dtype()))
    return copy_as(binary_float_op(op, copy_as(a, kFloat32, a.device()), copy_as(b, kFloat32, b.device()), f),
                   a.dtype(), a.device());
  Tensor out = empty(broadcast_shapes(a.sizes(), b.sizes(), op), TensorOptions(a.dtype()).device(a.device()));
  if (a.dtype() == kFloat32)
    cpu_map<float, float, float>(out, a, b, f);
  else
    cpu_map<double, double, double>(out, a, b, f);
  return out;
}

}  // namespace minigrad
