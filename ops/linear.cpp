// The linear layers: linear(x, weight, bias) = x W^T + b in PyTorch's layout (weight [out,
// in], x [..., in] or [in], bias [out] or none; the result [..., out]), linear_gelu =
// gelu(linear(...)), and mlp, the transformer's feed-forward block linear(gelu(linear(x, w1,
// b1)), w2, b2).
//
// The tutorial's C++ op, written as a Function: a forward, and a backward that is the two
// products the tutorial names, plus the bias's sum, each computed only where its input needs
// a gradient (needs_input_grad):
//   backward_input:  dx = dy W            [..., out] x [out, in]
//   backward_weight: dW = dy^T x          [out, N] x [N, in], with the leading dims of x and
//                                         dy folded into N: one GEMM whose inner size is N
//   backward_bias:   db = dy summed over the leading dims
// linear_gelu's backward is the same with dy replaced by d(pre) = dy * gelu'(pre), pre = x W^T
// + b being the pre-activation its forward keeps.
//
// On the GPU the work around each GEMM moves into the GEMM's epilogue (cuda/blaslt.h), where
// the output tile is still in registers: the forward's bias and GELU, linear's and mlp's
// backward bias sums (accumulated while dW's GEMM reads dy) and, in mlp, gelu' applied to the
// GEMM that computes the hidden layer's gradient. What cuBLASLt does not offer runs as ops
// after the GEMM: the exact (erf) GELU, which its epilogues do not have, and GELU in float32
// and float64, which they compute at half precision (gelu_epilogue_serves).
// linear_gelu's own gelu' applies to the incoming gradient rather than to a GEMM's output: one
// elementwise pass (cuda/gelu_bias_backward.h), which sums the bias gradient too as it goes,
// since it reads every element of d(pre) anyway; dW's GEMM then runs without an epilogue,
// faster than with the bias-gradient one. mlp keeps that epilogue for b1: where its d(pre)
// comes out of a GEMM's gelu' epilogue (half precision, tanh form), there is no elementwise
// pass to sum in.
// On the CPU every step is an op: matmul, add, gelu, sum.
//
// Differentiating twice: the backward is written with ops (matmul, gelu_backward, sum), so
// under create_graph it is recorded like a forward. The epilogues are not differentiable
// steps, so the backward takes them only when no graph is being built; with one, it
// recomputes the pre-activation on the tape (the saved one carries no history: x, W and b
// reach the second derivative through it).
//
// The composite twins (composite::linear, linear_gelu, mlp) are matmul, add and gelu,
// differentiated op by op by the tape.
#include <optional>

#include <minigrad/autograd/function.h>
#include <minigrad/autograd/grad_mode.h>
#include <minigrad/core/shape.h>
#include <minigrad/cuda/blaslt.h>
#include <minigrad/cuda/gelu_bias_backward.h>
#include <minigrad/ops/cpu_loops.h>
#include <minigrad/ops/ops.h>

