// softmax and log_softmax along one dim, any strides.
//
// Numerically stable: each lane (the line of elements along dim) subtracts its maximum
// before exp, so the largest term is exp(0) = 1 and nothing overflows; the sum of the
// exponentials accumulates in double. Backward uses the saved output only:
//   softmax:     dx = y * (g - sum(g * y, dim))
//   log_softmax: dx = g - exp(y) * sum(g, dim)
// On the GPU, cuda/softmax.cu has row kernels along the last dim for both directions (the
// backward fused into one pass over g and y); another dim is moved last by a copy.
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "autograd/function.h"
#include "core/shape.h"
#include "core/strided_loop.h"
#include "ops/cpu_loops.h"
#include "ops/ops.h"
#ifdef MINIGRAD_WITH_CUDA
#include "cuda/softmax.h"
#endif

namespace minigrad {
namespace {

#ifdef MINIGRAD_WITH_CUDA
// The CUDA kernels read contiguous rows along the last dim. Another dim, or a strided
// tensor, goes through a contiguous copy with `dim` moved last, and the result comes back
// through a copy: the output is contiguous, as on the CPU.
Tensor softmax_cuda(const Tensor& x, int64_t dim, bool log) {
  if (x.dim() == 0) return softmax_cuda(x.reshape({1}), 0, log).reshape({});
  const int64_t last = x.dim() - 1;
  if (dim != last || !x.is_contiguous())
    return softmax_cuda(x.transpose(dim, last).contiguous(), last, log).transpose(dim, last).contiguous();
  Tensor y = empty(x.sizes(), TensorOptions(x.dtype()).device(x.device()));
  cuda::softmax_rows(x, y, log);
  return y;
}

// The backward in one kernel (the composite formula takes four), for any dim the same way.
Tensor softmax_backward_cuda(const Tensor& grad, const Tensor& y, int64_t dim, bool log) {
  if (y.dim() == 0) return softmax_backward_cuda(grad.reshape({1}), y.reshape({1}), 0, log).reshape({});
  const int64_t last = y.dim() - 1;
  if (dim != last || !grad.is_contiguous() || !y.is_contiguous())
    return softmax_backward_cuda(grad.transpose(dim, last).contiguous(), y.transpose(dim, last).contiguous(), last,
                                 log)
        .transpose(dim, last)
        .contiguous();
  Tensor grad_input = empty(y.sizes(), TensorOptions(y.dtype()).device(y.device()));
  cuda::softmax_backward_rows(grad, y, grad_input, log);
  return grad_input;
}
#endif

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
      for_each_offset<2>(lane_starts, {x.strides().data(), y.strides().data()}, [&](const std::array<int64_t, 2>& o) {
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

Tensor softmax_kernel(const char* op, const Tensor& x, int64_t dim, bool log) {
  check_floating(op, "self", x);
#ifdef MINIGRAD_WITH_CUDA
  if (x.device().is_cuda()) return softmax_cuda(x, dim, log);
#endif
  check_cpu(op, "self", x);
  if (is_half(x.dtype()))
    return copy_as(softmax_kernel(op, copy_as(x, kFloat32, x.device()), dim, log), x.dtype(), x.device());
  Tensor y = empty(x.sizes(), TensorOptions(x.dtype()).device(x.device()));
  if (y.numel() == 0) return y;
  // A 0-d tensor is one lane of one element.
  if (x.dim() == 0)
    softmax_lanes(x.reshape({1}), y.reshape({1}), 0, log);
  else
    softmax_lanes(x, y, dim, log);
  return y;
}

struct Softmax : Function<Softmax> {
  static Tensor forward(Context& ctx, const Tensor& x, int64_t dim) {
    const int64_t wrapped = wrap_dim(dim, x.dim(), "softmax");
    Tensor y = softmax_kernel("softmax", x, wrapped, /*log=*/false);
    ctx.save_for_backward({y});
    ctx.saved_data["dim"] = wrapped;
    return y;
  }
  static tensor_list backward(Context& ctx, tensor_list grads) {
    const Tensor y = ctx.saved_tensors()[0];
    const Tensor& g = grads[0];
    const int64_t dim = ctx.saved_data["dim"].toInt();
#ifdef MINIGRAD_WITH_CUDA
    if (y.device().is_cuda()) return {softmax_backward_cuda(g, y, dim, /*log=*/false), Tensor()};
#endif
    const Tensor g_dot_y = sum(g * y, {dim}, /*keepdim=*/true);
    return {y * (g - g_dot_y), Tensor()};
  }
};

struct LogSoftmax : Function<LogSoftmax> {
  static Tensor forward(Context& ctx, const Tensor& x, int64_t dim) {
    const int64_t wrapped = wrap_dim(dim, x.dim(), "log_softmax");
    Tensor y = softmax_kernel("log_softmax", x, wrapped, /*log=*/true);
    ctx.save_for_backward({y});
    ctx.saved_data["dim"] = wrapped;
    return y;
  }
  static tensor_list backward(Context& ctx, tensor_list grads) {
    const Tensor y = ctx.saved_tensors()[0];
    const Tensor& g = grads[0];
    const int64_t dim = ctx.saved_data["dim"].toInt();
#ifdef MINIGRAD_WITH_CUDA
    if (y.device().is_cuda()) return {softmax_backward_cuda(g, y, dim, /*log=*/true), Tensor()};
#endif
    const Tensor g_sum = sum(g, {dim}, /*keepdim=*/true);
    return {g - exp(y) * g_sum, Tensor()};
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

}  // namespace minigrad
