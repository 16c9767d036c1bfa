#pragma once
// Machinery every elementwise op shares: the argument checks, the CPU loops (maps with
// broadcasting over any strides), and the dispatch that sends a map to the CPU loop or to
// the CUDA engine (cuda/elementwise.h) by the output's device. An op is then a formula, a
// functor from kernels/elementwise_functors.h, listed with its element types in
// kernels/elementwise_list.h (a compile error otherwise, in every build):
//   return unary_float_op("exp", x, elementwise::Exp{});
//
// Both backends call the functor with each input in its compute type (float16 and
// bfloat16 as float) and round its result to the output's dtype once, at the store: one
// formula, one rounding, on either device.
#include <array>
#include <limits>
#include <tuple>
#include <type_traits>
#include <utility>

#include <minigrad/core/cpu_arch.h>
#include <minigrad/core/dispatch.h>
#include <minigrad/core/parallel.h>
#include <minigrad/core/shape.h>
#include <minigrad/core/strided_loop.h>
#include <minigrad/core/tensor.h>
#include <minigrad/cuda/elementwise.h>
#include <minigrad/kernels/elementwise_functors.h>

namespace minigrad {

// ---- argument checks: each error names the op and the argument ----
void check_defined(const char* op, const char* arg, const Tensor& t);
void check_floating(const char* op, const char* arg, const Tensor& t);
void check_same_dtype(const char* op, const char* a_name, const Tensor& a, const char* b_name, const Tensor& b);
void check_same_device(const char* op, const char* a_name, const Tensor& a, const char* b_name, const Tensor& b);
// Until the CUDA backend has a kernel for an op, its input must be on the CPU.
void check_cpu(const char* op, const char* arg, const Tensor& t);

// ---- CPU maps: out[i] = f(a[i], b[i], ...) with inputs broadcast to out's shape ----
//
// Two roads. Same-shape contiguous operands (the common case) take a flat loop over the
// elements: no index arithmetic, nothing per element but f, so the compiler vectorizes it
// (compiled for three vector widths, core/cpu_arch.h). Everything else walks the strides
// with for_each_offset. Either road is cut into chunks for the threads (core/parallel.h):
// the flat loop into ranges of elements, the strided one into ranges of its outermost dim.
// Every element is computed the same way whatever the cut, so results never depend on the
// thread count.

// Elements per parallel chunk: below this a map runs on the calling thread alone. 32768
// floats are 128 KiB an operand, some tens of microseconds of work: well above the cost of
// waking a pool thread, and small enough that a 1 MiB tensor already uses two cores.
constexpr int64_t kElementwiseGrain = 32768;

// One element: the inputs in their compute types, f, the result rounded to out_t.
template <typename out_t, typename F, typename... in_t>
out_t compute_element(const F& f, in_t... values) {
  return static_cast<out_t>(f(static_cast<compute_t<in_t>>(values)...));
}

// The flat loops, elements [begin, end). `static`: each op's file has its own copy, as the
// clones' resolver wants.
template <typename out_t, typename a_t, typename F>
MG_CPU_CLONES static void map_contiguous(out_t* po, const a_t* pa, int64_t begin, int64_t end, const F& f) {
  for (int64_t i = begin; i < end; ++i) po[i] = compute_element<out_t>(f, pa[i]);
}
template <typename out_t, typename a_t, typename b_t, typename F>
MG_CPU_CLONES static void map_contiguous(out_t* po, const a_t* pa, const b_t* pb, int64_t begin, int64_t end,
                                         const F& f) {
  for (int64_t i = begin; i < end; ++i) po[i] = compute_element<out_t>(f, pa[i], pb[i]);
}

// for_each_offset over `sizes`, its outermost dim cut into chunks for the threads: each
// chunk walks its slice with the operands' offsets started at the slice.
template <size_t N, typename F>
void parallel_for_each_offset(const Shape& sizes, const std::array<const int64_t*, N>& strides, const F& body) {
  const int64_t numel = shape_numel(sizes);
  if (sizes.empty() || numel <= kElementwiseGrain) return for_each_offset<N>(sizes, strides, body);
  const int64_t per_index = numel / sizes[0];  // elements in one index of the outermost dim
  const int64_t grain = (kElementwiseGrain + per_index - 1) / per_index;
  parallel_for(0, sizes[0], grain, [&](int64_t begin, int64_t end) {
    Shape slice = sizes;
    slice[0] = end - begin;
    std::array<int64_t, N> start;
    for (size_t k = 0; k < N; ++k) start[k] = begin * strides[k][0];
    for_each_offset<N>(slice, strides, [&](const std::array<int64_t, N>& o) {
      std::array<int64_t, N> shifted;
      for (size_t k = 0; k < N; ++k) shifted[k] = start[k] + o[k];
      body(shifted);
    });
  });
}

template <typename out_t, typename a_t, typename F>
void cpu_map(const Tensor& out, const Tensor& a, const F& f) {
  out_t* po = static_cast<out_t*>(out.raw_data());
  const a_t* pa = static_cast<const a_t*>(a.raw_data());
  if (a.sizes() == out.sizes() && a.is_contiguous() && out.is_contiguous()) {
    parallel_for(0, out.numel(), kElementwiseGrain,
                 [&](int64_t begin, int64_t end) { map_contiguous<out_t, a_t>(po, pa, begin, end, f); });
    return;
  }
  const Shape sa = broadcast_strides(a, out.sizes());
  parallel_for_each_offset<2>(out.sizes(), {out.strides().data(), sa.data()},
                              [&](const std::array<int64_t, 2>& o) { po[o[0]] = compute_element<out_t>(f, pa[o[1]]); });
}

template <typename out_t, typename a_t, typename b_t, typename F>
void cpu_map(const Tensor& out, const Tensor& a, const Tensor& b, const F& f) {
  out_t* po = static_cast<out_t*>(out.raw_data());
  const a_t* pa = static_cast<const a_t*>(a.raw_data());
  const b_t* pb = static_cast<const b_t*>(b.raw_data());
  if (a.sizes() == out.sizes() && b.sizes() == out.sizes() && a.is_contiguous() && b.is_contiguous() &&
      out.is_contiguous()) {
    parallel_for(0, out.numel(), kElementwiseGrain,
                 [&](int64_t begin, int64_t end) { map_contiguous<out_t, a_t, b_t>(po, pa, pb, begin, end, f); });
    return;
  }
  const Shape sa = broadcast_strides(a, out.sizes());
  const Shape sb = broadcast_strides(b, out.sizes());
  parallel_for_each_offset<3>(out.sizes(), {out.strides().data(), sa.data(), sb.data()},
                              [&](const std::array<int64_t, 3>& o) { po[o[0]] = compute_element<out_t>(f, pa[o[1]], pb[o[2]]); });
}

template <typename out_t, typename a_t, typename b_t, typename c_t, typename F>
void cpu_map(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& c, const F& f) {
  out_t* po = static_cast<out_t*>(out.raw_data());
  const a_t* pa = static_cast<const a_t*>(a.raw_data());
  const b_t* pb = static_cast<const b_t*>(b.raw_data());
  const c_t* pc = static_cast<const c_t*>(c.raw_data());
  const Shape sa = broadcast_strides(a, out.sizes());
  const Shape sb = broadcast_strides(b, out.sizes());
  const Shape sc = broadcast_strides(c, out.sizes());
  parallel_for_each_offset<4>(out.sizes(), {out.strides().data(), sa.data(), sb.data(), sc.data()},
                              [&](const std::array<int64_t, 4>& o) {
                                po[o[0]] = compute_element<out_t>(f, pa[o[1]], pb[o[2]], pc[o[3]]);
                              });
}

// The general map, for what the loops above do not take: functors that take the output
// element's linear index (kTakesIndex), four inputs, two outputs (a functor returning an
// OutputPair; out1 null for one output). One walk in row-major order, which numbers the
// elements: the index is a counter.
template <typename out0_t, typename out1_t, typename... in_t, typename F, size_t... I>
void cpu_map_general(const Tensor& out0, const Tensor* out1, const std::array<const Tensor*, sizeof...(in_t)>& in,
                     const F& f, std::index_sequence<I...>) {
  constexpr size_t kOutputs = std::is_same_v<out1_t, elementwise::NoOutput> ? 1 : 2;
  const std::array<Shape, sizeof...(in_t)> in_strides = {broadcast_strides(*in[I], out0.sizes())...};
  std::array<const int64_t*, kOutputs + sizeof...(in_t)> strides{};
  strides[0] = out0.strides().data();
  if constexpr (kOutputs == 2) strides[1] = out1->strides().data();
  ((strides[kOutputs + I] = in_strides[I].data()), ...);
  out0_t* p0 = static_cast<out0_t*>(out0.raw_data());
  const std::tuple<const in_t*...> pin{static_cast<const in_t*>(in[I]->raw_data())...};
  int64_t index = 0;
  for_each_offset<kOutputs + sizeof...(in_t)>(out0.sizes(), strides, [&](const auto& o) {
    const auto result =
        elementwise::call_functor(f, index++, static_cast<compute_t<in_t>>(std::get<I>(pin)[o[kOutputs + I]])...);
    if constexpr (kOutputs == 1) {
      p0[o[0]] = static_cast<out0_t>(result);
    } else {
      p0[o[0]] = static_cast<out0_t>(result.first);
      static_cast<out1_t*>(out1->raw_data())[o[1]] = static_cast<out1_t>(result.second);
    }
  });
}

// out = f(a, b, c, d): four inputs (AdamW's p, g, m, v).
template <typename out_t, typename a_t, typename b_t, typename c_t, typename d_t, typename F>
void cpu_map(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& d, const F& f) {
  cpu_map_general<out_t, elementwise::NoOutput, a_t, b_t, c_t, d_t>(out, nullptr, {&a, &b, &c, &d}, f, std::index_sequence_for<a_t, b_t, c_t, d_t>{});
}

// (out0, out1) = f(inputs...), f returning an OutputPair.
template <typename out0_t, typename out1_t, typename a_t, typename F>
void cpu_map2(const Tensor& out0, const Tensor& out1, const Tensor& a, const F& f) {
  cpu_map_general<out0_t, out1_t, a_t>(out0, &out1, {&a}, f, std::index_sequence_for<a_t>{});
}
template <typename out0_t, typename out1_t, typename a_t, typename b_t, typename F>
void cpu_map2(const Tensor& out0, const Tensor& out1, const Tensor& a, const Tensor& b, const F& f) {
  cpu_map_general<out0_t, out1_t, a_t, b_t>(out0, &out1, {&a, &b}, f, std::index_sequence_for<a_t, b_t>{});
}

// The one-input to three-input loops above call f(values...); a functor that takes the
// index goes to the general map instead (elementwise_map chooses).
template <typename out_t, typename... in_t, typename F>
void cpu_map_any(const Tensor& out, const F& f, const std::array<const Tensor*, sizeof...(in_t)>& in) {
  if constexpr (elementwise::takes_index_v<F>) {
    cpu_map_general<out_t, elementwise::NoOutput, in_t...>(out, nullptr, in, f, std::index_sequence_for<in_t...>{});
  } else {
    std::apply([&](const auto*... t) { cpu_map<out_t, in_t...>(out, *t..., f); }, in);
  }
}

// ---- sums in a fixed order, and maxima, for the CPU reductions (ops/reduce.cpp, ops/softmax.cpp) ----

// Independent accumulators of a lane sum: enough to vectorize the loop and keep the adders
// busy (one accumulator is one long chain of dependent adds).
constexpr int kSumLanes = 16;

// The sum of term(i) for i in [0, n) in acc_t: term i adds into lane i % kSumLanes, and the
// lanes combine pairwise (combine_lanes: lane j += lane j + 8, then + 4, + 2, + 1). The order
// depends on n alone, so the bits do too. Inlined into each of the caller's instruction-set
// clones.
template <typename acc_t>
MG_INLINE_IN_CLONES acc_t combine_lanes(acc_t (&lane)[kSumLanes]) {
  for (int width = kSumLanes / 2; width > 0; width /= 2)
    for (int j = 0; j < width; ++j) lane[j] += lane[j + width];
  return lane[0];
}

// Calls f(i, i % kSumLanes) for i in [0, n), in order: the lane walk of sum_in_lanes, for a
// loop that accumulates several things in lanes at once (the normalizations' backward row)
// and still sums each in sum_in_lanes' order. Whole rounds of kSumLanes, the lane a constant
// of the inner loop, so that the compiler vectorizes across the lanes; then the tail.
template <typename F>
MG_INLINE_IN_CLONES void for_each_in_lanes(int64_t n, const F& f) {
  const int64_t whole = n / kSumLanes * kSumLanes;
  for (int64_t i = 0; i < whole; i += kSumLanes)
    for (int j = 0; j < kSumLanes; ++j) f(i + j, j);
  for (int64_t i = whole; i < n; ++i) f(i, static_cast<int>(i - whole));
}

template <typename acc_t, typename Term>
MG_INLINE_IN_CLONES acc_t sum_in_lanes(int64_t n, const Term& term) {
  acc_t lane[kSumLanes] = {};
  for_each_in_lanes(n, [&](int64_t i, int j) { lane[j] += term(i); });
  return combine_lanes(lane);
}

// The largest of v[0 .. n), NaNs skipped (as fmax does), -inf for none, in kSumLanes running
// maxima as sum_in_lanes sums: one running maximum makes each compare wait for the one before
// and stays scalar; the lanes' compares vectorize. A maximum rounds nothing, so the order
// changes no result (ops/softmax.cpp, ops/dropout.cpp).
template <typename T>
MG_INLINE_IN_CLONES T max_in_lanes(const T* v, int64_t n) {
  T lane[kSumLanes];
  for (int j = 0; j < kSumLanes; ++j) lane[j] = -std::numeric_limits<T>::infinity();
  for_each_in_lanes(n, [&](int64_t i, int j) { lane[j] = v[i] > lane[j] ? v[i] : lane[j]; });
  T best = -std::numeric_limits<T>::infinity();
  for (int j = 0; j < kSumLanes; ++j) best = lane[j] > best ? lane[j] : best;
  return best;
}

// ---- the same maps on out's device: the CPU loop above, or the CUDA engine ----
// The caller has checked that every tensor is on out's device.

template <typename out_t, typename a_t, typename F>
void elementwise_map(const char* op, const Tensor& out, const Tensor& a, const F& f) {
  if (out.device().is_cuda()) return cuda::launch_elementwise<out_t, a_t>(op, f, out, a);
  cpu_map_any<out_t, a_t>(out, f, {&a});
}

template <typename out_t, typename a_t, typename b_t, typename F>
void elementwise_map(const char* op, const Tensor& out, const Tensor& a, const Tensor& b, const F& f) {
  if (out.device().is_cuda()) return cuda::launch_elementwise<out_t, a_t, b_t>(op, f, out, a, b);
  cpu_map_any<out_t, a_t, b_t>(out, f, {&a, &b});
}

template <typename out_t, typename a_t, typename b_t, typename c_t, typename F>
void elementwise_map(const char* op, const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& c,
                     const F& f) {
  if (out.device().is_cuda()) return cuda::launch_elementwise<out_t, a_t, b_t, c_t>(op, f, out, a, b, c);
  cpu_map_any<out_t, a_t, b_t, c_t>(out, f, {&a, &b, &c});
}

template <typename out_t, typename a_t, typename b_t, typename c_t, typename d_t, typename F>
void elementwise_map(const char* op, const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& c,
                     const Tensor& d, const F& f) {
  if (out.device().is_cuda()) return cuda::launch_elementwise<out_t, a_t, b_t, c_t, d_t>(op, f, out, a, b, c, d);
  cpu_map<out_t, a_t, b_t, c_t, d_t>(out, a, b, c, d, f);
}

// Two outputs of one shape, f returning an OutputPair. The caller has checked that out1
// has out0's shape and device.
template <typename out0_t, typename out1_t, typename a_t, typename F>
void elementwise_map2(const char* op, const Tensor& out0, const Tensor& out1, const Tensor& a, const F& f) {
  if (out0.device().is_cuda()) return cuda::launch_elementwise2<out0_t, out1_t, a_t>(op, f, out0, out1, a);
  cpu_map2<out0_t, out1_t, a_t>(out0, out1, a, f);
}

template <typename out0_t, typename out1_t, typename a_t, typename b_t, typename F>
void elementwise_map2(const char* op, const Tensor& out0, const Tensor& out1, const Tensor& a, const Tensor& b,
                      const F& f) {
  if (out0.device().is_cuda()) return cuda::launch_elementwise2<out0_t, out1_t, a_t, b_t>(op, f, out0, out1, a, b);
  cpu_map2<out0_t, out1_t, a_t, b_t>(out0, out1, a, b, f);
}

// ---- floating-point ops: float32/float64 computed in their own type, float16/bfloat16 in float ----
// The output is new, contiguous, of the input's dtype, on the input's device.

template <typename F>
Tensor unary_float_op(const char* op, const Tensor& x, const F& f) {
  check_defined(op, "self", x);
  check_floating(op, "self", x);
  Tensor out = empty(x.sizes(), x.options());
  dispatch_floating(x.dtype(), [&](auto tag) {
    using scalar_t = decltype(tag);
    elementwise_map<scalar_t, scalar_t>(op, out, x, f);
  });
  return out;
}

template <typename F>
Tensor binary_float_op(const char* op, const Tensor& a, const Tensor& b, const F& f) {
  check_defined(op, "self", a);
  check_defined(op, "other", b);
  check_floating(op, "self", a);
  check_same_device(op, "self", a, "other", b);
  check_same_dtype(op, "self", a, "other", b);
  Tensor out = empty(broadcast_shapes(a.sizes(), b.sizes(), op), a.options());
  dispatch_floating(a.dtype(), [&](auto tag) {
    using scalar_t = decltype(tag);
    elementwise_map<scalar_t, scalar_t, scalar_t>(op, out, a, b, f);
  });
  return out;
}

}  // namespace minigrad