namespace minigrad {
namespace {

using cuda::GemmEpilogue;

// t with its leading dims folded into rows: [N, last dim] (a 1-D t is one row).
Tensor as_rows(const Tensor& t) {
  const Shape leading(t.sizes().begin(), t.sizes().end() - 1);
  return t.reshape({shape_numel(leading), t.size(-1)});
}

// The layer's output shape: x's with the last dim out_features.
Shape output_sizes(const Tensor& x, int64_t out_features) {
  Shape sizes = x.sizes();
  sizes.back() = out_features;
  return sizes;
}

// A saved bias as the optional it came from (forward saves an absent bias as undefined).
std::optional<Tensor> optional_bias(const Tensor& saved) {
  return saved.defined() ? std::optional<Tensor>(saved) : std::nullopt;
}

// Whether a backward may take the epilogues: on the GPU, and not recording a graph.
bool fused_backward(const Tensor& t) { return t.device().is_cuda() && !GradMode::is_enabled(); }

// Whether cuBLASLt's GELU epilogues are precise enough for the dtype: only for float16 and
// bfloat16. They evaluate tanh at about float16's precision: on an H200 their gelu' in
// float32 was off by 2e-5 relative (float32's own rounding is 6e-8), their GELU in float64 by
// 2e-9 (docs/perf-notes.md). A half-precision result rounds that away; a float32 or float64
// user expects their dtype's precision, and gets the GEMM with the bias epilogue and the
// project's GELU kernels.
bool gelu_epilogue_serves(const Tensor& t, GeluApproximation approximate) {
  return t.device().is_cuda() && is_half(t.dtype()) && approximate == GeluApproximation::Tanh;
}

// ---- the forward products ----

// x_rows W^T + b. On the GPU the bias is the GEMM's epilogue.
Tensor affine(const Tensor& x_rows, const Tensor& weight, const std::optional<Tensor>& bias) {
  if (x_rows.device().is_cuda() && bias) {
    const Tensor out = empty({x_rows.size(0), weight.size(0)}, x_rows.options());
    if (cuda::gemm_with_epilogue(x_rows, weight.t(), out, GemmEpilogue::Bias, bias->contiguous())) return out;
  }
  const Tensor y = matmul(x_rows, weight.t());
  return bias ? y + *bias : y;
}

// gelu(x_rows W^T + b), and, where keep_pre, the pre-activation x_rows W^T + b that the
// backward needs. On the GPU with the tanh form, one GEMM writes both; a forward that records
// nothing (no input requires grad) has no backward, and its GEMM writes y alone.
struct Activated {
  Tensor y, pre;  // pre: undefined where not kept
};
Activated affine_gelu(const Tensor& x_rows, const Tensor& weight, const std::optional<Tensor>& bias,
                      GeluApproximation approximate, bool keep_pre) {
  if (gelu_epilogue_serves(x_rows, approximate)) {
    const Tensor y = empty({x_rows.size(0), weight.size(0)}, x_rows.options());
    const Tensor pre = keep_pre ? empty({x_rows.size(0), weight.size(0)}, x_rows.options()) : Tensor();
    const bool fused = bias ? cuda::gemm_with_epilogue(x_rows, weight.t(), y, GemmEpilogue::GeluBias,
                                                       bias->contiguous(), pre)
                            : cuda::gemm_with_epilogue(x_rows, weight.t(), y, GemmEpilogue::Gelu, Tensor(), pre);
    if (fused) return {y, pre};
  }
  const Tensor pre = affine(x_rows, weight, bias);
  return {gelu(pre, approximate), pre};
}

// ---- the backward products ----

// dx = d_rows W, in x's shape.
Tensor backward_input(const Tensor& d_rows, const Tensor& weight, const Shape& x_sizes) {
  return matmul(d_rows, weight).reshape(x_sizes);
}

// dW = d_rows^T x_rows, and db = d_rows summed over its rows, each where wanted. On the GPU
// the sum is dW's epilogue: it reads d_rows for the GEMM anyway.
struct WeightGrads {
  Tensor weight, bias;
};
WeightGrads backward_weight_and_bias(const Tensor& d_rows, const Tensor& x_rows, bool want_weight, bool want_bias) {
  if (want_weight && want_bias && fused_backward(d_rows)) {
    const Tensor d = d_rows.contiguous();  // read as d^T: a transposed view of a row-major d
    const Tensor dw = empty({d.size(1), x_rows.size(1)}, d.options());
    const Tensor db = empty({d.size(1)}, d.options());
    if (cuda::gemm_with_epilogue(d.t(), x_rows, dw, GemmEpilogue::BiasGradOfA, db)) return {dw, db};
  }
  return {want_weight ? matmul(d_rows.t(), x_rows) : Tensor(), want_bias ? sum(d_rows, {0}) : Tensor()};
}

// ---- the Functions ----

struct Linear : Function<Linear> {
  static Tensor forward(Context& ctx, const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias) {
    ctx.save_for_backward({x, weight});
    return affine(as_rows(x), weight, bias).reshape(output_sizes(x, weight.size(0)));
  }
  static tensor_list backward(Context& ctx, tensor_list grads) {
    const tensor_list saved = ctx.saved_tensors();
    const Tensor& x = saved[0];
    const Tensor& weight = saved[1];
    const Tensor grad_rows = as_rows(grads[0]);
    Tensor dx;
    if (ctx.needs_input_grad(0)) dx = backward_input(grad_rows, weight, x.sizes());
    const WeightGrads dw = backward_weight_and_bias(grad_rows, as_rows(x), ctx.needs_input_grad(1),
                                                    ctx.needs_input_grad(2));
    return {dx, dw.weight, dw.bias};
  }
};

struct LinearGelu : Function<LinearGelu> {
  struct State {
    GeluApproximation approximate = GeluApproximation::None;
  };
  static Tensor forward(Context& ctx, const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias,
                        GeluApproximation approximate) {
    const Activated a = affine_gelu(as_rows(x), weight, bias, approximate, ctx.needs_any_input_grad());
    ctx.state<State>().approximate = approximate;
    ctx.save_for_backward({x, weight, bias.value_or(Tensor()), a.pre});
    return a.y.reshape(output_sizes(x, weight.size(0)));
  }
  static tensor_list backward(Context& ctx, tensor_list grads) {
    const GeluApproximation approximate = ctx.state<State>().approximate;
    const tensor_list saved = ctx.saved_tensors();
    const Tensor& x = saved[0];
    const Tensor& weight = saved[1];
    const std::optional<Tensor> bias = optional_bias(saved[2]);
    const Tensor x_rows = as_rows(x);
    // Recording a graph: the pre-activation again, on the tape (see the top of the file).
    const Tensor pre = GradMode::is_enabled() ? composite::linear(x_rows, weight, bias) : saved[3];
    // On the GPU, d(pre) and the bias's gradient in one pass (see the top of the file); the
    // bias is wanted only where the forward had one.
    const Tensor grad_rows = as_rows(grads[0]);
    Tensor d_pre, db;
    if (ctx.needs_input_grad(2) && fused_backward(grad_rows)) {
      const Tensor g = grad_rows.contiguous();
      const Tensor d = empty(g.sizes(), g.options());
      const Tensor b = empty({g.size(1)}, g.options());
      if (cuda::gelu_backward_and_bias_grad(g, pre.contiguous(), approximate, d, b)) {
        d_pre = d;
        db = b;
      }
    }
    if (!d_pre.defined()) d_pre = gelu_backward(grad_rows, pre, approximate);
    Tensor dx;
    if (ctx.needs_input_grad(0)) dx = backward_input(d_pre, weight, x.sizes());
    WeightGrads dw =
        backward_weight_and_bias(d_pre, x_rows, ctx.needs_input_grad(1), ctx.needs_input_grad(2) && !db.defined());
    if (db.defined()) dw.bias = db;
    return {dx, dw.weight, dw.bias, Tensor()};
  }
};

// y = h W2^T + b2, h = gelu(pre), pre = x W1^T + b1. The forward keeps pre and h (what eager
// PyTorch keeps too): h for dW2, pre for gelu'.
struct Mlp : Function<Mlp> {
  struct State {
    GeluApproximation approximate = GeluApproximation::None;
  };
  static Tensor forward(Context& ctx, const Tensor& x, const Tensor& w1, const std::optional<Tensor>& b1,
                        const Tensor& w2, const std::optional<Tensor>& b2, GeluApproximation approximate) {
    const Activated hidden = affine_gelu(as_rows(x), w1, b1, approximate, ctx.needs_any_input_grad());
    const Tensor y = affine(hidden.y, w2, b2);
    ctx.state<State>().approximate = approximate;
    ctx.save_for_backward({x, w1, b1.value_or(Tensor()), w2, hidden.pre, hidden.y});
    return y.reshape(output_sizes(x, w2.size(0)));
  }
  static tensor_list backward(Context& ctx, tensor_list grads) {
    const GeluApproximation approximate = ctx.state<State>().approximate;
    const tensor_list saved = ctx.saved_tensors();
    const Tensor& x = saved[0];
    const Tensor& w1 = saved[1];
    const std::optional<Tensor> b1 = optional_bias(saved[2]);
    const Tensor& w2 = saved[3];
    const Tensor x_rows = as_rows(x);
    Tensor pre = saved[4], h = saved[5];
    if (GradMode::is_enabled()) {  // recording a graph: the hidden layer again, on the tape
      pre = composite::linear(x_rows, w1, b1);
      h = gelu(pre, approximate);
    }
    const Tensor g = as_rows(grads[0]).contiguous();
    const WeightGrads d2 = backward_weight_and_bias(g, h, ctx.needs_input_grad(3), ctx.needs_input_grad(4));

    Tensor dx, dw1, db1;
    const bool want_hidden = ctx.needs_input_grad(0) || ctx.needs_input_grad(1) || ctx.needs_input_grad(2);
    if (want_hidden) {
      // d(pre) = (g W2) * gelu'(pre): on the GPU (tanh form, half types) gelu' in the epilogue
      // of the GEMM g W2. b1's gradient, the sum of d(pre)'s rows, comes from dW1's epilogue,
      // not from cuBLASLt's DGELU_BGRAD: on an H200 that epilogue made the GEMM 3.2x slower
      // than the bare one, where DGELU alone costs 1.36x and the sum in dW1's GEMM 1.25x
      // (docs/perf-notes.md).
      Tensor d_pre;
      if (fused_backward(g) && gelu_epilogue_serves(g, approximate)) {
        const Tensor out = empty({g.size(0), w2.size(1)}, g.options());
        if (cuda::gemm_with_epilogue(g, w2, out, GemmEpilogue::DGelu, Tensor(), pre.contiguous())) d_pre = out;
      }
      if (!d_pre.defined()) d_pre = gelu_backward(matmul(g, w2), pre, approximate);
      if (ctx.needs_input_grad(0)) dx = backward_input(d_pre, w1, x.sizes());
      const WeightGrads d1 =
          backward_weight_and_bias(d_pre, x_rows, ctx.needs_input_grad(1), ctx.needs_input_grad(2));
      dw1 = d1.weight;
      db1 = d1.bias;
    }
    return {dx, dw1, db1, d2.weight, d2.bias, Tensor()};
  }
};

// A layer's bias: none, or 1-D of out_features elements, of x's dtype and device.
void check_bias(const char* op, const Tensor& x, const char* bias_name, const std::optional<Tensor>& bias,
                int64_t out_features) {
  if (!bias) return;
  check_defined(op, bias_name, *bias);
  check_same_dtype(op, "input", x, bias_name, *bias);
  check_same_device(op, "input", x, bias_name, *bias);
  MG_CHECK(bias->dim() == 1 && bias->size(0) == out_features,
           "{}: argument '{}' must be 1-D of out_features = {} elements, got shape {}", op, bias_name, out_features,
           shape_str(bias->sizes()));
}

// The checks of the first (or only) layer: x [..., in] into weight [out, in], bias [out].
void check_layer(const char* op, const Tensor& x, const char* weight_name, const Tensor& weight,
                 const char* bias_name, const std::optional<Tensor>& bias) {
  check_defined(op, "input", x);
  check_defined(op, weight_name, weight);
  check_floating(op, "input", x);
  check_same_dtype(op, "input", x, weight_name, weight);
  check_same_device(op, "input", x, weight_name, weight);
  MG_CHECK(weight.dim() == 2, "{}: argument '{}' must be 2-D [out_features, in_features], got shape {}", op,
           weight_name, shape_str(weight.sizes()));
  MG_CHECK(x.dim() >= 1, "{}: argument 'input' must have at least 1 dim, got a 0-d tensor", op);
  MG_CHECK(x.size(-1) == weight.size(1),
           "{}: the last dim of 'input' ({}) must equal in_features, the size of dim 1 of '{}' {}", op, x.size(-1),
           weight_name, shape_str(weight.sizes()));
  check_bias(op, x, bias_name, bias, weight.size(0));
}

void check_linear(const char* op, const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias) {
  check_layer(op, x, "weight", weight, "bias", bias);
}

// The second layer reads the hidden layer, whose width is w1's out_features.
void check_mlp(const Tensor& x, const Tensor& w1, const std::optional<Tensor>& b1, const Tensor& w2,
               const std::optional<Tensor>& b2) {
  const char* op = "mlp";
  check_layer(op, x, "w1", w1, "b1", b1);
  check_defined(op, "w2", w2);
  check_same_dtype(op, "input", x, "w2", w2);
  check_same_device(op, "input", x, "w2", w2);
  MG_CHECK(w2.dim() == 2 && w2.size(1) == w1.size(0),
           "{}: argument 'w2' must be 2-D [out_features, hidden] with hidden = {} (dim 0 of 'w1' {}), got shape {}",
           op, w1.size(0), shape_str(w1.sizes()), shape_str(w2.sizes()));
  check_bias(op, x, "b2", b2, w2.size(0));
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias) {
  check_linear("linear", x, weight, bias);
  return Linear::apply(x, weight, bias);
}

Tensor linear_gelu(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias,
                   GeluApproximation approximate) {
  check_linear("linear_gelu", x, weight, bias);
  return LinearGelu::apply(x, weight, bias, approximate);
}

Tensor mlp(const Tensor& x, const Tensor& w1, const std::optional<Tensor>& b1, const Tensor& w2,
           const std::optional<Tensor>& b2, GeluApproximation approximate) {
  check_mlp(x, w1, b1, w2, b2);
  return Mlp::apply(x, w1, b1, w2, b2, approximate);
}

namespace composite {

Tensor linear(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias) {
  check_linear("linear", x, weight, bias);
  const Tensor y = matmul(x, weight.t());
  return bias ? y + *bias : y;
}

Tensor linear_gelu(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias,
                   GeluApproximation approximate) {
  check_linear("linear_gelu", x, weight, bias);
  return gelu(composite::linear(x, weight, bias), approximate);
}

Tensor mlp(const Tensor& x, const Tensor& w1, const std::optional<Tensor>& b1, const Tensor& w2,
           const std::optional<Tensor>& b2, GeluApproximation approximate) {
  check_mlp(x, w1, b1, w2, b2);
  return composite::linear(composite::linear_gelu(x, w1, b1, approximate), w2, b2);
}

}  // namespace composite

}  // namespace minigrad
