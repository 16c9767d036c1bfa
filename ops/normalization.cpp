// The row normalizations: layer_norm, rms_norm and layer_norm_gelu (gelu(layer_norm(x))
// in one pass), over the trailing dims `normalized_shape` of x. Each row of
// hidden = prod(normalized_shape) elements is normalized with its own statistics:
//   layer_norm: mean = sum(x) / hidden, var = sum((x - mean)^2) / hidden (biased),
//               rstd = 1 / sqrt(var + eps)
//   rms_norm:   rstd = 1 / sqrt(sum(x^2) / hidden + eps)
// then scaled by weight and shifted by bias (both optional, of shape normalized_shape) and,
// for layer_norm_gelu, passed through GELU. kernels/normalization.h has the per-element
// formulas, shared with the CUDA kernels (cuda/normalization.cu); one kernel family serves
// all three ops, the norm kind and the epilogue its template parameters.
//
// The forward saves x and the rows' mean and rstd (in float32 for the float types, float64
// for float64), not the normalized values: backward recomputes xhat (and z = xhat w + b for
// GELU) from them, so a forward keeps two numbers a row alive instead of a copy of x. The
// backward is one fused kernel per device, computing dx, dweight and dbias together; it is
// a raw kernel, so the ops are once differentiable (a second backward names the Function).
//
// dweight and dbias are sums over the rows. The CPU sums fixed chunks of rows (their size
// depends on the row length alone) into partials and adds the partials in chunk order, so
// the result does not depend on the thread count; the GPU does the same with its blocks.
//
// The composite twins at the end compute the same from the public ops, for the tests.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>
#include <vector>

#include <minigrad/autograd/function.h>
#include <minigrad/core/cpu_arch.h>
#include <minigrad/core/parallel.h>
#include <minigrad/core/shape.h>
#include <minigrad/cuda/normalization.h>
#include <minigrad/kernels/normalization.h>
#include <minigrad/ops/cpu_loops.h>
#include <minigrad/ops/ops.h>

