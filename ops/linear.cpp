// linear(x, weight, bias) = x W^T + b, in PyTorch's layout: weight [out, in], x [..., in]
// (or [in]), bias [out] or none; the result is [..., out] (or [out]).
//
// The tutorial's C++ op, written as a Function: a forward, and a backward that is the two
// products the tutorial names, plus the bias's sum, each computed only where its input needs
// a gradient (needs_input_grad):
//   backward_input:  dx = dy W            [..., out] x [out, in]
//   backward_weight: dW = dy^T x          [out, N] x [N, in], with the leading dims of x and
//                                         dy folded into N: one GEMM whose inner size is N
//   backward_bias:   db = dy summed over the leading dims
// The products are matmul (cuBLAS on the GPU, reading the transposed views in place) and
// the sum is sum: ops on the tape, so linear's backward is itself differentiable and linear
// is twice differentiable.
//
// The composite twin, composite::linear, is matmul(x, weight^T) + bias, differentiated op by
// op by the tape.
#include <optional>

#include <minigrad/autograd/function.h>
#include <minigrad/core/shape.h>
#include <minigrad/ops/cpu_loops.h>
#include <minigrad/ops/ops.h>

namespace minigrad {
namespace {

// t with its leading dims folded into rows: [N, last dim] (a 1-D t is one row).
Tensor as_rows(const Tensor& t) {
  const Shape leading(t.sizes().begin(), t.sizes().end() - 1);
  return t.reshape({shape_numel(leading), t.size(-1)});
}

// dx = dy W, in x's shape.
Tensor backward_input(const Tensor& grad_rows, const Tensor& weight, const Shape& x_sizes) {
  return matmul(grad_rows, weight).reshape(x_sizes);
}

// dW = dy^T x over all rows.
Tensor backward_weight(const Tensor& grad_rows, const Tensor& x_rows) { return matmul(grad_rows.t(), x_rows); }

// db = dy summed over all rows.
Tensor backward_bias(const Tensor& grad_rows) { return sum(grad_rows, {0}); }

struct Linear : Function<Linear> {
  static Tensor forward(Context& ctx, const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias) {
    ctx.save_for_backward({x, weight});
    Tensor y = matmul(as_rows(x), weight.t());
    if (bias) y = y + *bias;
    Shape out_sizes = x.sizes();
    out_sizes.back() = weight.size(0);
    return y.reshape(out_sizes);
  }
  static tensor_list backward(Context& ctx, tensor_list grads) {
    const tensor_list saved = ctx.saved_tensors();
    const Tensor& x = saved[0];
    const Tensor& weight = saved[1];
    const Tensor grad_rows = as_rows(grads[0]);
    Tensor dx, dw, db;
    if (ctx.needs_input_grad(0)) dx = backward_input(grad_rows, weight, x.sizes());
    if (ctx.needs_input_grad(1)) dw = backward_weight(grad_rows, as_rows(x));
    if (ctx.needs_input_grad(2)) db = backward_bias(grad_rows);
    return {dx, dw, db};
  }
};

// The checks linear and its twin share.
void check_linear(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias) {
  const char* op = "linear";
  check_defined(op, "input", x);
  check_defined(op, "weight", weight);
  check_floating(op, "input", x);
  check_same_dtype(op, "input", x, "weight", weight);
  check_same_device(op, "input", x, "weight", weight);
  MG_CHECK(weight.dim() == 2, "{}: argument 'weight' must be 2-D [out_features, in_features], got shape {}", op,
           shape_str(weight.sizes()));
  MG_CHECK(x.dim() >= 1, "{}: argument 'input' must have at least 1 dim, got a 0-d tensor", op);
  MG_CHECK(x.size(-1) == weight.size(1),
           "{}: the last dim of 'input' ({}) must equal in_features, the size of dim 1 of 'weight' {}", op,
           x.size(-1), shape_str(weight.sizes()));
  if (bias) {
    check_defined(op, "bias", *bias);
    check_same_dtype(op, "input", x, "bias", *bias);
    check_same_device(op, "input", x, "bias", *bias);
    MG_CHECK(bias->dim() == 1 && bias->size(0) == weight.size(0),
             "{}: argument 'bias' must be 1-D of out_features = {} elements, got shape {}", op, weight.size(0),
             shape_str(bias->sizes()));
  }
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias) {
  check_linear(x, weight, bias);
  return Linear::apply(x, weight, bias);
}

namespace composite {

Tensor linear(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias) {
  check_linear(x, weight, bias);
  const Tensor y = matmul(x, weight.t());
  return bias ? y + *bias : y;
}

}  // namespace composite

}  // namespace minigrad
