// The losses: mse_loss and cross_entropy, with PyTorch's arguments and meanings.
//
// cross_entropy(logits [N, C], targets [N]) with ignore_index, label_smoothing eps and a
// reduction. Row i with target t has the loss
//   L_i = lse_i - (1 - eps) * x_it - eps * mean_j x_ij,     lse_i = log sum_j exp(x_ij)
// (the negative log-probability of t, mixed with that of the uniform distribution), 0 for a
// row whose target is ignore_index; Mean divides the sum by the number of rows not ignored.
// Its gradient is, for each row not ignored,
//   dL_i/dx_ij = softmax_ij - (1 - eps) * [j == t] - eps / C
// written here by hand (the Function CrossEntropy): the forward keeps lse, one float a row,
// and the backward recomputes softmax from it. Half-precision logits are computed in float32.
// The composite twin is log_softmax + gather + mean on the tape.
//
// On CUDA (cuda/cross_entropy.cu) the forward is one kernel that reads each row of the logits
// from memory once, computes its loss with an online softmax in float32 (double for float64
// logits) and, when the logits require grad, writes their gradient in the same pass: the
// gradient for dy = 1, with the reduction's weight folded in (1 / rows counted for Mean, a
// count that stays on the device), in the logits' dtype. Why: the backward would read the
// logits again, and for a vocabulary-sized [N, C] that read is the whole cost of the op;
// writing the gradient while the row is at hand makes forward + backward one read of the
// logits and one write of the gradient. The node then holds the gradient (the logits' size)
// instead of the logits and lse; its backward multiplies it by dy in place, which for
// loss.backward() (dy = 1) is one launch that touches nothing, and hands it over. Handed
// over, it is gone: a second backward through the same node (retain_graph) is an error, and
// composite::cross_entropy is the one to use for that. The targets are counted and
// range-checked by one small kernel, whose out-of-range count is the one value the host reads
// (as on the CPU, a bad target is an error, not a wrong loss).
// float16 is the exception: its forward writes no gradient, and the backward computes it from
// the logits as the CPU does. float16 ends at 6e-8, and a gradient stored for dy = 1 has most
// of a vocabulary's elements below that (w p with p ~ 1 / C and w = 1 / rows for Mean): they
// would be stored as 0 and stay 0 when a loss scale (dy = 2^16) is meant to bring them back into
// range. Computed with dy folded in, they are rounded once, as in PyTorch. bfloat16 has float's
// range, and the extra rounding costs it at most one of its 8 bits.
//
// mse_loss is mean((input - target)^2) (or the sum, or each element): composed of ops, the
// tape differentiates it.
#include <optional>
#include <utility>

#include <minigrad/autograd/function.h>
#include <minigrad/cuda/cross_entropy.h>
#include <minigrad/ops/cpu_loops.h>
#include <minigrad/ops/ops.h>

