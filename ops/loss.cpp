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
// mse_loss is mean((input - target)^2) (or the sum, or each element): composed of ops, the
// tape differentiates it.
#include <optional>

#include <minigrad/autograd/function.h>
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

struct CrossEntropy : Function<CrossEntropy> {
  static constexpr bool is_once_differentiable = true;
  struct State {
    CrossEntropyOptions options;
  };
  static Tensor forward(Context& ctx, const Tensor& logits, const Tensor& targets, const CrossEntropyOptions& o) {
    ctx.state<State>().options = o;
    const Tensor x = computed(logits);
    const auto [valid, safe_targets] = valid_targets(targets, o.ignore_index);
    const Tensor lse = logsumexp(x, {1});
    const Tensor picked = gather(x, 1, safe_targets.unsqueeze(1)).squeeze(1);
    Tensor rows = lse - picked * (1.0 - o.label_smoothing);
    if (o.label_smoothing != 0.0) rows = rows - mean(x, {1}) * o.label_smoothing;
    rows = where(valid, rows, 0.0);
    ctx.save_for_backward({logits, targets, lse});
    Tensor loss;
    switch (o.reduction) {
      case Reduction::None: loss = rows; break;
      case Reduction::Sum: loss = sum(rows); break;
      case Reduction::Mean: loss = sum(rows) / sum(valid.to(rows.dtype())); break;  // 0 / 0 = NaN: all ignored
    }
    return loss.to(logits.dtype());
  }
  static tensor_list backward(Context& ctx, tensor_list grads) {
    const tensor_list saved = ctx.saved_tensors();
    const Tensor& logits = saved[0];
    const CrossEntropyOptions& o = ctx.state<State>().options;
    const Tensor x = computed(logits);
    const auto [valid, safe_targets] = valid_targets(saved[1], o.ignore_index);
    const int64_t classes = x.size(1);
    const Tensor is_target = eq(safe_targets.unsqueeze(1), arange(classes, TensorOptions(kInt64).device(x.device())));
    Tensor grad = exp(x - saved[2].unsqueeze(1)) - is_target.to(x.dtype()) * (1.0 - o.label_smoothing);
    if (o.label_smoothing != 0.0) grad = grad - o.label_smoothing / static_cast<double>(classes);
    Tensor scale = valid.to(x.dtype());  // [N]: 0 for the ignored rows
    const Tensor g = grads[0].to(x.dtype());
    switch (o.reduction) {
      case Reduction::None: scale = scale * g; break;
      case Reduction::Sum: scale = scale * g; break;
      case Reduction::Mean: scale = scale * (g / sum(valid.to(x.dtype()))); break;
    }
    return {(grad * scale.unsqueeze(1)).to(logits.dtype()), Tensor(), Tensor()};
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

// Targets other than ignore_index must be class indices: checked on the host (one
// synchronization), as an out-of-range index is an error rather than a wrong loss.
void check_targets(const Tensor& targets, int64_t classes, int64_t ignore_index) {
  const Tensor valid = ne(targets, static_cast<double>(ignore_index));
  const bool in_range = logical_or(logical_not(valid), logical_and(ge(targets, 0.0), lt(targets, static_cast<double>(classes))))
                            .all()
                            .item<bool>();
  MG_CHECK(in_range, "cross_entropy: a target is outside [0, {}) and is not ignore_index ({})", classes, ignore_index);
}

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index, double label_smoothing,
                     Reduction reduction) {
  check_cross_entropy(logits, targets, label_smoothing);
  check_targets(targets, logits.size(1), ignore_index);
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
  Tensor loss = reduction == Reduction::Mean ? sum(rows) / sum(valid.to(rows.dtype())) : reduce(rows, reduction);
  return loss.to(logits.dtype());
}

}  // namespace composite

}  // namespace minigrad
