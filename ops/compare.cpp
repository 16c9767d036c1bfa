// Comparisons (eq, ne, lt, le, gt, ge) and where.
//
// Comparisons return bool tensors. They are not differentiable (a step function has
// gradient 0 almost everywhere and none at the step), so they are plain functions, not
// Functions: their outputs never require grad and nothing is recorded on the tape.
// They take every dtype, both operands of one dtype, with NumPy broadcasting.
//
// where(condition, a, b) picks elementwise and is differentiable in a and b: each gets
// the output's gradient where it was picked and 0 where it was not.
#include <functional>
#include <type_traits>

#include "autograd/function.h"
#include "ops/cpu_loops.h"
#include "ops/ops.h"

namespace minigrad {
namespace {

// The value an element is compared as. float16 and bfloat16 have no comparison operators
// of their own: they compare as the float they stand for. Other types compare as themselves.
template <typename T>
auto comparable(T value) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
    return static_cast<float>(value);
  else
    return value;
}

// tensor (cmp) tensor, broadcasting. `compare` is a std::less<>-style function object.
template <typename Compare>
Tensor compare_tensors(const char* op, const Tensor& a, const Tensor& b, Compare compare) {
  check_defined(op, "self", a);
  check_defined(op, "other", b);
  check_same_device(op, "self", a, "other", b);
  check_same_dtype(op, "self", a, "other", b);
  check_cpu(op, "self", a);
  Tensor out = empty(broadcast_shapes(a.sizes(), b.sizes(), op), TensorOptions(kBool).device(a.device()));
  dispatch_all(a.dtype(), [&](auto tag) {
    using scalar_t = decltype(tag);
    cpu_map<bool, scalar_t, scalar_t>(out, a, b, [&](scalar_t x, scalar_t y) {
      return compare(comparable(x), comparable(y));
    });
  });
  return out;
}

// tensor (cmp) scalar. A floating tensor meets the scalar rounded to its own dtype, as
// ops.h promises ("a double scalar takes the tensor's dtype"): a float32 tensor holding
// 0.1f is eq(x, 0.1). An int64 or bool tensor compares in double instead, so lt(i, 2.5)
// means i < 2.5 and not i < 2 (exact for integers up to 2^53).
template <typename Compare>
Tensor compare_scalar(const char* op, const Tensor& a, double b, Compare compare) {
  check_defined(op, "self", a);
  check_cpu(op, "self", a);
  Tensor out = empty(a.sizes(), TensorOptions(kBool).device(a.device()));
  dispatch_all(a.dtype(), [&](auto tag) {
    using scalar_t = decltype(tag);
    if constexpr (std::is_integral_v<scalar_t>) {
      cpu_map<bool, scalar_t>(out, a, [&](scalar_t x) { return compare(static_cast<double>(x), b); });
    } else {
      const auto rhs = comparable(static_cast<scalar_t>(b));
      cpu_map<bool, scalar_t>(out, a, [&](scalar_t x) { return compare(comparable(x), rhs); });
    }
  });
  return out;
}

// cond ? a : b. The kernel only moves elements, so it serves every dtype (no upcast).
struct Where : Function<Where> {
  static Tensor forward(Context& ctx, const Tensor& condition, const Tensor& a, const Tensor& b) {
    check_defined("where", "condition", condition);
    check_defined("where", "self", a);
    check_defined("where", "other", b);
    MG_CHECK(condition.dtype() == kBool, "where: expected argument 'condition' to have dtype bool, got {}",
             condition.dtype());
    check_same_dtype("where", "self", a, "other", b);
    check_same_device("where", "condition", condition, "self", a);
    check_same_device("where", "self", a, "other", b);
    check_cpu("where", "self", a);
    const Shape out_sizes =
        broadcast_shapes(condition.sizes(), broadcast_shapes(a.sizes(), b.sizes(), "where"), "where");
    Tensor out = empty(out_sizes, TensorOptions(a.dtype()).device(a.device()));
    dispatch_all(a.dtype(), [&](auto tag) {
      using scalar_t = decltype(tag);
      cpu_map<scalar_t, bool, scalar_t, scalar_t>(out, condition, a, b,
                                                  [](bool c, scalar_t x, scalar_t y) { return c ? x : y; });
    });
    ctx.save_for_backward({condition});
    ctx.saved_data["self_sizes"] = a.sizes();
    ctx.saved_data["other_sizes"] = b.sizes();
    return out;
  }
  static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
    const Tensor& grad = grad_outputs[0];
    const Tensor condition = ctx.saved_tensors()[0];
    // One zero, broadcast by where to the gradient's shape: no zero-filled copy of grad.
    const Tensor zero = zeros({}, TensorOptions(grad.dtype()).device(grad.device()));
    Tensor grad_a, grad_b;
    if (ctx.needs_input_grad(1))
      grad_a = sum_to(where(condition, grad, zero), ctx.saved_data["self_sizes"].toShape());
    if (ctx.needs_input_grad(2))
      grad_b = sum_to(where(condition, zero, grad), ctx.saved_data["other_sizes"].toShape());
    return {Tensor(), grad_a, grad_b};
  }
};

}  // namespace

Tensor eq(const Tensor& a, const Tensor& b) { return compare_tensors("eq", a, b, std::equal_to<>()); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare_tensors("ne", a, b, std::not_equal_to<>()); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare_tensors("lt", a, b, std::less<>()); }
Tensor le(const Tensor& a, const Tensor& b) { return compare_tensors("le", a, b, std::less_equal<>()); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare_tensors("gt", a, b, std::greater<>()); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare_tensors("ge", a, b, std::greater_equal<>()); }

Tensor eq(const Tensor& a, double b) { return compare_scalar("eq", a, b, std::equal_to<>()); }
Tensor ne(const Tensor& a, double b) { return compare_scalar("ne", a, b, std::not_equal_to<>()); }
Tensor lt(const Tensor& a, double b) { return compare_scalar("lt", a, b, std::less<>()); }
Tensor le(const Tensor& a, double b) { return compare_scalar("le", a, b, std::less_equal<>()); }
Tensor gt(const Tensor& a, double b) { return compare_scalar("gt", a, b, std::greater<>()); }
Tensor ge(const Tensor& a, double b) { return compare_scalar("ge", a, b, std::greater_equal<>()); }

Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b) { return Where::apply(condition, a, b); }

}  // namespace minigrad
