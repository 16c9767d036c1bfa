// dropout and softmax_dropout, and their composite twins.
//
// Both drop element i (its index in x's row-major order, whatever x's strides) by the
// formula of kernels/dropout.h, keyed by one stream (seed, offset) that the call reserves
// from its Generator. The mask is never stored: the backward draws it again from the stream
// kept in the Function's State, so forward and backward drop the same elements.
//
// A call that drops nothing (training == false or p == 0, or an empty x) reserves no stream,
// as PyTorch's dropout consumes no random numbers in eval; dropout then returns x itself,
// softmax_dropout the softmax with its mask and scale.
//
//   dropout:          y = x * keep / (1 - p_q)        one engine pass (elementwise::DropoutScale),
//                                                     the backward the same pass on the gradient
//   softmax_dropout:  P = softmax(scale * x + mask)   along dim, mask additive, or bool (false
//                                                     masks out) and/or causal
//                     y = P * keep / (1 - p_q)
//   its backward:     dP = dy * keep / (1 - p_q)
//                     dx = scale * P * (dP - sum(dP * P))
//
// softmax_dropout's backward reads P only, and is a kernel: the op is once differentiable (a
// second backward is an error naming SoftmaxDropout). A row whose every element is masked
// out gives zeros, forward and backward (its twin gives NaN: softmax of -inf everywhere).
// The mask gets no gradient: a mask that requires grad is an error, rather than a gradient
// silently missing.
//
// The CPU loop runs on whole lanes (the elements along dim) per thread: the logits and their
// exponentials in the element type (float's exp is the vectorizable fast_math::exp_float, as
// in ops/softmax.cpp), the lane's sums in double, the dropout mask drawn once per group of 8.
// The GPU takes the row kernels of cuda/softmax_dropout.cu along the last dim of a
// contiguous x; another dim is moved last by a copy, and the kernel is told each element's
// index in x's order, so the same elements are dropped on both devices.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>
#include <vector>

#include <minigrad/autograd/function.h>
#include <minigrad/core/cpu_arch.h>
#include <minigrad/core/generator.h>
#include <minigrad/core/parallel.h>
#include <minigrad/core/shape.h>
#include <minigrad/cuda/softmax_dropout.h>
#include <minigrad/kernels/dropout.h>
#include <minigrad/kernels/fast_math.h>
#include <minigrad/ops/cpu_loops.h>
#include <minigrad/ops/ops.h>

