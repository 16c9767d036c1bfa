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
//   its backward:     P = exp(scale * x + mask - L)   again, from x and the lane's log-sum-exp L
//                     dP = dy * keep / (1 - p_q)
//                     dx = scale * P * (dP - sum(dP * P))
//
// softmax_dropout saves x, the mask and L (one float a lane), not P: the forward then moves
// two tensors of x's size (x in, y out) rather than three, and nothing of x's size is held for
// the backward beyond x, which the caller holds anyway. The backward redoes the logits, the
// exponentials and the mask, and is a kernel: the op is once differentiable (a second
// backward is an error naming SoftmaxDropout). A lane whose every element is masked out gives
// zeros, forward and backward (its twin gives NaN: softmax of -inf everywhere); its L is +inf,
// so that exp(logit - L) is 0 there too. The mask gets no gradient: a mask that requires grad
// is an error, rather than a gradient silently missing.
//
// The CPU loop runs on whole lanes (the elements along dim) per thread, each step of a lane a
// loop of its own that vectorizes (MG_CPU_CLONES) where the lane is contiguous: the logits
// and their exponentials in the element type (float's exp is the vectorizable
// fast_math::exp_float, as in ops/softmax.cpp), the lane's sums in double, the dropout mask
// drawn once per group of 8, a lane's groups by one loop over independent Philox calls.
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

// The lanes of x along spec.dim, with the mask read at its broadcast strides (0 where absent).
Lanes lanes_of(const Tensor& x, const SoftmaxDropoutSpec& spec) {
  return Lanes(x, spec.mask.defined() ? broadcast_strides(spec.mask, x.sizes()) : Shape(x.sizes().size(), 0),
               spec.dim);
}

// The mask's elements (bool, or the additive mask's dtype), or null without a mask.
template <typename mask_t>
const mask_t* mask_data(const SoftmaxDropoutSpec& spec) {
  return spec.mask.defined() ? static_cast<const mask_t*>(spec.mask.raw_data()) : nullptr;
}

// ---- one lane's loops: each a function compiled per instruction set (MG_CPU_CLONES), so
// that they vectorize where the lane is contiguous ----

template <typename T>
constexpr T kMaskedOut = -std::numeric_limits<T>::infinity();

// v[j] = scale * x[j * step].
template <typename T>
MG_CPU_CLONES static void scaled_lane(const T* x, int64_t step, T scale, int64_t n, T* v) {
  for (int64_t j = 0; j < n; ++j) v[j] = scale * x[j * step];
}

// An additive mask: v[j] += mask[j * step].
template <typename T>
MG_CPU_CLONES static void add_lane(const T* mask, int64_t step, int64_t n, T* v) {
  for (int64_t j = 0; j < n; ++j) v[j] += mask[j * step];
}

// A bool mask: v[j] = -inf where mask[j * step] is false.
template <typename T>
MG_CPU_CLONES static void mask_lane(const bool* mask, int64_t step, int64_t n, T* v) {
  for (int64_t j = 0; j < n; ++j) v[j] = mask[j * step] ? v[j] : kMaskedOut<T>;
}

