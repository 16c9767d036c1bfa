// softmax and log_softmax along one dim, any strides.
//
// Numerically stable: each lane (the line of elements along dim) subtracts its maximum
// before exp, so the largest term is exp(0) = 1 and nothing overflows; the sum of the
// exponentials accumulates in double. Backward uses the saved output only:
//   softmax:     dx = y * (g - sum(g * y, dim))
//   log_softmax: dx = g - exp(y) * sum(g, dim)
// Each is one fused kernel on either device (cuda/softmax.cu has row kernels along the last
// dim for both directions, another dim moved last by a copy; the CPU runs the lane loops
// below), and each is a Function of its own (SoftmaxBackward, LogSoftmaxBackward) whose
// backward is written with the public ops: softmax is differentiable any number of times.
// The saved y comes back with its history (its grad_fn is the Softmax node), so a second
// backward through it reaches x.
//
// On the CPU, contiguous rows along the last dim (the common case) take the row kernels
// (softmax_row, softmax_backward_row): float rows compute exp in float with the vectorizable
// fast_math::exp_float, and their sums add in double over kSumLanes interleaved
// accumulators combined pairwise (sum_in_lanes, ops/cpu_loops.h), an order fixed by the row
// length alone. Other layouts take the lane loops (double exp, sequential sums). Either way
// the threads split the work by whole lanes, so no result depends on the thread count.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include <minigrad/autograd/function.h>
#include <minigrad/core/cpu_arch.h>
#include <minigrad/core/parallel.h>
#include <minigrad/core/shape.h>
#include <minigrad/core/strided_loop.h>
#include <minigrad/ops/cpu_loops.h>
#include <minigrad/kernels/fast_math.h>
#include <minigrad/ops/ops.h>
#include <minigrad/cuda/softmax.h>