namespace minigrad {
namespace {

using normalization::Epilogue;
using normalization::NormKind;

// What one op call normalizes: how, and over how many trailing elements.
struct NormSpec {
  const char* op = "";
  NormKind kind = NormKind::Layer;
  Epilogue epilogue = Epilogue::Identity;
  double eps = 0.0;
  int64_t hidden = 0;  // prod(normalized_shape)
};

Epilogue gelu_epilogue(GeluApproximation approximate) {
  return approximate == GeluApproximation::Tanh ? Epilogue::GeluTanh : Epilogue::GeluExact;
}

// The accumulation type of the saved statistics.
DType stats_dtype(DType dtype) { return dtype == kFloat64 ? kFloat64 : kFloat32; }

// ---- argument checks ----

// normalized_shape must be the trailing dims of x; returns prod(normalized_shape).
int64_t check_normalized_shape(const char* op, const Tensor& x, const Shape& normalized_shape) {
  MG_CHECK(!normalized_shape.empty(), "{}: argument 'normalized_shape' is empty; it must name at least one dim", op);
  const size_t k = normalized_shape.size();
  bool matches = static_cast<size_t>(x.dim()) >= k;
  for (size_t i = 0; matches && i < k; ++i)
    matches = x.sizes()[static_cast<size_t>(x.dim()) - k + i] == normalized_shape[i];
  MG_CHECK(matches, "{}: argument 'normalized_shape' is {}, but the input's trailing dims are not: input shape {}", op,
           shape_str(normalized_shape), shape_str(x.sizes()));
  return shape_numel(normalized_shape);
}

void check_affine(const char* op, const char* name, const std::optional<Tensor>& t, const Tensor& x,
                  const Shape& normalized_shape) {
  if (!t.has_value()) return;
  check_defined(op, name, *t);
  MG_CHECK(t->sizes() == normalized_shape, "{}: argument '{}' has shape {}, but normalized_shape is {}", op, name,
           shape_str(t->sizes()), shape_str(normalized_shape));
  check_same_dtype(op, name, *t, "input", x);
  check_same_device(op, name, *t, "input", x);
}

void check_arguments(const char* op, const Tensor& x, const Shape& normalized_shape,
                     const std::optional<Tensor>& weight, const std::optional<Tensor>& bias) {
  check_defined(op, "input", x);
  check_floating(op, "input", x);
  check_normalized_shape(op, x, normalized_shape);
  check_affine(op, "weight", weight, x, normalized_shape);
  check_affine(op, "bias", bias, x, normalized_shape);
}

// An absent optional as an undefined tensor; a present one flattened to [hidden], contiguous.
Tensor flat_or_undefined(const std::optional<Tensor>& t) {
  return t.has_value() ? t->contiguous().reshape({t->numel()}) : Tensor();
}

// ---- the CPU kernels: rows of `hidden` contiguous elements, computed in double ----

// Rows per parallel chunk: about kElementwiseGrain elements (at least one row). The chunks
// are also the blocks of the dweight/dbias sums, so they depend on the row length only.
int64_t rows_per_chunk(int64_t hidden) {
  return std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(hidden, 1));
}

// One row's mean (0 for rms_norm) and rstd. Two passes (the mean, then the squared
// deviations from it): no cancellation when the mean is large against the spread.
template <NormKind kKind, typename T>
MG_INLINE_IN_CLONES void row_statistics(const T* x, int64_t n, double eps, double& mean, double& rstd) {
  mean = 0.0;
  if constexpr (kKind == NormKind::Layer) {
    mean = sum_in_lanes<double>(n, [&](int64_t i) { return static_cast<double>(x[i]); }) / static_cast<double>(n);
  }
  const double m = mean;
  const double squares = sum_in_lanes<double>(n, [&](int64_t i) {
    const double d = static_cast<double>(x[i]) - m;
    return d * d;
  });
  rstd = 1.0 / std::sqrt(squares / static_cast<double>(n) + eps);
}

// The epilogue (or its derivative) over a row in place, in T, as a loop of its own: the
// compiler vectorizes it (float GELU's sign select becomes a blend), where inside the row
// loop it stayed scalar, a mispredicted branch an element, and ran 10x slower.
template <Epilogue kEpilogue, typename T>
MG_CPU_CLONES static void activate_row(T* __restrict v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) v[i] = normalization::activate<kEpilogue>(v[i]);
}
template <Epilogue kEpilogue, typename T>
MG_CPU_CLONES static void activate_derivative_row(T* __restrict v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) v[i] = normalization::activate_derivative<kEpilogue>(v[i]);
}

// weight then bias in double, 1 and 0 where absent: no branch in the row loops.
template <typename T>
std::vector<double> affine_in_double(const T* w, const T* b, int64_t n) {
  std::vector<double> affine(2 * static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    affine[static_cast<size_t>(i)] = w ? static_cast<double>(w[i]) : 1.0;
    affine[static_cast<size_t>(n + i)] = b ? static_cast<double>(b[i]) : 0.0;
  }
  return affine;
}

// One row of the forward, and its statistics. The row functions are compiled for each
// instruction set (MG_CPU_CLONES): inside parallel_for's lambda the loops ran on the
// baseline's two double lanes.
template <NormKind kKind, Epilogue kEpilogue, typename T>
MG_CPU_CLONES static void forward_row(const T* in, const double* weight, const double* bias, double eps, T* out,
                                      int64_t n, double& mean, double& rstd) {
  row_statistics<kKind>(in, n, eps, mean, rstd);
  for (int64_t i = 0; i < n; ++i)
    out[i] = static_cast<T>(normalization::normalized<kKind>(static_cast<double>(in[i]), mean, rstd) * weight[i] +
                            bias[i]);
  if constexpr (kEpilogue != Epilogue::Identity) activate_row<kEpilogue>(out, n);
}

