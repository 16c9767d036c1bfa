// Bool ops: logical_and/or/xor/not, bitwise_and/or/xor/not (and the operators & | ^ ~),
// the tests isnan/isinf/isfinite, and isclose, allclose, equal.
//
// None is differentiable (their values are bools, or piecewise constant), so they are plain
// functions, not Functions: nothing is recorded on the tape, as for the comparisons.
//
// The logical ops read any dtype as truth values, nonzero true (NaN too, as in PyTorch). An
// operand that is not bool is made bool first with ne(x, 0) (the comparison kernel), and the
// op itself is the bitwise kernel on bools: one kernel per op, not one per pair of dtypes.
#include <minigrad/ops/cpu_loops.h>
#include <minigrad/ops/ops.h>

namespace minigrad {
namespace {

// t as truth values: itself when bool, else t != 0.
Tensor truth_values(const Tensor& t) { return t.dtype() == kBool ? t : ne(t, 0.0); }

template <typename F>
Tensor logical_binary(const char* op, const Tensor& a, const Tensor& b, const F& f) {
  check_defined(op, "self", a);
  check_defined(op, "other", b);
  check_same_device(op, "self", a, "other", b);
  Tensor out = empty(broadcast_shapes(a.sizes(), b.sizes(), op), TensorOptions(kBool).device(a.device()));
  elementwise_map<bool, bool, bool>(op, out, truth_values(a), truth_values(b), f);
  return out;
}

void check_bitwise_dtype(const char* op, const char* arg, const Tensor& t) {
  MG_CHECK(t.dtype() == kBool || t.dtype() == kInt64, "{}: expected a bool or int64 tensor for argument '{}', got {}",
           op, arg, t.dtype());
}

// Calls f(T{}) with T bool or int64_t, the dtype checked above.
template <typename F>
void dispatch_bitwise(DType dtype, F&& f) {
  if (dtype == kBool)
    f(bool{});
  else
    f(int64_t{});
}

template <typename F>
Tensor bitwise_binary(const char* op, const Tensor& a, const Tensor& b, const F& f) {
  check_defined(op, "self", a);
  check_defined(op, "other", b);
  check_bitwise_dtype(op, "self", a);
  check_same_dtype(op, "self", a, "other", b);
  check_same_device(op, "self", a, "other", b);
  Tensor out = empty(broadcast_shapes(a.sizes(), b.sizes(), op), a.options());
  dispatch_bitwise(a.dtype(), [&](auto tag) {
    using scalar_t = decltype(tag);
    elementwise_map<scalar_t, scalar_t, scalar_t>(op, out, a, b, f);
  });
  return out;
}

// A test of each value of a floating tensor (isinf, isfinite); for int64 and bool, which
// hold neither NaN nor infinities, every element gives `integer_answer`.
template <typename F>
Tensor test_values(const char* op, const Tensor& x, const F& f, bool integer_answer) {
  check_defined(op, "self", x);
  const TensorOptions options = TensorOptions(kBool).device(x.device());
  if (!is_floating(x.dtype())) return full(x.sizes(), integer_answer ? 1.0 : 0.0, options);
  Tensor out = empty(x.sizes(), options);
  dispatch_floating(x.dtype(), [&](auto tag) {
    using scalar_t = decltype(tag);
    elementwise_map<bool, scalar_t>(op, out, x, f);
  });
  return out;
}

// Whether every element of a bool tensor is true (so: none of an empty one is false). The
// sum of a bool tensor counts its true elements, on either device.
bool all_true(const Tensor& t) { return sum(t).item<int64_t>() == t.numel(); }

// isclose for isclose and allclose (`op` names the one called). Floating tensors in their
// compute type; int64 in float64 (exact up to 2^53); bool values are close only when equal.
Tensor close_elements(const char* op, const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  check_defined(op, "self", a);
  check_defined(op, "other", b);
  check_same_dtype(op, "self", a, "other", b);
  check_same_device(op, "self", a, "other", b);
  MG_CHECK(rtol >= 0.0, "{}: argument 'rtol' must be at least 0, got {}", op, rtol);
  MG_CHECK(atol >= 0.0, "{}: argument 'atol' must be at least 0, got {}", op, atol);
  if (a.dtype() == kBool) return eq(a, b);
  if (a.dtype() == kInt64) return close_elements(op, a.to(kFloat64), b.to(kFloat64), rtol, atol, equal_nan);
  Tensor out = empty(broadcast_shapes(a.sizes(), b.sizes(), op), TensorOptions(kBool).device(a.device()));
  dispatch_floating(a.dtype(), [&](auto tag) {
    using scalar_t = decltype(tag);
    elementwise_map<bool, scalar_t, scalar_t>(op, out, a, b, elementwise::IsClose{rtol, atol, equal_nan});
  });
  return out;
}

}  // namespace

Tensor logical_and(const Tensor& a, const Tensor& b) {
  return logical_binary("logical_and", a, b, elementwise::BitwiseAnd{});
}
Tensor logical_or(const Tensor& a, const Tensor& b) {
  return logical_binary("logical_or", a, b, elementwise::BitwiseOr{});
}
Tensor logical_xor(const Tensor& a, const Tensor& b) {
  return logical_binary("logical_xor", a, b, elementwise::BitwiseXor{});
}
// not x is x == 0, in any dtype (NaN == 0 is false: NaN is true, so not NaN is false).
Tensor logical_not(const Tensor& x) {
  check_defined("logical_not", "self", x);
  return eq(x, 0.0);
}

Tensor bitwise_and(const Tensor& a, const Tensor& b) {
  return bitwise_binary("bitwise_and", a, b, elementwise::BitwiseAnd{});
}
Tensor bitwise_or(const Tensor& a, const Tensor& b) {
  return bitwise_binary("bitwise_or", a, b, elementwise::BitwiseOr{});
}
Tensor bitwise_xor(const Tensor& a, const Tensor& b) {
  return bitwise_binary("bitwise_xor", a, b, elementwise::BitwiseXor{});
}
Tensor bitwise_not(const Tensor& x) {
  check_defined("bitwise_not", "self", x);
  check_bitwise_dtype("bitwise_not", "self", x);
  Tensor out = empty(x.sizes(), x.options());
  dispatch_bitwise(x.dtype(), [&](auto tag) {
    using scalar_t = decltype(tag);
    elementwise_map<scalar_t, scalar_t>("bitwise_not", out, x, elementwise::BitwiseNot{});
  });
  return out;
}

// NaN is the one value not equal to itself (PyTorch defines isnan so): the comparison kernel,
// in every dtype, false throughout for int64 and bool.
Tensor isnan(const Tensor& x) {
  check_defined("isnan", "self", x);
  return ne(x, x);
}
Tensor isinf(const Tensor& x) { return test_values("isinf", x, elementwise::IsInf{}, false); }
Tensor isfinite(const Tensor& x) { return test_values("isfinite", x, elementwise::IsFinite{}, true); }

Tensor isclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  return close_elements("isclose", a, b, rtol, atol, equal_nan);
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  return all_true(close_elements("allclose", a, b, rtol, atol, equal_nan));
}