namespace minigrad {
namespace {

void check_probability(const char* op, double p) {
  MG_CHECK(p >= 0.0 && p < 1.0, "{}: argument 'p' must be in [0, 1), got {}", op, p);
}

// The stream of one call that drops elements: reserved once, from `generator` or the default one.
dropout_bits::Mask reserve_mask(Generator* generator, double p) {
  const Generator::Stream stream = (generator ? *generator : default_generator()).reserve();
  return dropout_bits::Mask{stream.seed, stream.offset, dropout_bits::threshold_of(p)};
}

// v * keep(i) / (1 - p_q) for each element i of v, a new contiguous tensor: dropout's forward
// and backward.
Tensor scale_by_mask(const char* op, const Tensor& v, const dropout_bits::Mask& mask) {
  return unary_float_op(op, v, elementwise::DropoutScale{mask, mask.scale()});
}

// y = x * d with d = keep / (1 - p_q) a diagonal of constants: the backward is the same map
// applied to the gradient, so it is this Function again, and dropout is differentiable any
// number of times (each derivative one engine pass, the mask drawn again each time).
struct Dropout : Function<Dropout> {
  struct State {
    dropout_bits::Mask mask;
  };
  static Tensor forward(Context& ctx, const Tensor& x, const dropout_bits::Mask& mask) {
    ctx.state<State>().mask = mask;
    return scale_by_mask("dropout", x, mask);
  }
  static tensor_list backward(Context& ctx, tensor_list grads) {
    return {Dropout::apply(grads[0], ctx.state<State>().mask), Tensor()};
  }
};

// ---- softmax_dropout ----

// What one call computes, besides x.
struct SoftmaxDropoutSpec {
  int64_t dim = 0;     // wrapped
  double scale = 1.0;  // multiplies x before the mask is added
  Tensor mask;         // undefined, bool, or x's dtype; broadcasts to x
  bool is_causal = false;
  bool drop = false;  // false: P is the output
  dropout_bits::Mask dropout;
};

// Where the lanes lie: lane r (in row-major order over x's shape with dim taken out) starts
// at x_offset in x, mask_offset in the mask and at element `index` of x's row-major order,
// which is also its offset in the contiguous outputs.
struct LaneStart {
  int64_t x_offset = 0, mask_offset = 0, index = 0;
  int64_t row = 0;  // the lane's position along dim -2: the causal mask's query row
};

class Lanes {
 public:
  Lanes(const Tensor& x, const Shape& mask_strides, int64_t dim) : sizes_(x.sizes()), dim_(dim) {
    x_strides_ = x.strides();
    mask_strides_ = mask_strides;
    index_strides_ = contiguous_strides(sizes_);
  }
  int64_t count() const { return shape_numel(sizes_) / sizes_[static_cast<size_t>(dim_)]; }
  LaneStart start(int64_t lane) const {
    LaneStart s;
    for (int64_t d = static_cast<int64_t>(sizes_.size()) - 1; d >= 0; --d) {
      if (d == dim_) continue;
      const size_t k = static_cast<size_t>(d);
      const int64_t c = lane % sizes_[k];
      lane /= sizes_[k];
      s.x_offset += c * x_strides_[k];
      s.mask_offset += c * mask_strides_[k];
      s.index += c * index_strides_[k];
      if (d == static_cast<int64_t>(sizes_.size()) - 2) s.row = c;
    }
    return s;
  }
  int64_t x_step() const { return x_strides_[static_cast<size_t>(dim_)]; }
  int64_t mask_step() const { return mask_strides_[static_cast<size_t>(dim_)]; }
  int64_t index_step() const { return index_strides_[static_cast<size_t>(dim_)]; }

 private:
  Shape sizes_;
  int64_t dim_;
  Shape x_strides_, mask_strides_, index_strides_;
};

// scale * x + mask for element j of a lane, -inf where it is masked out. mask_t: bool, or
// the element type of an additive mask; `mask` null for none.
template <typename scalar_t, typename mask_t>
double masked_logit(const scalar_t* x, const mask_t* mask, const SoftmaxDropoutSpec& spec, const Lanes& lanes,
                    const LaneStart& s, int64_t j) {
  constexpr double kMaskedOut = -std::numeric_limits<double>::infinity();
  if (spec.is_causal && j > s.row) return kMaskedOut;
  double v = spec.scale * static_cast<double>(x[s.x_offset + j * lanes.x_step()]);
  if (mask) {
    const mask_t m = mask[s.mask_offset + j * lanes.mask_step()];
    if constexpr (std::is_same_v<mask_t, bool>)
      v = m ? v : kMaskedOut;
    else
      v += static_cast<double>(m);
  }
  return v;
}

// v[j] = e^(v[j] - shift): float's vectorizable exp (kernels/fast_math.h), std::exp for double.
template <typename T>
MG_CPU_CLONES static void exp_shifted(T* v, T shift, int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    if constexpr (std::is_same_v<T, float>)
      v[j] = fast_math::exp_float(v[j] - shift);
    else
      v[j] = std::exp(v[j] - shift);
  }
}

// P and y, both contiguous, for every lane of x (float or double; float16/bfloat16 upcast).
template <typename scalar_t, typename mask_t>
void softmax_dropout_lanes(const Tensor& x, const SoftmaxDropoutSpec& spec, const Tensor& probs, const Tensor& y) {
  const int64_t n = x.size(spec.dim);
  const Lanes lanes(x, spec.mask.defined() ? broadcast_strides(spec.mask, x.sizes()) : Shape(x.sizes().size(), 0),
                    spec.dim);
  const scalar_t* px = x.data_ptr<scalar_t>();
  const mask_t* pm = spec.mask.defined() ? static_cast<const mask_t*>(spec.mask.raw_data()) : nullptr;
  scalar_t* pp = probs.data_ptr<scalar_t>();
  scalar_t* py = y.data_ptr<scalar_t>();
  const scalar_t keep_scale = static_cast<scalar_t>(spec.dropout.scale());
  const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(n, 1));
  parallel_for(0, lanes.count(), grain, [&](int64_t begin, int64_t end) {
    // The lane's logits, then its exponentials: each element's logit and exp computed once,
    // the exponentials in the element type (float's exp vectorizes), their sum in double.
    std::vector<scalar_t> values(static_cast<size_t>(n));
    scalar_t* v = values.data();
    for (int64_t lane = begin; lane < end; ++lane) {
      const LaneStart s = lanes.start(lane);
      scalar_t lane_max = -std::numeric_limits<scalar_t>::infinity();
      for (int64_t j = 0; j < n; ++j) {
        v[j] = static_cast<scalar_t>(masked_logit<scalar_t, mask_t>(px, pm, spec, lanes, s, j));
        lane_max = std::fmax(lane_max, v[j]);
      }
      // Every element masked out: the lane's probabilities are 0, not exp(-inf - -inf) = NaN.
      const bool all_masked = lane_max == -std::numeric_limits<scalar_t>::infinity();
      if (all_masked)
        std::fill(v, v + n, scalar_t(0));
      else
        exp_shifted(v, lane_max, n);
      double sum_exp = 0.0;
      for (int64_t j = 0; j < n; ++j) sum_exp += static_cast<double>(v[j]);
      const double inverse = all_masked ? 0.0 : 1.0 / sum_exp;
      dropout_bits::MaskCursor keep(spec.dropout);
      for (int64_t j = 0; j < n; ++j) {
        const int64_t at = s.index + j * lanes.index_step();
        const scalar_t p = static_cast<scalar_t>(static_cast<double>(v[j]) * inverse);
        pp[at] = p;
        if (spec.drop) py[at] = p * (keep.keep(static_cast<uint64_t>(at)) ? keep_scale : scalar_t(0));
      }
    }
  });
}