// T: float or double (the half types were upcast); acc_t: the statistics' type.
template <NormKind kKind, Epilogue kEpilogue, typename T>
void forward_rows(const NormSpec& spec, const T* x, const T* w, const T* b, T* y, compute_t<T>* mean_out,
                  compute_t<T>* rstd_out, int64_t rows) {
  using acc_t = compute_t<T>;
  const int64_t n = spec.hidden;
  const std::vector<double> affine = affine_in_double(w, b, n);
  const double* weight = affine.data();
  const double* bias = weight + n;
  parallel_for(0, rows, rows_per_chunk(n), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      double mean = 0.0, rstd = 0.0;
      forward_row<kKind, kEpilogue>(x + r * n, weight, bias, spec.eps, y + r * n, n, mean, rstd);
      // Saved for backward in acc_t; the output used them unrounded.
      if (mean_out) mean_out[r] = static_cast<acc_t>(mean);
      rstd_out[r] = static_cast<acc_t>(rstd);
    }
  });
}

// Pointers of the backward; a null output is not wanted.
template <typename T>
struct BackwardPointers {
  const T* grad;
  const T* x;
  const T* w;
  const T* b;
  const compute_t<T>* mean;  // null for rms_norm
  const compute_t<T>* rstd;
  T* grad_input;
  T* grad_weight;
  T* grad_bias;
};

// A thread's scratch for one row of the backward.
template <typename T>
struct RowBuffers {
  std::vector<double> storage;
  std::vector<T> act_grad;  // act'(z), for the GELU epilogue
  RowBuffers(int64_t n, bool with_epilogue)
      : storage(2 * static_cast<size_t>(n)), act_grad(with_epilogue ? static_cast<size_t>(n) : 0) {}
};

// One row of the backward: its terms of dweight and dbias (dw, db: null where not wanted)
// and, where out is not null, its dx. Three passes over the row: xhat (and z, whose act'(z)
// a loop of its own computes); then dz = dy act'(z), its terms of dweight and dbias, dxhat =
// dz w and the two sums of dxhat in kSumLanes lanes (for_each_in_lanes, sum_in_lanes' walk:
// the same bits as summing in passes of their own); then dx. Each pass vectorizes; the row
// (a few arrays of n doubles) stays in L2 between them.
template <NormKind kKind, Epilogue kEpilogue, typename T>
MG_CPU_CLONES static void backward_row(const T* g, const T* in, double mean, double rstd, const double* weight,
                                       const double* bias, RowBuffers<T>& buffers, double* dw, double* db, T* out,
                                       int64_t n) {
  double* xhat = buffers.storage.data();
  double* dxhat = xhat + n;
  T* act = buffers.act_grad.data();  // act'(z) (the GELU epilogue only)
  for (int64_t i = 0; i < n; ++i) xhat[i] = normalization::normalized<kKind>(static_cast<double>(in[i]), mean, rstd);
  if constexpr (kEpilogue != Epilogue::Identity) {
    for (int64_t i = 0; i < n; ++i) act[i] = static_cast<T>(xhat[i] * weight[i] + bias[i]);
    activate_derivative_row<kEpilogue>(act, n);
  }
  double sum_lanes[kSumLanes] = {}, dot_lanes[kSumLanes] = {};  // of dxhat and dxhat * xhat
  auto element = [&](int64_t i, int lane) {
    double dz = static_cast<double>(g[i]);
    if constexpr (kEpilogue != Epilogue::Identity) dz *= static_cast<double>(act[i]);
    if (dw) dw[i] += dz * xhat[i];
    if (db) db[i] += dz;
    dxhat[i] = dz * weight[i];
    sum_lanes[lane] += dxhat[i];
    dot_lanes[lane] += dxhat[i] * xhat[i];
  };
  for_each_in_lanes(n, element);
  if (!out) return;
  const normalization::InputGradient<kKind, double> input_gradient(rstd, combine_lanes(sum_lanes),
                                                                    combine_lanes(dot_lanes), static_cast<double>(n));
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(input_gradient(dxhat[i], xhat[i]));
}