// Tensors of different shapes are not equal (no broadcasting, unlike allclose).
bool equal(const Tensor& a, const Tensor& b) {
  check_defined("equal", "self", a);
  check_defined("equal", "other", b);
  check_same_dtype("equal", "self", a, "other", b);
  check_same_device("equal", "self", a, "other", b);
  return a.sizes() == b.sizes() && all_true(eq(a, b));
}

// The member forms (core/tensor.h).
Tensor Tensor::logical_and(const Tensor& other) const { return minigrad::logical_and(*this, other); }
Tensor Tensor::logical_or(const Tensor& other) const { return minigrad::logical_or(*this, other); }
Tensor Tensor::logical_xor(const Tensor& other) const { return minigrad::logical_xor(*this, other); }
Tensor Tensor::logical_not() const { return minigrad::logical_not(*this); }
Tensor Tensor::bitwise_and(const Tensor& other) const { return minigrad::bitwise_and(*this, other); }
Tensor Tensor::bitwise_or(const Tensor& other) const { return minigrad::bitwise_or(*this, other); }
Tensor Tensor::bitwise_xor(const Tensor& other) const { return minigrad::bitwise_xor(*this, other); }
Tensor Tensor::bitwise_not() const { return minigrad::bitwise_not(*this); }
Tensor Tensor::isnan() const { return minigrad::isnan(*this); }
Tensor Tensor::isinf() const { return minigrad::isinf(*this); }
Tensor Tensor::isfinite() const { return minigrad::isfinite(*this); }
Tensor Tensor::isclose(const Tensor& other, double rtol, double atol, bool equal_nan) const {
  return minigrad::isclose(*this, other, rtol, atol, equal_nan);
}
bool Tensor::allclose(const Tensor& other, double rtol, double atol, bool equal_nan) const {
  return minigrad::allclose(*this, other, rtol, atol, equal_nan);
}
bool Tensor::equal(const Tensor& other) const { return minigrad::equal(*this, other); }

}  // namespace minigrad