// dx = scale * P * (dP - sum(dP * P)), dP = dy * keep / (1 - p_q), along each lane. P and dx
// contiguous, dy any strides (an expanded gradient has stride 0).
template <typename scalar_t>
void softmax_dropout_backward_lanes(const Tensor& grad, const Tensor& probs, const SoftmaxDropoutSpec& spec,
                                    const Tensor& grad_input) {
  const int64_t n = probs.size(spec.dim);
  const Lanes lanes(grad, Shape(probs.sizes().size(), 0), spec.dim);
  const scalar_t* pg = grad.data_ptr<scalar_t>();
  const scalar_t* pp = probs.data_ptr<scalar_t>();
  scalar_t* po = grad_input.data_ptr<scalar_t>();
  const double keep_scale = spec.dropout.scale();
  const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(n, 1));
  parallel_for(0, lanes.count(), grain, [&](int64_t begin, int64_t end) {
    std::vector<double> grad_probs(static_cast<size_t>(n));  // dP: the mask drawn once a lane
    for (int64_t lane = begin; lane < end; ++lane) {
      const LaneStart s = lanes.start(lane);
      dropout_bits::MaskCursor keep(spec.dropout);
      double total = 0.0;
      for (int64_t j = 0; j < n; ++j) {
        const int64_t at = s.index + j * lanes.index_step();
        double g = static_cast<double>(pg[s.x_offset + j * lanes.x_step()]);
        if (spec.drop) g *= keep.keep(static_cast<uint64_t>(at)) ? keep_scale : 0.0;
        grad_probs[static_cast<size_t>(j)] = g;
        total += g * static_cast<double>(pp[at]);
      }
      for (int64_t j = 0; j < n; ++j) {
        const int64_t at = s.index + j * lanes.index_step();
        po[at] = static_cast<scalar_t>(spec.scale * static_cast<double>(pp[at]) *
                                       (grad_probs[static_cast<size_t>(j)] - total));
      }
    }
  });
}

// ---- the GPU: contiguous rows along the last dim ----