// The backward's chunks of rows, each with its own dweight/dbias partials: at most
// kMaxPartialChunks of them, so the partials stay a few MiB and their sum a short
// contiguous pass. (Chunks of rows_per_chunk rows alone made 256 partial rows for
// [2048, 4096], 16 MiB summed column by column, slower than the rest of the backward.)
// The count depends on the shape alone, never on the thread count.
constexpr int64_t kMaxPartialChunks = 32;
int64_t backward_rows_per_chunk(int64_t rows, int64_t hidden) {
  return std::max(rows_per_chunk(hidden), (rows + kMaxPartialChunks - 1) / kMaxPartialChunks);
}

template <NormKind kKind, Epilogue kEpilogue, typename T>
void backward_rows(const NormSpec& spec, const BackwardPointers<T>& p, int64_t rows) {
  const int64_t n = spec.hidden;
  const int64_t chunk_rows = backward_rows_per_chunk(rows, n);
  const int64_t chunks = (rows + chunk_rows - 1) / chunk_rows;
  // Per chunk: the chunk's sums of dz * xhat and of dz, per column.
  std::vector<double> weight_partials(p.grad_weight ? static_cast<size_t>(chunks * n) : 0, 0.0);
  std::vector<double> bias_partials(p.grad_bias ? static_cast<size_t>(chunks * n) : 0, 0.0);
  const std::vector<double> affine = affine_in_double(p.w, p.b, n);
  const double* weight = affine.data();
  const double* bias = weight + n;
  parallel_for(0, chunks, 1, [&](int64_t chunk_begin, int64_t chunk_end) {
    RowBuffers<T> buffers(n, kEpilogue != Epilogue::Identity);
    for (int64_t c = chunk_begin; c < chunk_end; ++c) {
      double* dw = p.grad_weight ? weight_partials.data() + c * n : nullptr;
      double* db = p.grad_bias ? bias_partials.data() + c * n : nullptr;
      for (int64_t r = c * chunk_rows; r < std::min(rows, (c + 1) * chunk_rows); ++r) {
        const double mean = p.mean ? static_cast<double>(p.mean[r]) : 0.0;
        backward_row<kKind, kEpilogue>(p.grad + r * n, p.x + r * n, mean, static_cast<double>(p.rstd[r]), weight,
                                       bias, buffers, dw, db, p.grad_input ? p.grad_input + r * n : nullptr, n);
      }
    }
  });
  // The chunks' partials added in chunk order, column by column (chunk 0's row holds the
  // running sums): each pass reads two contiguous rows.
  auto sum_chunks = [&](std::vector<double>& partials, T* out) {
    if (!out) return;
    for (int64_t c = 1; c < chunks; ++c)
      for (int64_t i = 0; i < n; ++i) partials[static_cast<size_t>(i)] += partials[static_cast<size_t>(c * n + i)];
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(partials[static_cast<size_t>(i)]);
  };
  sum_chunks(weight_partials, p.grad_weight);
  sum_chunks(bias_partials, p.grad_bias);
}

template <typename T>
const T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}
template <typename T>
T* mutable_data_or_null(const Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}

// An undefined tensor stays undefined; a defined one is copied to dtype.
Tensor converted(const Tensor& t, DType dtype) { return t.defined() ? copy_as(t, dtype, t.device()) : Tensor(); }