namespace minigrad {
namespace {

Tensor reduce(const Tensor& per_element, Reduction reduction) {
  switch (reduction) {
    case Reduction::None: return per_element;
    case Reduction::Sum: return sum(per_element);
    case Reduction::Mean: return mean(per_element);
  }
  return per_element;
}

// cross_entropy's reduction of its per-row losses: Mean divides by the rows counted (valid),
// not by N; 0 / 0 = NaN when every row is ignored, as in PyTorch.
Tensor reduce_rows(const Tensor& rows, const Tensor& valid, Reduction reduction) {
  if (reduction == Reduction::Mean) return sum(rows) / sum(valid.to(rows.dtype()));
  return reduce(rows, reduction);
}

struct CrossEntropyOptions {
  int64_t ignore_index;
  double label_smoothing;
  Reduction reduction;
};

// The logits in the dtype the loss is computed in: float32 for the half types.
Tensor computed(const Tensor& logits) { return is_half(logits.dtype()) ? logits.to(kFloat32) : logits; }

// Which rows count (target != ignore_index), and the targets with the ignored ones set to 0
// so that they can index.
std::pair<Tensor, Tensor> valid_targets(const Tensor& targets, int64_t ignore_index) {
  const Tensor valid = ne(targets, static_cast<double>(ignore_index));
  return {valid, masked_fill(targets, logical_not(valid), 0.0)};
}

// Targets other than ignore_index must be class indices: an out-of-range index is an error
// rather than a wrong loss.
void check_targets_in_range(bool in_range, int64_t classes, int64_t ignore_index) {
  MG_CHECK(in_range, "cross_entropy: a target is outside [0, {}) and is not ignore_index ({})", classes, ignore_index);
}

// The gradient from the logits, the targets, each row's lse and dy, with tensor ops: the CPU's
// backward (and a CUDA node's whose forward wrote no gradient).
Tensor gradient_by_ops(const Tensor& logits, const Tensor& targets, const Tensor& lse, const Tensor& dy,
                       const CrossEntropyOptions& o) {
  const Tensor x = computed(logits);
  const auto [valid, safe_targets] = valid_targets(targets, o.ignore_index);
  const int64_t classes = x.size(1);
  const Tensor is_target = eq(safe_targets.unsqueeze(1), arange(classes, TensorOptions(kInt64).device(x.device())));
  Tensor grad = exp(x - lse.unsqueeze(1)) - is_target.to(x.dtype()) * (1.0 - o.label_smoothing);
  if (o.label_smoothing != 0.0) grad = grad - o.label_smoothing / static_cast<double>(classes);
  // Each row's factor: dy (one for all rows, or one a row with None; divided by the rows
  // counted with Mean), 0 for the ignored rows. With every row ignored the Mean loss is 0 / 0
  // = NaN but nothing depends on the logits: their gradient is 0, as in PyTorch (the count is
  // clamped to 1 so that 0 * (1 / 0) does not make it NaN).
  const Tensor counted = valid.to(x.dtype());
  const Tensor g = dy.to(x.dtype());
  const Tensor scale = counted * (o.reduction == Reduction::Mean ? g / clamp_min(sum(counted), 1.0) : g);
  return (grad * scale.unsqueeze(1)).to(logits.dtype());
}

struct CrossEntropy : Function<CrossEntropy> {
  static constexpr bool is_once_differentiable = true;
  struct State {
    CrossEntropyOptions options;
    // CUDA: the gradient for dy = 1, written by the forward's kernel, until backward hands it over.
    Tensor gradient;
    bool gradient_handed_over = false;
  };
  static Tensor forward(Context& ctx, const Tensor& logits, const Tensor& targets, const CrossEntropyOptions& o) {
    ctx.state<State>().options = o;
    if (logits.device().is_cuda()) return forward_cuda(ctx, logits, targets, o);
    const Tensor x = computed(logits);
    const auto [valid, safe_targets] = valid_targets(targets, o.ignore_index);
    const Tensor lse = logsumexp(x, {1});
    const Tensor picked = gather(x, 1, safe_targets.unsqueeze(1)).squeeze(1);
    Tensor rows = lse - picked * (1.0 - o.label_smoothing);
    if (o.label_smoothing != 0.0) rows = rows - mean(x, {1}) * o.label_smoothing;
    rows = where(valid, rows, 0.0);
    ctx.save_for_backward({logits, targets, lse});
    return reduce_rows(rows, valid, o.reduction).to(logits.dtype());
  }
  static tensor_list backward(Context& ctx, tensor_list grads) {
    State& s = ctx.state<State>();
    MG_CHECK(!s.gradient_handed_over,
             "cross_entropy: on CUDA the gradient is computed by the forward and handed over by the first backward, "
             "so a second backward through the same call (retain_graph) has none left; call cross_entropy again, "
             "or use composite::cross_entropy to backpropagate through one call more than once");
    if (s.gradient.defined()) {
      cuda::cross_entropy_scale_grad(s.gradient, grads[0].to(s.gradient.dtype()));
      s.gradient_handed_over = true;
      return {std::exchange(s.gradient, Tensor()), Tensor(), Tensor()};
    }
    const tensor_list saved = ctx.saved_tensors();
    // The CPU's forward saved each row's lse; a CUDA forward that wrote no gradient (float16)
    // saved only the logits and the targets.
    const Tensor lse = saved.size() == 3 ? saved[2] : logsumexp(computed(saved[0]), {1});
    return {gradient_by_ops(saved[0], saved[1], lse, grads[0], s.options), Tensor(), Tensor()};
  }