// x moved to rows along the last dim: its dims permuted by swapping dim and the last, the
// mask the same way (as broadcast strides), and each element's index in x's order.
cuda::SoftmaxDropoutRows gpu_rows(const Tensor& x_rows, const SoftmaxDropoutSpec& spec, const Shape& x_sizes) {
  cuda::SoftmaxDropoutRows rows;
  const int64_t last = static_cast<int64_t>(x_sizes.size()) - 1;
  Shape index_strides = contiguous_strides(x_sizes);
  std::swap(index_strides[static_cast<size_t>(spec.dim)], index_strides[static_cast<size_t>(last)]);
  rows.index_strides = index_strides;
  if (spec.mask.defined()) {
    Shape mask_strides = broadcast_strides(spec.mask, x_sizes);
    std::swap(mask_strides[static_cast<size_t>(spec.dim)], mask_strides[static_cast<size_t>(last)]);
    rows.mask = spec.mask;
    rows.mask_strides = mask_strides;
  }
  rows.sizes = x_rows.sizes();
  rows.scale = spec.scale;
  rows.is_causal = spec.is_causal;
  rows.drop = spec.drop;
  rows.dropout = spec.dropout;
  return rows;
}

// P and y on the GPU: x's dim moved last and made contiguous, then the results moved back.
void softmax_dropout_cuda(const Tensor& x, const SoftmaxDropoutSpec& spec, Tensor& probs, Tensor& y) {
  const int64_t last = x.dim() - 1;
  const Tensor x_rows = x.transpose(spec.dim, last).contiguous();
  Tensor probs_rows = empty(x_rows.sizes(), TensorOptions(x.dtype()).device(x.device()));
  Tensor y_rows = spec.drop ? empty(x_rows.sizes(), TensorOptions(x.dtype()).device(x.device())) : probs_rows;
  cuda::softmax_dropout_rows(x_rows, gpu_rows(x_rows, spec, x.sizes()), probs_rows, y_rows);
  probs = probs_rows.transpose(spec.dim, last).contiguous();
  y = spec.drop ? y_rows.transpose(spec.dim, last).contiguous() : probs;
}

Tensor softmax_dropout_backward_cuda(const Tensor& grad, const Tensor& probs, const SoftmaxDropoutSpec& spec) {
  const int64_t last = probs.dim() - 1;
  const Tensor grad_rows = grad.transpose(spec.dim, last).contiguous();
  const Tensor probs_rows = probs.transpose(spec.dim, last).contiguous();
  Tensor grad_input_rows = empty(probs_rows.sizes(), TensorOptions(probs.dtype()).device(probs.device()));
  SoftmaxDropoutSpec no_mask = spec;
  no_mask.mask = Tensor();
  cuda::softmax_dropout_backward_rows(grad_rows, probs_rows, gpu_rows(probs_rows, no_mask, probs.sizes()),
                                      grad_input_rows);
  return grad_input_rows.transpose(spec.dim, last).contiguous();
}

// ---- the kernels on either device: P and y from x, dx from dy and P ----

void softmax_dropout_kernel(const Tensor& x, const SoftmaxDropoutSpec& spec, Tensor& probs, Tensor& y) {
  if (x.device().is_cuda()) return softmax_dropout_cuda(x, spec, probs, y);
  check_cpu("softmax_dropout", "self", x);
  if (is_half(x.dtype())) {
    SoftmaxDropoutSpec in_float = spec;
    if (spec.mask.defined() && spec.mask.dtype() != kBool) in_float.mask = copy_as(spec.mask, kFloat32, kCPU);
    Tensor probs_float, y_float;
    softmax_dropout_kernel(copy_as(x, kFloat32, kCPU), in_float, probs_float, y_float);
    probs = copy_as(probs_float, x.dtype(), kCPU);
    y = spec.drop ? copy_as(y_float, x.dtype(), kCPU) : probs;
    return;
  }
  probs = empty(x.sizes(), TensorOptions(x.dtype()));
  y = spec.drop ? empty(x.sizes(), TensorOptions(x.dtype())) : probs;
  if (x.numel() == 0) return;
  dispatch_floating(x.dtype(), [&](auto tag) {
    using scalar_t = decltype(tag);
    if constexpr (std::is_floating_point_v<scalar_t>) {
      if (spec.mask.defined() && spec.mask.dtype() == kBool)
        softmax_dropout_lanes<scalar_t, bool>(x, spec, probs, y);
      else
        softmax_dropout_lanes<scalar_t, scalar_t>(x, spec, probs, y);
    }
  });
}