// x contiguous and non-empty; w and b [hidden] or undefined. Fills y, mean and rstd.
void forward_cpu(const NormSpec& spec, const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y,
                 const Tensor& mean, const Tensor& rstd) {
  check_cpu(spec.op, "input", x);
  if (is_half(x.dtype())) {
    const Tensor y32 = empty(x.sizes(), kFloat32);
    forward_cpu(spec, copy_as(x, kFloat32, x.device()), converted(w, kFloat32), converted(b, kFloat32), y32, mean,
                rstd);
    Tensor(y).copy_(y32);
    return;
  }
  const int64_t rows = x.numel() / spec.hidden;
  dispatch_floating(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      normalization::with_norm_variant(spec.kind, spec.epilogue, [&](auto kind, auto epilogue) {
        forward_rows<decltype(kind)::value, decltype(epilogue)::value, T>(
            spec, x.data_ptr<T>(), data_or_null<T>(w), data_or_null<T>(b), y.data_ptr<T>(),
            mutable_data_or_null<compute_t<T>>(mean), rstd.data_ptr<compute_t<T>>(), rows);
      });
    }
  });
}

void backward_cpu(const NormSpec& spec, const Tensor& grad, const Tensor& x, const Tensor& w, const Tensor& b,
                  const Tensor& mean, const Tensor& rstd, const Tensor& grad_input, const Tensor& grad_weight,
                  const Tensor& grad_bias) {
  check_cpu(spec.op, "input", x);
  if (is_half(x.dtype())) {
    auto float_or_undefined = [](const Tensor& t) { return t.defined() ? empty(t.sizes(), kFloat32) : Tensor(); };
    const Tensor gi = float_or_undefined(grad_input), gw = float_or_undefined(grad_weight),
                 gb = float_or_undefined(grad_bias);
    backward_cpu(spec, copy_as(grad, kFloat32, grad.device()), copy_as(x, kFloat32, x.device()),
                 converted(w, kFloat32), converted(b, kFloat32), mean, rstd, gi, gw, gb);
    for (auto [to, from] : {std::pair{grad_input, gi}, std::pair{grad_weight, gw}, std::pair{grad_bias, gb}})
      if (to.defined()) to.copy_(from);
    return;
  }
  const int64_t rows = x.numel() / spec.hidden;
  dispatch_floating(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      const BackwardPointers<T> p{grad.data_ptr<T>(),
                                  x.data_ptr<T>(),
                                  data_or_null<T>(w),
                                  data_or_null<T>(b),
                                  data_or_null<compute_t<T>>(mean),
                                  rstd.data_ptr<compute_t<T>>(),
                                  mutable_data_or_null<T>(grad_input),
                                  mutable_data_or_null<T>(grad_weight),
                                  mutable_data_or_null<T>(grad_bias)};
      normalization::with_norm_variant(spec.kind, spec.epilogue, [&](auto kind, auto epilogue) {
        backward_rows<decltype(kind)::value, decltype(epilogue)::value, T>(spec, p, rows);
      });
    }
  });
}

// ---- the Functions ----

struct NormState {
  NormSpec spec;
  Shape normalized_shape;
  bool has_weight = false;
  bool has_bias = false;
};

// The forward of all three ops: forward(x, weight, bias, normalized_shape, eps, ...), so the
// gradients of x, weight and bias are the first three. Saves x (contiguous), the weight and
// bias present, then mean (layer_norm only) and rstd.
Tensor normalization_forward(Context& ctx, const NormSpec& spec_in, const Tensor& input,
                             const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
                             const Shape& normalized_shape) {
  NormSpec spec = spec_in;
  spec.hidden = shape_numel(normalized_shape);
  const Tensor x = input.contiguous();
  const Tensor w = flat_or_undefined(weight);
  const Tensor b = flat_or_undefined(bias);
  const int64_t rows = spec.hidden == 0 ? 0 : x.numel() / spec.hidden;
  const TensorOptions stats_options = TensorOptions(stats_dtype(x.dtype())).device(x.device());
  const Tensor mean = spec.kind == NormKind::Layer ? empty({rows}, stats_options) : Tensor();
  const Tensor rstd = empty({rows}, stats_options);
  Tensor y = empty(x.sizes(), x.options());
  if (x.numel() > 0) {
    if (x.device().is_cuda())
      cuda::normalization_forward(spec.op, x, w, b, spec.hidden, spec.kind, spec.epilogue, spec.eps, y, mean, rstd);
    else
      forward_cpu(spec, x, w, b, y, mean, rstd);
  }
  NormState& state = ctx.state<NormState>();
  state.spec = spec;
  state.normalized_shape = normalized_shape;
  state.has_weight = w.defined();
  state.has_bias = b.defined();
  tensor_list saved{x};
  if (w.defined()) saved.push_back(w);
  if (b.defined()) saved.push_back(b);
  if (mean.defined()) saved.push_back(mean);
  saved.push_back(rstd);
  ctx.save_for_backward(saved);
  return y;
}