// The lane's largest logit (cpu_loops.h), compiled for each instruction set.
template <typename T>
MG_CPU_CLONES static T lane_max(const T* v, int64_t n) {
  return max_in_lanes(v, n);
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

// In kSumLanes lanes (cpu_loops.h): one running sum made each add wait for the one before
// (a 4096-element lane, 4096 dependent adds), where the lanes' adds overlap and vectorize.
template <typename T>
MG_CPU_CLONES static double sum_as_double(const T* v, int64_t n) {
  return sum_in_lanes<double>(n, [&](int64_t j) { return static_cast<double>(v[j]); });
}

// out[j] = v[j] * factor * keep[j] (keep[j] = 1 everywhere when `keep` is null).
template <typename T>
MG_CPU_CLONES static void scale_lane(const T* v, T factor, const T* keep, int64_t n, T* out) {
  if (keep == nullptr) {
    for (int64_t j = 0; j < n; ++j) out[j] = v[j] * factor;
  } else {
    for (int64_t j = 0; j < n; ++j) out[j] = v[j] * factor * keep[j];
  }
}

// The keep bits of groups first .. first + count - 1 (dropout_bits::keep_bits): a loop over
// independent Philox calls, which the compiler vectorizes (AVX2 multiplies four 32-bit
// pairs into 64-bit products at once). Philox is most of the CPU op's time otherwise.
MG_CPU_CLONES static void keep_bits_of_groups(const dropout_bits::Mask& mask, uint64_t first, int64_t count,
                                              uint32_t* bits) {
  for (int64_t g = 0; g < count; ++g) bits[g] = mask.keep_bits(first + static_cast<uint64_t>(g));
}

// keep[j] = kept where bit `offset + j` of the groups' bits is set (bit k of group g is bit
// 8g + k), else 0. A lane that starts a group (offset 0, as every lane of a row whose length
// is a multiple of 8 does) goes a group at a time: the inner loop's 8 shifts are constants,
// and kept times the bit (0 or 1: the same values as a select) leaves no branch, so the loop
// vectorizes; bit by bit, with a select, it took most of the CPU op's dropout time.
template <typename T>
MG_CPU_CLONES static void expand_keep_bits(const uint32_t* bits, int64_t offset, T kept, int64_t n, T* keep) {
  constexpr int64_t kGroup = dropout_bits::kElementsPerBlock;
  int64_t j = 0;
  if (offset == 0) {
    for (; j + kGroup <= n; j += kGroup) {
      const uint32_t group = bits[j / kGroup];
      for (int64_t k = 0; k < kGroup; ++k) keep[j + k] = kept * static_cast<T>((group >> k) & 1u);  // no branch
    }
  }
  for (; j < n; ++j) {
    const int64_t i = offset + j;
    keep[j] = (bits[i / kGroup] >> (i % kGroup)) & 1u ? kept : T(0);
  }
}

// The lane's keep factors: keep[j] = 1 / (1 - p_q) where element `first + j * step` of x's
// order is kept, else 0. One Philox call per group of 8 indices met: consecutive indices
// (step 1) go a group at a time, into `bits` (the caller's scratch, reused lane after lane),
// any other order through the cursor.
template <typename T>
void keep_factors(const dropout_bits::Mask& mask, int64_t first, int64_t step, int64_t n, T* keep,
                  std::vector<uint32_t>& bits) {
  constexpr int64_t kGroup = dropout_bits::kElementsPerBlock;
  const T kept = static_cast<T>(mask.scale());
  if (step != 1) {
    dropout_bits::MaskCursor cursor(mask);
    for (int64_t j = 0; j < n; ++j) keep[j] = cursor.keep(static_cast<uint64_t>(first + j * step)) ? kept : T(0);
    return;
  }
  const int64_t first_group = first / kGroup;
  const int64_t groups = (first + n - 1) / kGroup - first_group + 1;
  bits.resize(static_cast<size_t>(groups));
  keep_bits_of_groups(mask, static_cast<uint64_t>(first_group), groups, bits.data());
  expand_keep_bits(bits.data(), first - first_group * kGroup, kept, n, keep);
}

// The logits of one lane, scale * x + mask, -inf where masked out, into v.
template <typename scalar_t, typename mask_t>
void lane_logits(const scalar_t* x, const mask_t* mask, const SoftmaxDropoutSpec& spec, const Lanes& lanes,
                 const LaneStart& s, int64_t n, scalar_t* v) {
  scaled_lane(x + s.x_offset, lanes.x_step(), static_cast<scalar_t>(spec.scale), n, v);
  if (mask) {
    if constexpr (std::is_same_v<mask_t, bool>)
      mask_lane(mask + s.mask_offset, lanes.mask_step(), n, v);
    else
      add_lane(mask + s.mask_offset, lanes.mask_step(), n, v);
  }
  if (spec.is_causal && s.row + 1 < n) std::fill(v + s.row + 1, v + n, kMaskedOut<scalar_t>);  // j > row
}

// y (contiguous) and each lane's log-sum-exp L = log(sum(exp(logits))) (lse[lane]; +inf for a
// lane masked out everywhere, so that exp(logit - L) is 0 there too) for every lane of x
// (float or double; float16/bfloat16 upcast).
template <typename scalar_t, typename mask_t>
void softmax_dropout_lanes(const Tensor& x, const SoftmaxDropoutSpec& spec, const Tensor& y,
                           const Tensor& log_sum_exp) {
  const int64_t n = x.size(spec.dim);
  const Lanes lanes = lanes_of(x, spec);
  const scalar_t* px = x.data_ptr<scalar_t>();
  const mask_t* pm = mask_data<mask_t>(spec);
  scalar_t* py = y.data_ptr<scalar_t>();
  scalar_t* pl = log_sum_exp.data_ptr<scalar_t>();
  const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(n, 1));
  parallel_for(0, lanes.count(), grain, [&](int64_t begin, int64_t end) {
    // The lane's logits, then its exponentials in the element type (float's exp vectorizes),
    // their sum in double; the keep factors; then y, written in place where y's lane is
    // contiguous (the softmax dim is x's last), else through `values`.
    std::vector<scalar_t> values(static_cast<size_t>(n)), keep(spec.drop ? static_cast<size_t>(n) : 0);
    std::vector<uint32_t> keep_bits;
    scalar_t* v = values.data();
    for (int64_t lane = begin; lane < end; ++lane) {
      const LaneStart s = lanes.start(lane);
      lane_logits(px, pm, spec, lanes, s, n, v);
      const scalar_t max = lane_max(v, n);
      // Every element masked out: the lane's probabilities are 0, not exp(-inf - -inf) = NaN.
      const bool all_masked = max == kMaskedOut<scalar_t>;
      if (all_masked)
        std::fill(v, v + n, scalar_t(0));
      else
        exp_shifted(v, max, n);
      const double sum_exp = sum_as_double(v, n);
      pl[lane] = all_masked ? std::numeric_limits<scalar_t>::infinity()
                            : static_cast<scalar_t>(static_cast<double>(max) + std::log(sum_exp));
      if (spec.drop) keep_factors(spec.dropout, s.index, lanes.index_step(), n, keep.data(), keep_bits);
      const scalar_t inverse = all_masked ? scalar_t(0) : static_cast<scalar_t>(1.0 / sum_exp);
      if (lanes.index_step() == 1) {
        scale_lane(v, inverse, spec.drop ? keep.data() : nullptr, n, py + s.index);
      } else {
        scale_lane(v, inverse, spec.drop ? keep.data() : nullptr, n, v);
        for (int64_t j = 0; j < n; ++j) py[s.index + j * lanes.index_step()] = v[j];
      }
    }
  });
}