Tensor softmax_dropout_backward_kernel(const Tensor& grad, const Tensor& probs, const SoftmaxDropoutSpec& spec) {
  const char* op = "softmax_dropout_backward";
  check_defined(op, "grad_output", grad);
  check_same_dtype(op, "grad_output", grad, "output", probs);
  check_same_device(op, "grad_output", grad, "output", probs);
  if (probs.device().is_cuda()) return softmax_dropout_backward_cuda(grad, probs, spec);
  check_cpu(op, "output", probs);
  if (is_half(probs.dtype()))
    return copy_as(softmax_dropout_backward_kernel(copy_as(grad, kFloat32, kCPU), copy_as(probs, kFloat32, kCPU), spec),
                   probs.dtype(), kCPU);
  Tensor grad_input = empty(probs.sizes(), TensorOptions(probs.dtype()));
  if (probs.numel() == 0) return grad_input;
  dispatch_floating(probs.dtype(), [&](auto tag) {
    using scalar_t = decltype(tag);
    if constexpr (std::is_floating_point_v<scalar_t>)
      softmax_dropout_backward_lanes<scalar_t>(grad, probs, spec, grad_input);
  });
  return grad_input;
}

struct SoftmaxDropout : Function<SoftmaxDropout> {
  static constexpr bool is_once_differentiable = true;
  struct State {
    SoftmaxDropoutSpec spec;
  };
  static Tensor forward(Context& ctx, const Tensor& x, const SoftmaxDropoutSpec& spec) {
    Tensor probs, y;
    softmax_dropout_kernel(x, spec, probs, y);
    // The backward reads P only. y is saved beside it (when it is not P itself) so that a
    // second backward reaches this node and fails naming it: the engine links a
    // once-differentiable backward to the saved tensors with history, and P has none. It
    // costs no memory where y is kept anyway (attention's next matmul saves it).
    if (spec.drop)
      ctx.save_for_backward({probs, y});
    else
      ctx.save_for_backward({probs});
    ctx.state<State>().spec = spec;
    ctx.state<State>().spec.mask = Tensor();  // the backward does not read it
    return y;
  }
  static tensor_list backward(Context& ctx, tensor_list grads) {
    const Tensor probs = ctx.saved_tensors()[0];
    return {softmax_dropout_backward_kernel(grads[0], probs, ctx.state<State>().spec), Tensor()};
  }
};

// The checks both softmax_dropout and its twin run: x, p, the mask, is_causal. Returns dim wrapped.
int64_t check_softmax_dropout(const char* op, const Tensor& x, int64_t dim, double p,
                              const std::optional<Tensor>& mask, bool is_causal) {
  check_defined(op, "self", x);
  check_floating(op, "self", x);
  check_probability(op, p);
  const int64_t wrapped = wrap_dim(dim, std::max<int64_t>(x.dim(), 1), op);
  if (mask) {
    check_defined(op, "mask", *mask);
    MG_CHECK(mask->dtype() == kBool || mask->dtype() == x.dtype(),
             "{}: argument 'mask' must be bool or of the dtype of 'self' ({}), got {}", op, x.dtype(), mask->dtype());
    check_same_device(op, "self", x, "mask", *mask);
    bool broadcasts = mask->dim() <= x.dim();
    for (int64_t i = 0; broadcasts && i < mask->dim(); ++i) {
      const int64_t size = mask->size(i);
      broadcasts = size == 1 || size == x.size(x.dim() - mask->dim() + i);
    }
    MG_CHECK(broadcasts, "{}: argument 'mask' has shape {}, which does not broadcast to the shape {} of 'self'", op,
             shape_str(mask->sizes()), shape_str(x.sizes()));
    MG_CHECK(!mask->requires_grad(),
             "{}: argument 'mask' requires grad, and no gradient is computed for the mask (pass mask.detach())", op);
  }
  if (is_causal)
    MG_CHECK(x.dim() >= 2 && wrapped == x.dim() - 1,
             "{}: is_causal masks the last two dims and needs dim to be the last one of an input of at least 2 dims, "
             "got dim {} of a {}-D 'self'",
             op, dim, x.dim());
  return wrapped;
}

}  // namespace