// The gradients of x, weight and bias (undefined where not wanted), then none for the
// `non_tensor_args` arguments after them.
tensor_list normalization_backward(Context& ctx, const Tensor& grad_output, size_t non_tensor_args) {
  const NormState& state = ctx.state<NormState>();
  const NormSpec& spec = state.spec;
  const tensor_list saved = ctx.saved_tensors();
  size_t next = 0;
  const Tensor x = saved[next++];
  const Tensor w = state.has_weight ? saved[next++] : Tensor();
  const Tensor b = state.has_bias ? saved[next++] : Tensor();
  const Tensor mean = spec.kind == NormKind::Layer ? saved[next++] : Tensor();
  const Tensor rstd = saved[next++];
  const TensorOptions options = x.options();
  const Tensor grad_input = ctx.needs_input_grad(0) ? empty(x.sizes(), options) : Tensor();
  // Zero rows still give a (zero) sum for every column.
  auto affine_grad = [&](bool wanted) {
    return wanted ? (x.numel() == 0 ? zeros({spec.hidden}, options) : empty({spec.hidden}, options)) : Tensor();
  };
  const Tensor grad_weight = affine_grad(state.has_weight && ctx.needs_input_grad(1));
  const Tensor grad_bias = affine_grad(state.has_bias && ctx.needs_input_grad(2));
  if (x.numel() > 0 && (grad_input.defined() || grad_weight.defined() || grad_bias.defined())) {
    const Tensor g = grad_output.contiguous();
    if (x.device().is_cuda())
      cuda::normalization_backward(spec.op, g, x, w, b, mean, rstd, spec.hidden, spec.kind, spec.epilogue, grad_input,
                                   grad_weight, grad_bias);
    else
      backward_cpu(spec, g, x, w, b, mean, rstd, grad_input, grad_weight, grad_bias);
  }
  auto in_normalized_shape = [&](const Tensor& t) {
    return t.defined() ? t.reshape(state.normalized_shape) : Tensor();
  };
  tensor_list grads{grad_input, in_normalized_shape(grad_weight), in_normalized_shape(grad_bias)};
  grads.resize(grads.size() + non_tensor_args);
  return grads;
}

struct LayerNorm : Function<LayerNorm> {
  static constexpr bool is_once_differentiable = true;
  using State = NormState;
  static Tensor forward(Context& ctx, const Tensor& x, const std::optional<Tensor>& weight,
                        const std::optional<Tensor>& bias, const Shape& normalized_shape, double eps) {
    return normalization_forward(ctx, {"layer_norm", NormKind::Layer, Epilogue::Identity, eps}, x, weight, bias,
                                 normalized_shape);
  }
  static tensor_list backward(Context& ctx, tensor_list grads) { return normalization_backward(ctx, grads[0], 2); }
};

struct LayerNormGelu : Function<LayerNormGelu> {
  static constexpr bool is_once_differentiable = true;
  using State = NormState;
  static Tensor forward(Context& ctx, const Tensor& x, const std::optional<Tensor>& weight,
                        const std::optional<Tensor>& bias, const Shape& normalized_shape, double eps,
                        GeluApproximation approximate) {
    return normalization_forward(ctx, {"layer_norm_gelu", NormKind::Layer, gelu_epilogue(approximate), eps}, x,
                                 weight, bias, normalized_shape);
  }
  static tensor_list backward(Context& ctx, tensor_list grads) { return normalization_backward(ctx, grads[0], 3); }
};