  // The CUDA forward: the loss, and the gradient when the logits require grad (forward runs
  // under no_grad, so the context says whether a gradient is wanted: apply() sets it before
  // calling forward when it records the node, and leaves it false when it records none).
  static Tensor forward_cuda(Context& ctx, const Tensor& logits, const Tensor& targets, const CrossEntropyOptions& o) {
    const int64_t classes = logits.size(1);
    // counts = {rows not ignored, targets out of range}.
    const Tensor counts = empty({2}, TensorOptions(kInt64).device(logits.device()));
    cuda::cross_entropy_count_targets(targets, classes, o.ignore_index, counts);
    check_targets_in_range(counts.select(0, 1).item<int64_t>() == 0, classes, o.ignore_index);
    const Tensor counted = counts.select(0, 0);
    const Tensor x = logits.contiguous();
    const DType loss_dtype = x.dtype() == kFloat64 ? kFloat64 : kFloat32;
    const Tensor rows = empty({x.size(0)}, TensorOptions(loss_dtype).device(x.device()));
    Tensor gradient;
    // float16: no gradient for dy = 1, which would underflow (the top of the file says why).
    if (ctx.needs_input_grad(0) && x.dtype() != kFloat16)
      gradient = empty(x.sizes(), x.options());
    cuda::cross_entropy_rows(x, targets,
                             {o.ignore_index, o.label_smoothing, o.reduction == Reduction::Mean ? counted : Tensor()},
                             rows, gradient);
    if (gradient.defined())
      ctx.state<State>().gradient = gradient;
    else
      ctx.save_for_backward({logits, targets});
    Tensor loss;
    switch (o.reduction) {
      case Reduction::None: loss = rows; break;
      case Reduction::Sum: loss = sum(rows); break;
      case Reduction::Mean: loss = sum(rows) / counted.to(loss_dtype); break;  // 0 / 0 = NaN: all ignored
    }
    return loss.to(logits.dtype());
  }
};

void check_cross_entropy(const Tensor& logits, const Tensor& targets, double label_smoothing) {
  const char* op = "cross_entropy";
  check_defined(op, "input", logits);
  check_defined(op, "target", targets);
  check_floating(op, "input", logits);
  check_same_device(op, "input", logits, "target", targets);
  MG_CHECK(targets.dtype() == kInt64, "{}: argument 'target' must hold int64 class indices, got {}", op,
           targets.dtype());
  MG_CHECK(logits.dim() == 2 && targets.dim() == 1 && targets.size(0) == logits.size(0),
           "{}: expected 'input' [N, C] and 'target' [N], got {} and {}", op, shape_str(logits.sizes()),
           shape_str(targets.sizes()));
  MG_CHECK(logits.size(1) > 0, "{}: 'input' has no classes (shape {})", op, shape_str(logits.sizes()));
  MG_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0, "{}: label_smoothing must be in [0, 1], got {}", op,
           label_smoothing);
}

// The targets' range with tensor ops, read on the host (one synchronization on a GPU).
void check_targets(const Tensor& targets, int64_t classes, int64_t ignore_index) {
  const Tensor valid = ne(targets, static_cast<double>(ignore_index));
  const bool in_range = logical_or(logical_not(valid), logical_and(ge(targets, 0.0), lt(targets, static_cast<double>(classes))))
                            .all()
                            .item<bool>();
  check_targets_in_range(in_range, classes, ignore_index);
}

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index, double label_smoothing,
                     Reduction reduction) {
  check_cross_entropy(logits, targets, label_smoothing);
  // On CUDA the forward checks the targets with the kernel that counts them.
  if (!logits.device().is_cuda()) check_targets(targets, logits.size(1), ignore_index);
  return CrossEntropy::apply(logits, targets, CrossEntropyOptions{ignore_index, label_smoothing, reduction});
}

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  check_defined("mse_loss", "input", input);
  check_defined("mse_loss", "target", target);
  check_floating("mse_loss", "input", input);
  MG_CHECK(input.sizes() == target.sizes(), "mse_loss: 'input' has shape {} and 'target' {}: they must match",
           shape_str(input.sizes()), shape_str(target.sizes()));
  const Tensor difference = input - target;
  return reduce(difference * difference, reduction);
}

namespace composite {

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index, double label_smoothing,
                     Reduction reduction) {
  check_cross_entropy(logits, targets, label_smoothing);
  check_targets(targets, logits.size(1), ignore_index);
  const auto [valid, safe_targets] = valid_targets(targets, ignore_index);
  const Tensor log_p = log_softmax(computed(logits), 1);
  Tensor rows = -gather(log_p, 1, safe_targets.unsqueeze(1)).squeeze(1) * (1.0 - label_smoothing);
  if (label_smoothing != 0.0) rows = rows - mean(log_p, {1}) * label_smoothing;
  rows = where(valid, rows, 0.0);
  return reduce_rows(rows, valid, reduction).to(logits.dtype());
}

}  // namespace composite

}  // namespace minigrad