Tensor dropout(const Tensor& x, double p, bool training, Generator* generator) {
  check_defined("dropout", "self", x);
  check_floating("dropout", "self", x);
  check_probability("dropout", p);
  if (!training || p == 0.0 || x.numel() == 0) return x;
  return Dropout::apply(x, reserve_mask(generator, p));
}

Tensor softmax_dropout(const Tensor& x, int64_t dim, double p, bool training, const std::optional<Tensor>& mask,
                       bool is_causal, std::optional<double> scale, Generator* generator) {
  const char* op = "softmax_dropout";
  SoftmaxDropoutSpec spec;
  spec.dim = check_softmax_dropout(op, x, dim, p, mask, is_causal);
  if (x.dim() == 0)
    return softmax_dropout(x.reshape({1}), 0, p, training, mask ? std::optional<Tensor>(mask->reshape({1})) : mask,
                           is_causal, scale, generator)
        .reshape({});
  spec.scale = scale.value_or(1.0);
  if (mask) spec.mask = *mask;
  spec.is_causal = is_causal;
  spec.drop = training && p > 0.0 && x.numel() > 0;
  if (spec.drop) spec.dropout = reserve_mask(generator, p);
  return SoftmaxDropout::apply(x, spec);
}

namespace composite {

Tensor dropout_mask(const Shape& sizes, double p, uint64_t seed, uint64_t offset, TensorOptions options) {
  check_probability("dropout_mask", p);
  const dropout_bits::Mask mask{seed, offset, dropout_bits::threshold_of(p)};
  return unary_float_op("dropout_mask", ones(sizes, options), elementwise::DropoutScale{mask, 1.0});
}

double dropout_keep_scale(double p) { return dropout_bits::keep_scale(dropout_bits::threshold_of(p)); }

Tensor dropout(const Tensor& x, double p, bool training, Generator* generator) {
  check_defined("dropout", "self", x);
  check_floating("dropout", "self", x);
  check_probability("dropout", p);
  if (!training || p == 0.0 || x.numel() == 0) return x;
  const Generator::Stream stream = (generator ? *generator : default_generator()).reserve();
  const Tensor keep =
      dropout_mask(x.sizes(), p, stream.seed, stream.offset, TensorOptions(x.dtype()).device(x.device()));
  return x * (keep * dropout_keep_scale(p));
}

Tensor softmax_dropout(const Tensor& x, int64_t dim, double p, bool training, const std::optional<Tensor>& mask,
                       bool is_causal, std::optional<double> scale, Generator* generator) {
  const int64_t wrapped = check_softmax_dropout("softmax_dropout", x, dim, p, mask, is_causal);
  Tensor logits = scale ? x * *scale : x;
  if (mask) {
    const Tensor additive = mask->dtype() == kBool
                                ? where(*mask, 0.0, full({}, -std::numeric_limits<double>::infinity(),
                                                         TensorOptions(x.dtype()).device(x.device())))
                                : *mask;
    logits = logits + additive;
  }
  if (is_causal) {
    // Column j > row i: the future of each query row.
    const TensorOptions positions = TensorOptions(kInt64).device(x.device());
    const Tensor future = gt(arange(x.size(-1), positions).reshape({1, x.size(-1)}),
                             arange(x.size(-2), positions).reshape({x.size(-2), 1}));
    logits = masked_fill(logits, future, -std::numeric_limits<double>::infinity());
  }
  return composite::dropout(softmax(logits, wrapped), p, training, generator);
}

}  // namespace composite

}  // namespace minigrad