// bias is always absent: an argument all the same, so the three share one layout.
struct RMSNorm : Function<RMSNorm> {
  static constexpr bool is_once_differentiable = true;
  using State = NormState;
  static Tensor forward(Context& ctx, const Tensor& x, const std::optional<Tensor>& weight,
                        const std::optional<Tensor>& bias, const Shape& normalized_shape, double eps) {
    return normalization_forward(ctx, {"rms_norm", NormKind::RMS, Epilogue::Identity, eps}, x, weight, bias,
                                 normalized_shape);
  }
  static tensor_list backward(Context& ctx, tensor_list grads) { return normalization_backward(ctx, grads[0], 2); }
};

// rms_norm's default eps: the machine epsilon of the accumulation type, as in PyTorch.
double default_rms_eps(DType dtype) {
  return dtype == kFloat64 ? std::numeric_limits<double>::epsilon()
                           : static_cast<double>(std::numeric_limits<float>::epsilon());
}

// The trailing dims normalized_shape covers, as dims of x.
Shape trailing_dims(const Tensor& x, const Shape& normalized_shape) {
  Shape dims;
  for (int64_t d = x.dim() - static_cast<int64_t>(normalized_shape.size()); d < x.dim(); ++d) dims.push_back(d);
  return dims;
}

Tensor affine(Tensor t, const std::optional<Tensor>& weight, const std::optional<Tensor>& bias) {
  if (weight.has_value()) t = t * *weight;
  if (bias.has_value()) t = t + *bias;
  return t;
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const std::optional<Tensor>& weight,
                  const std::optional<Tensor>& bias, double eps) {
  check_arguments("layer_norm", x, normalized_shape, weight, bias);
  return LayerNorm::apply(x, weight, bias, normalized_shape, eps);
}

Tensor layer_norm_gelu(const Tensor& x, const Shape& normalized_shape, const std::optional<Tensor>& weight,
                       const std::optional<Tensor>& bias, double eps, GeluApproximation approximate) {
  check_arguments("layer_norm_gelu", x, normalized_shape, weight, bias);
  return LayerNormGelu::apply(x, weight, bias, normalized_shape, eps, approximate);
}

Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const std::optional<Tensor>& weight,
                std::optional<double> eps) {
  check_arguments("rms_norm", x, normalized_shape, weight, std::nullopt);
  return RMSNorm::apply(x, weight, std::optional<Tensor>(), normalized_shape, eps.value_or(default_rms_eps(x.dtype())));
}

namespace composite {

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const std::optional<Tensor>& weight,
                  const std::optional<Tensor>& bias, double eps) {
  check_arguments("layer_norm", x, normalized_shape, weight, bias);
  const Shape dims = trailing_dims(x, normalized_shape);
  const Tensor centered = x - mean(x, dims, /*keepdim=*/true);
  const Tensor variance = var(x, dims, /*correction=*/0.0, /*keepdim=*/true);
  return affine(centered * rsqrt(variance + eps), weight, bias);
}

Tensor layer_norm_gelu(const Tensor& x, const Shape& normalized_shape, const std::optional<Tensor>& weight,
                       const std::optional<Tensor>& bias, double eps, GeluApproximation approximate) {
  return gelu(composite::layer_norm(x, normalized_shape, weight, bias, eps), approximate);
}

Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const std::optional<Tensor>& weight,
                std::optional<double> eps) {
  check_arguments("rms_norm", x, normalized_shape, weight, std::nullopt);
  const Tensor mean_square = mean(x * x, trailing_dims(x, normalized_shape), /*keepdim=*/true);
  return affine(x * rsqrt(mean_square + eps.value_or(default_rms_eps(x.dtype()))), weight, std::nullopt);
}

}  // namespace composite
}  // namespace minigrad