namespace minigrad {
namespace {

// The CUDA kernels read contiguous rows along the last dim. Another dim, or a strided
// tensor, goes through a contiguous copy with `dim` moved last, and the result comes back
// through a copy: the output is contiguous, as on the CPU.
Tensor softmax_cuda(const Tensor& x, int64_t dim, bool log) {
  if (x.dim() == 0) return softmax_cuda(x.reshape({1}), 0, log).reshape({});
  const int64_t last = x.dim() - 1;
  if (dim != last || !x.is_contiguous())
    return softmax_cuda(x.transpose(dim, last).contiguous(), last, log).transpose(dim, last).contiguous();
  Tensor y = empty(x.sizes(), x.options());
  cuda::softmax_rows(x, y, log);
  return y;
}

// The backward in one kernel (the formula from the public ops takes four), for any dim the
// same way.
Tensor softmax_backward_cuda(const Tensor& grad, const Tensor& y, int64_t dim, bool log) {
  if (y.dim() == 0) return softmax_backward_cuda(grad.reshape({1}), y.reshape({1}), 0, log).reshape({});
  const int64_t last = y.dim() - 1;
  if (dim != last || !grad.is_contiguous() || !y.is_contiguous())
    return softmax_backward_cuda(grad.transpose(dim, last).contiguous(), y.transpose(dim, last).contiguous(), last,
                                 log)
        .transpose(dim, last)
        .contiguous();
  Tensor grad_input = empty(y.sizes(), y.options());
  cuda::softmax_backward_rows(grad, y, grad_input, log);
  return grad_input;
}

// ---- the row kernels: contiguous rows along the last dim ----

// e^v: the vectorizable float form for float, std::exp for double.
template <typename T>
T cpu_exp(T v) {
  if constexpr (std::is_same_v<T, float>)
    return fast_math::exp_float(v);
  else
    return std::exp(v);
}

// out[i] = e^(in[i] - shift). A loop of its own (and compiled in three widths of its own):
// inside softmax_row, GCC 12 left it scalar.
template <typename T>
MG_CPU_CLONES static void exp_shifted(const T* __restrict in, T shift, T* __restrict out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = cpu_exp(T(in[i] - shift));
}

// One row of softmax or log_softmax: exp runs once an element.
template <typename T>
MG_CPU_CLONES static void softmax_row(const T* in, T* out, int64_t n, bool log) {
  const T lane_max = max_in_lanes(in, n);  // NaNs skipped; a NaN reaches the output through exp
  // The exponentials go to out first (for log_softmax as scratch), then are summed: a store
  // inside the sum's lanes would keep the compiler from vectorizing either loop, and the row
  // is in L1 by the second pass.
  exp_shifted(in, lane_max, out, n);
  const double sum_exp = sum_in_lanes<double>(n, [&](int64_t i) { return static_cast<double>(out[i]); });
  if (log) {
    const double log_sum_exp = std::log(sum_exp);
    for (int64_t i = 0; i < n; ++i)
      out[i] = static_cast<T>((static_cast<double>(in[i]) - static_cast<double>(lane_max)) - log_sum_exp);
    return;
  }
  const double inverse = 1.0 / sum_exp;
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(static_cast<double>(out[i]) * inverse);
}

// One row of the backward: softmax dx = y (g - sum(g y)), log_softmax dx = g - exp(y) sum(g).
template <typename T>
MG_CPU_CLONES static void softmax_backward_row(const T* g, const T* y, T* result, int64_t n, bool log) {
  if (log) {
    const double total = sum_in_lanes<double>(n, [&](int64_t i) { return static_cast<double>(g[i]); });
    for (int64_t i = 0; i < n; ++i)
      result[i] = static_cast<T>(static_cast<double>(g[i]) - static_cast<double>(cpu_exp(y[i])) * total);
    return;
  }
  const double total =
      sum_in_lanes<double>(n, [&](int64_t i) { return static_cast<double>(g[i]) * static_cast<double>(y[i]); });
  for (int64_t i = 0; i < n; ++i)
    result[i] = static_cast<T>(static_cast<double>(y[i]) * (static_cast<double>(g[i]) - total));
}

// Rows per parallel chunk: about kElementwiseGrain elements.
int64_t row_grain(int64_t n) { return std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(n, 1)); }

bool rows_along_last_dim(const Tensor& t, int64_t dim) { return dim == t.dim() - 1 && t.is_contiguous(); }

// y = softmax(x) or log_softmax(x) along `dim` (wrapped, x at least 1-D and non-empty).
void softmax_lanes(const Tensor& x, const Tensor& y, int64_t dim, bool log) {
  Shape lane_starts = x.sizes();
  lane_starts[static_cast<size_t>(dim)] = 1;
  const int64_t n = x.size(dim);
  const int64_t x_step = x.stride(dim);
  const int64_t y_step = y.stride(dim);
  dispatch_all(x.dtype(), [&](auto tag) {
    using scalar_t = decltype(tag);
    // float16/bfloat16 were upcast by the caller and other dtypes refused.
    if constexpr (std::is_floating_point_v<scalar_t>) {
      const scalar_t* px = x.data_ptr<scalar_t>();
      scalar_t* py = y.data_ptr<scalar_t>();
      if (rows_along_last_dim(x, dim) && rows_along_last_dim(y, dim)) {
        parallel_for(0, x.numel() / n, row_grain(n), [&](int64_t begin, int64_t end) {
          for (int64_t r = begin; r < end; ++r) softmax_row(px + r * n, py + r * n, n, log);
        });
        return;
      }
      parallel_for_each_offset<2>(lane_starts, {x.strides().data(), y.strides().data()}, [&](const std::array<int64_t, 2>& o) {
        const scalar_t* in = px + o[0];
        scalar_t* out = py + o[1];
        double lane_max = -std::numeric_limits<double>::infinity();
        for (int64_t i = 0; i < n; ++i) lane_max = std::fmax(lane_max, static_cast<double>(in[i * x_step]));
        double sum_exp = 0.0;
        for (int64_t i = 0; i < n; ++i) sum_exp += std::exp(static_cast<double>(in[i * x_step]) - lane_max);
        const double log_sum_exp = std::log(sum_exp);
        for (int64_t i = 0; i < n; ++i) {
          const double shifted = static_cast<double>(in[i * x_step]) - lane_max;
          out[i * y_step] = static_cast<scalar_t>(log ? shifted - log_sum_exp : std::exp(shifted) / sum_exp);
        }
      });
    }
  });
}

// grad_input from grad and y along `dim` (wrapped, all three at least 1-D, of one shape,
// non-empty), any strides (an expanded grad has stride 0). The lane's sum accumulates in
// double, as the forward's does.
void softmax_backward_lanes(const Tensor& grad, const Tensor& y, const Tensor& grad_input, int64_t dim, bool log) {
  Shape lane_starts = y.sizes();
  lane_starts[static_cast<size_t>(dim)] = 1;
  const int64_t n = y.size(dim);
  const int64_t g_step = grad.stride(dim);
  const int64_t y_step = y.stride(dim);
  const int64_t out_step = grad_input.stride(dim);
  dispatch_all(y.dtype(), [&](auto tag) {
    using scalar_t = decltype(tag);
    if constexpr (std::is_floating_point_v<scalar_t>) {
      const scalar_t* pg = grad.data_ptr<scalar_t>();
      const scalar_t* py = y.data_ptr<scalar_t>();
      scalar_t* po = grad_input.data_ptr<scalar_t>();
      if (rows_along_last_dim(grad, dim) && rows_along_last_dim(y, dim) && rows_along_last_dim(grad_input, dim)) {
        parallel_for(0, y.numel() / n, row_grain(n), [&](int64_t begin, int64_t end) {
          for (int64_t r = begin; r < end; ++r) softmax_backward_row(pg + r * n, py + r * n, po + r * n, n, log);
        });
        return;
      }
      parallel_for_each_offset<3>(lane_starts, {grad.strides().data(), y.strides().data(), grad_input.strides().data()},
                         [&](const std::array<int64_t, 3>& o) {
                           const scalar_t* g = pg + o[0];
                           const scalar_t* out = py + o[1];
                           scalar_t* result = po + o[2];
                           // sum(g * y) for softmax, sum(g) for log_softmax
                           double total = 0.0;
                           for (int64_t i = 0; i < n; ++i) {
                             const double gi = static_cast<double>(g[i * g_step]);
                             total += log ? gi : gi * static_cast<double>(out[i * y_step]);
                           }
                           for (int64_t i = 0; i < n; ++i) {
                             const double gi = static_cast<double>(g[i * g_step]);
                             const double yi = static_cast<double>(out[i * y_step]);
                             const double value = log ? gi - std::exp(yi) * total : yi * (gi - total);
                             result[i * out_step] = static_cast<scalar_t>(value);
                           }
                         });
    }
  });
}

Tensor softmax_kernel(const char* op, const Tensor& x, int64_t dim, bool log) {
  check_floating(op, "self", x);
  if (x.device().is_cuda()) return softmax_cuda(x, dim, log);
  check_cpu(op, "self", x);
  if (is_half(x.dtype()))
    return copy_as(softmax_kernel(op, copy_as(x, kFloat32, x.device()), dim, log), x.dtype(), x.device());
  Tensor y = empty(x.sizes(), x.options());
  if (y.numel() == 0) return y;
  // A 0-d tensor is one lane of one element.
  if (x.dim() == 0)
    softmax_lanes(x.reshape({1}), y.reshape({1}), 0, log);
  else
    softmax_lanes(x, y, dim, log);
  return y;
}

// The fused backward on either device. The output is new and contiguous, y's shape and dtype.
Tensor softmax_backward_kernel(const char* op, const Tensor& grad, const Tensor& y, int64_t dim, bool log) {
  check_defined(op, "grad_output", grad);
  check_defined(op, "output", y);
  check_floating(op, "output", y);
  check_same_dtype(op, "grad_output", grad, "output", y);
  check_same_device(op, "grad_output", grad, "output", y);
  MG_CHECK(grad.sizes() == y.sizes(), "{}: argument 'grad_output' has shape {}, but 'output' has shape {}", op,
           shape_str(grad.sizes()), shape_str(y.sizes()));
  if (y.device().is_cuda()) return softmax_backward_cuda(grad, y, dim, log);
  check_cpu(op, "output", y);
  if (is_half(y.dtype())) {
    const Tensor grad_input = softmax_backward_kernel(op, copy_as(grad, kFloat32, grad.device()),
                                                      copy_as(y, kFloat32, y.device()), dim, log);
    return copy_as(grad_input, y.dtype(), y.device());
  }
  Tensor grad_input = empty(y.sizes(), y.options());
  if (y.numel() == 0) return grad_input;
  if (y.dim() == 0)
    softmax_backward_lanes(grad.reshape({1}), y.reshape({1}), grad_input.reshape({1}), 0, log);
  else
    softmax_backward_lanes(grad, y, grad_input, dim, log);
  return grad_input;
}

// Along a lane, summed with keepdim (the lane's sum broadcast back over it).
Tensor lane_sum(const Tensor& t, int64_t dim) { return sum(t, {dim}, /*keepdim=*/true); }

// dx = y * (g - sum(g * y)), from the incoming gradient g and softmax's output y.
// Its derivatives, for an incoming gradient gg of dx:
//   d/dg: y * (gg - sum(gg * y)), the same map applied to gg (it is self-adjoint)
//   d/dy: gg * (g - sum(g * y)) - g * sum(gg * y)
struct SoftmaxBackward : Function<SoftmaxBackward> {
  struct State {
    int64_t dim = 0;
  };
  static Tensor forward(Context& ctx, const Tensor& grad, const Tensor& y, int64_t dim) {
    ctx.state<State>().dim = dim;
    ctx.save_for_backward({grad, y});
    return softmax_backward_kernel("softmax_backward", grad, y, dim, /*log=*/false);
  }
  static tensor_list backward(Context& ctx, tensor_list grads) {
    const int64_t dim = ctx.state<State>().dim;
    const tensor_list saved = ctx.saved_tensors();
    const Tensor& g = saved[0];
    const Tensor& y = saved[1];
    const Tensor& gg = grads[0];
    Tensor grad_g, grad_y;
    if (ctx.needs_input_grad(0)) grad_g = SoftmaxBackward::apply(gg, y, dim);
    if (ctx.needs_input_grad(1)) grad_y = gg * (g - lane_sum(g * y, dim)) - g * lane_sum(gg * y, dim);
    return {grad_g, grad_y, Tensor()};
  }
};

// dx = g - exp(y) * sum(g), from the incoming gradient g and log_softmax's output y.
// Its derivatives, for an incoming gradient gg of dx:
//   d/dg: gg - sum(gg * exp(y))   (the transpose: not the same map)
//   d/dy: -gg * exp(y) * sum(g)
struct LogSoftmaxBackward : Function<LogSoftmaxBackward> {
  struct State {
    int64_t dim = 0;
  };
  static Tensor forward(Context& ctx, const Tensor& grad, const Tensor& y, int64_t dim) {
    ctx.state<State>().dim = dim;
    ctx.save_for_backward({grad, y});
    return softmax_backward_kernel("log_softmax_backward", grad, y, dim, /*log=*/true);
  }
  static tensor_list backward(Context& ctx, tensor_list grads) {
    const int64_t dim = ctx.state<State>().dim;
    const tensor_list saved = ctx.saved_tensors();
    const Tensor& g = saved[0];
    const Tensor& y = saved[1];
    const Tensor& gg = grads[0];
    const Tensor probabilities = exp(y);
    Tensor grad_g, grad_y;
    if (ctx.needs_input_grad(0)) grad_g = gg - lane_sum(gg * probabilities, dim);
    if (ctx.needs_input_grad(1)) grad_y = neg(gg * probabilities * lane_sum(g, dim));
    return {grad_g, grad_y, Tensor()};
  }
};

struct Softmax : Function<Softmax> {
  struct State {
    int64_t dim = 0;  // wrapped
  };
  static Tensor forward(Context& ctx, const Tensor& x, int64_t dim) {
    const int64_t wrapped = wrap_dim(dim, x.dim(), "softmax");
    Tensor y = softmax_kernel("softmax", x, wrapped, /*log=*/false);
    ctx.save_for_backward({y});
    ctx.state<State>().dim = wrapped;
    return y;
  }
  static tensor_list backward(Context& ctx, tensor_list grads) {
    const Tensor y = ctx.saved_tensors()[0];
    return {SoftmaxBackward::apply(grads[0], y, ctx.state<State>().dim), Tensor()};
  }
};

struct LogSoftmax : Function<LogSoftmax> {
  struct State {
    int64_t dim = 0;  // wrapped
  };
  static Tensor forward(Context& ctx, const Tensor& x, int64_t dim) {
    const int64_t wrapped = wrap_dim(dim, x.dim(), "log_softmax");
    Tensor y = softmax_kernel("log_softmax", x, wrapped, /*log=*/true);
    ctx.save_for_backward({y});
    ctx.state<State>().dim = wrapped;
    return y;
  }
  static tensor_list backward(Context& ctx, tensor_list grads) {
    const Tensor y = ctx.saved_tensors()[0];
    return {LogSoftmaxBackward::apply(grads[0], y, ctx.state<State>().dim), Tensor()};
  }
};

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) {
  check_defined("softmax", "self", x);
  return Softmax::apply(x, dim);
}

Tensor log_softmax(const Tensor& x, int64_t dim) {
  check_defined("log_softmax", "self", x);
  return LogSoftmax::apply(x, dim);
}

Tensor Tensor::softmax(int64_t dim) const { return minigrad::softmax(*this, dim); }
Tensor Tensor::log_softmax(int64_t dim) const { return minigrad::log_softmax(*this, dim); }

}  // namespace minigrad