// dx = scale * (P * dP - P * sum(dP * P)) along each lane, with P = exp(logits - L)
// recomputed from x and the lane's L, dP = dy * keep / (1 - p_q). dy and dx contiguous.
template <typename T>
MG_CPU_CLONES static void softmax_dropout_lane_gradient(const T* p, const T* dy, const T* keep, T scale,
                                                        int64_t n, T* dp, T* dx) {
  for (int64_t j = 0; j < n; ++j) dp[j] = keep ? dy[j] * keep[j] : dy[j];
  const T t = static_cast<T>(sum_in_lanes<double>(n, [&](int64_t j) { return static_cast<double>(dp[j] * p[j]); }));
  for (int64_t j = 0; j < n; ++j) dx[j] = scale * p[j] * (dp[j] - t);
}

template <typename scalar_t, typename mask_t>
void softmax_dropout_backward_lanes(const Tensor& grad, const Tensor& x, const Tensor& log_sum_exp,
                                    const SoftmaxDropoutSpec& spec, const Tensor& grad_input) {
  const int64_t n = x.size(spec.dim);
  const Lanes lanes = lanes_of(x, spec);
  const scalar_t* px = x.data_ptr<scalar_t>();
  const mask_t* pm = mask_data<mask_t>(spec);
  const scalar_t* pg = grad.data_ptr<scalar_t>();
  const scalar_t* pl = log_sum_exp.data_ptr<scalar_t>();
  scalar_t* po = grad_input.data_ptr<scalar_t>();
  const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(n, 1));
  const bool in_place = lanes.index_step() == 1;  // dy's and dx's lanes contiguous
  parallel_for(0, lanes.count(), grain, [&](int64_t begin, int64_t end) {
    const size_t size = static_cast<size_t>(n);
    std::vector<scalar_t> probs(size), grad_probs(size), keep(spec.drop ? size : 0);
    std::vector<scalar_t> dy(in_place ? 0 : size), dx(in_place ? 0 : size);
    std::vector<uint32_t> keep_bits;
    scalar_t* p = probs.data();
    for (int64_t lane = begin; lane < end; ++lane) {
      const LaneStart s = lanes.start(lane);
      lane_logits(px, pm, spec, lanes, s, n, p);
      exp_shifted(p, pl[lane], n);  // a masked-out logit, or every logit of a lane whose L is +inf: exp(-inf) = 0
      if (spec.drop) keep_factors(spec.dropout, s.index, lanes.index_step(), n, keep.data(), keep_bits);
      const scalar_t* keep_or_null = spec.drop ? keep.data() : nullptr;
      const scalar_t scale = static_cast<scalar_t>(spec.scale);
      if (in_place) {
        softmax_dropout_lane_gradient(p, pg + s.index, keep_or_null, scale, n, grad_probs.data(), po + s.index);
      } else {
        for (int64_t j = 0; j < n; ++j) dy[static_cast<size_t>(j)] = pg[s.index + j * lanes.index_step()];
        softmax_dropout_lane_gradient(p, dy.data(), keep_or_null, scale, n, grad_probs.data(), dx.data());
        for (int64_t j = 0; j < n; ++j) po[s.index + j * lanes.index_step()] = dx[static_cast<size_t>(j)];
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

// spec for the float copy of a float16/bfloat16 x on the CPU: an additive mask in float too.
SoftmaxDropoutSpec in_float(const SoftmaxDropoutSpec& spec) {
  SoftmaxDropoutSpec converted = spec;
  if (spec.mask.defined() && spec.mask.dtype() != kBool) converted.mask = copy_as(spec.mask, kFloat32, kCPU);
  return converted;
}

// An empty tensor for the log-sum-exp of x's lanes along dim (one per lane, also when dim has
// size 0): double for double, else float.
Tensor empty_log_sum_exp(const Tensor& x, int64_t dim) {
  int64_t lanes = 1;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d != dim) lanes *= x.size(d);
  return empty({lanes}, TensorOptions(x.dtype() == kFloat64 ? kFloat64 : kFloat32).device(x.device()));
}

// x with dim moved last, contiguous: the GPU kernels' rows.
Tensor rows_along(const Tensor& t, int64_t dim) { return t.transpose(dim, t.dim() - 1).contiguous(); }

// y and L on the GPU: x's dim moved last and made contiguous, then y moved back. L is in the
// order of those rows, which the backward moves x to again.
void softmax_dropout_cuda(const Tensor& x, const SoftmaxDropoutSpec& spec, Tensor& y, Tensor& log_sum_exp) {
  const Tensor x_rows = rows_along(x, spec.dim);
  Tensor y_rows = empty(x_rows.sizes(), x.options());
  log_sum_exp = empty_log_sum_exp(x, spec.dim);
  cuda::softmax_dropout_rows(x_rows, gpu_rows(x_rows, spec, x.sizes()), y_rows, log_sum_exp);
  y = y_rows.transpose(spec.dim, x.dim() - 1).contiguous();
}

Tensor softmax_dropout_backward_cuda(const Tensor& grad, const Tensor& x, const Tensor& log_sum_exp,
                                     const SoftmaxDropoutSpec& spec) {
  const Tensor x_rows = rows_along(x, spec.dim);
  Tensor grad_input_rows = empty(x_rows.sizes(), x.options());
  cuda::softmax_dropout_backward_rows(rows_along(grad, spec.dim), x_rows, log_sum_exp,
                                      gpu_rows(x_rows, spec, x.sizes()), grad_input_rows);
  return grad_input_rows.transpose(spec.dim, x.dim() - 1).contiguous();
}

// ---- the kernels on either device: y and L from x, dx from dy, x and L ----

void softmax_dropout_kernel(const Tensor& x, const SoftmaxDropoutSpec& spec, Tensor& y, Tensor& log_sum_exp) {
  if (x.device().is_cuda()) return softmax_dropout_cuda(x, spec, y, log_sum_exp);
  check_cpu("softmax_dropout", "self", x);
  if (is_half(x.dtype())) {
    Tensor y_float;
    softmax_dropout_kernel(copy_as(x, kFloat32, kCPU), in_float(spec), y_float, log_sum_exp);
    y = copy_as(y_float, x.dtype(), kCPU);
    return;
  }
  y = empty(x.sizes(), TensorOptions(x.dtype()));
  log_sum_exp = empty_log_sum_exp(x, spec.dim);
  if (x.numel() == 0) return;
  dispatch_floating(x.dtype(), [&](auto tag) {
    using scalar_t = decltype(tag);
    if constexpr (std::is_floating_point_v<scalar_t>) {
      if (spec.mask.defined() && spec.mask.dtype() == kBool)
        softmax_dropout_lanes<scalar_t, bool>(x, spec, y, log_sum_exp);
      else
        softmax_dropout_lanes<scalar_t, scalar_t>(x, spec, y, log_sum_exp);
    }
  });
}

Tensor softmax_dropout_backward_kernel(const Tensor& grad, const Tensor& x, const Tensor& log_sum_exp,
                                       const SoftmaxDropoutSpec& spec) {
  const char* op = "softmax_dropout_backward";
  check_defined(op, "grad_output", grad);
  check_same_dtype(op, "grad_output", grad, "self", x);
  check_same_device(op, "grad_output", grad, "self", x);
  if (x.device().is_cuda()) return softmax_dropout_backward_cuda(grad, x, log_sum_exp, spec);
  check_cpu(op, "self", x);
  if (is_half(x.dtype()))
    return copy_as(softmax_dropout_backward_kernel(copy_as(grad, kFloat32, kCPU), copy_as(x, kFloat32, kCPU),
                                                   log_sum_exp, in_float(spec)),
                   x.dtype(), kCPU);
  Tensor grad_input = empty(x.sizes(), TensorOptions(x.dtype()));
  if (x.numel() == 0) return grad_input;
  const Tensor grad_contiguous = grad.contiguous();  // an expanded gradient (stride 0) is copied
  dispatch_floating(x.dtype(), [&](auto tag) {
    using scalar_t = decltype(tag);
    if constexpr (std::is_floating_point_v<scalar_t>) {
      if (spec.mask.defined() && spec.mask.dtype() == kBool)
        softmax_dropout_backward_lanes<scalar_t, bool>(grad_contiguous, x, log_sum_exp, spec, grad_input);
      else
        softmax_dropout_backward_lanes<scalar_t, scalar_t>(grad_contiguous, x, log_sum_exp, spec, grad_input);
    }
  });
  return grad_input;
}

struct SoftmaxDropout : Function<SoftmaxDropout> {
  static constexpr bool is_once_differentiable = true;
  struct State {
    SoftmaxDropoutSpec spec;
  };
  // Saves x and L (one float a lane), and the mask (the caller's, never a copy): the backward
  // recomputes P from them rather than keeping P, a tensor of x's size, from the forward to
  // the backward.
  static Tensor forward(Context& ctx, const Tensor& x, const SoftmaxDropoutSpec& spec) {
    Tensor y, log_sum_exp;
    softmax_dropout_kernel(x, spec, y, log_sum_exp);
    if (spec.mask.defined())
      ctx.save_for_backward({x, log_sum_exp, spec.mask});
    else
      ctx.save_for_backward({x, log_sum_exp});
    ctx.state<State>().spec = spec;
    ctx.state<State>().spec.mask = Tensor();  // held as a saved tensor, whose version is checked
    return y;
  }
  static tensor_list backward(Context& ctx, tensor_list grads) {
    const tensor_list saved = ctx.saved_tensors();
    SoftmaxDropoutSpec spec = ctx.state<State>().spec;
    if (saved.size() > 2) spec.mask = saved[2];
    return {softmax_dropout_backward_kernel(grads[0], saved[0], saved[1], spec), Tensor()};
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
    MG_CHECK(broadcasts_to(mask->sizes(), x.sizes()), "{}: argument 'mask' has shape {}, which does not broadcast to the shape {} of 'self'", op,
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
      dropout_mask(x.sizes(), p, stream.seed, stream.offset, x.options());
  return x * (keep * dropout_keep_scale(p));
}

Tensor softmax_dropout(const Tensor& x, int64_t dim, double p, bool training, const std::optional<Tensor>& mask,
                       bool is_causal, std::optional<double> scale, Generator* generator) {
  const int64_t wrapped = check_softmax_dropout("softmax_dropout", x, dim, p, mask, is_causal);
  Tensor logits = scale ? x * *scale : x;
  if (mask) {
    const Tensor additive = mask->dtype() == kBool
                                ? where(*mask, 0.0, full({}, -std::numeric_limits<double>::infinity(),
                                                         x.options()))
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
