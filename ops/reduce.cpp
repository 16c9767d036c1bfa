// Reductions: sum, mean, max, argmax, and sum_to (the backward of every broadcast).
//
// One CPU loop serves them all (for_each_reduced_element): it visits every input element
// once, in row-major order, and tells the body which output element the input element
// belongs to and where it sits among the reduced dims. Sums accumulate in double for
// floating inputs (a float32 accumulator stops growing at 2^24 when adding ones) and in
// int64 for integer and bool inputs; float16/bfloat16 are upcast to float32 first.
// On the GPU, cuda/reduce.cu has the kernels (the same accumulators, except that
// float16/bfloat16 load natively and accumulate in float) and the same max_prefers rule.
#include <array>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "autograd/function.h"
#include "core/shape.h"
#include "core/strided_loop.h"
#include "ops/cpu_loops.h"
#include "ops/ops.h"
#include "ops/reduce_combine.h"
#ifdef MINIGRAD_WITH_CUDA
#include "cuda/reduce.h"
#endif

namespace minigrad {
namespace {

// The reduced dims as a mask over x's dims: each dim wrapped, an empty list meaning every
// dim (as sum(x, {}) does in PyTorch), a repeated dim an error. A 0-d tensor accepts dim 0
// and -1 (like PyTorch) and has nothing to reduce.
std::vector<bool> reduced_dims_mask(const char* op, const Shape& dims, int64_t ndim) {
  std::vector<bool> reduced(static_cast<size_t>(ndim), dims.empty());
  for (int64_t dim : dims) {
    const int64_t wrapped = wrap_dim(dim, ndim, op);
    if (ndim == 0) continue;
    MG_CHECK(!reduced[static_cast<size_t>(wrapped)], "{}: dim {} appears more than once in the argument 'dim' {}",
             op, wrapped, shape_str(dims));
    reduced[static_cast<size_t>(wrapped)] = true;
  }
  return reduced;
}

// The reduced dims, ascending: what backward needs to undo the reduction.
Shape reduced_dims_list(const std::vector<bool>& reduced) {
  Shape dims;
  for (size_t d = 0; d < reduced.size(); ++d)
    if (reduced[d]) dims.push_back(static_cast<int64_t>(d));
  return dims;
}

// The output shape: reduced dims become 1 (keepdim) or disappear.
Shape reduced_sizes(const Shape& sizes, const std::vector<bool>& reduced, bool keepdim) {
  Shape out;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (!reduced[d])
      out.push_back(sizes[d]);
    else if (keepdim)
      out.push_back(1);
  }
  return out;
}

// How many input elements fold into each output element.
int64_t reduced_count(const Shape& sizes, const std::vector<bool>& reduced) {
  int64_t count = 1;
  for (size_t d = 0; d < sizes.size(); ++d)
    if (reduced[d]) count *= sizes[d];
  return count;
}

// Calls body(input_offset, output_index, position) for every element of x, in row-major
// order. output_index is the flat (row-major) index of the output element it reduces into;
// position is its flat row-major index among the reduced dims alone (for one reduced dim:
// its index along that dim). Both come out of for_each_offset as if they were two more
// operands with made-up strides: 0 along the dims they ignore.
template <typename F>
void for_each_reduced_element(const Tensor& x, const std::vector<bool>& reduced, F&& body) {
  const size_t ndim = static_cast<size_t>(x.dim());
  Shape output_strides(ndim, 0);
  Shape position_strides(ndim, 0);
  int64_t output_stride = 1;
  int64_t position_stride = 1;
  for (size_t d = ndim; d-- > 0;) {
    if (reduced[d]) {
      position_strides[d] = position_stride;
      position_stride *= x.sizes()[d];
    } else {
      output_strides[d] = output_stride;
      output_stride *= x.sizes()[d];
    }
  }
  for_each_offset<3>(x.sizes(), {x.strides().data(), output_strides.data(), position_strides.data()},
                     [&](const std::array<int64_t, 3>& o) { body(o[0], o[1], o[2]); });
}

// What a sum of scalar_t accumulates in, and what it returns.
template <typename scalar_t>
struct SumTypes {
  using acc_t = double;
  using out_t = scalar_t;
};
template <>
struct SumTypes<int64_t> {
  using acc_t = int64_t;
  using out_t = int64_t;
};
template <>
struct SumTypes<bool> {
  using acc_t = int64_t;
  using out_t = int64_t;
};

// The sum (or, with `mean`, the average) of x over the reduced dims.
Tensor sum_kernel(const char* op, const Tensor& x, const std::vector<bool>& reduced, bool keepdim, bool mean) {
  const DType out_dtype = is_floating(x.dtype()) ? x.dtype() : kInt64;
  const double count = static_cast<double>(reduced_count(x.sizes(), reduced));
#ifdef MINIGRAD_WITH_CUDA
  if (x.device().is_cuda()) {
    Tensor out = empty(reduced_sizes(x.sizes(), reduced, keepdim), TensorOptions(out_dtype).device(x.device()));
    cuda::sum_reduce(x, reduced, mean ? count : 1.0, out);
    return out;
  }
#endif
  check_cpu(op, "self", x);
  if (is_half(x.dtype()))
    return copy_as(sum_kernel(op, copy_as(x, kFloat32, x.device()), reduced, keepdim, mean), x.dtype(), x.device());
  Tensor out = empty(reduced_sizes(x.sizes(), reduced, keepdim), TensorOptions(out_dtype).device(x.device()));
  dispatch_all(x.dtype(), [&](auto tag) {
    using scalar_t = decltype(tag);
    using acc_t = typename SumTypes<scalar_t>::acc_t;
    using out_t = typename SumTypes<scalar_t>::out_t;
    const scalar_t* px = x.data_ptr<scalar_t>();
    std::vector<acc_t> acc(static_cast<size_t>(out.numel()), acc_t(0));
    for_each_reduced_element(x, reduced, [&](int64_t in, int64_t out_index, int64_t) {
      acc[static_cast<size_t>(out_index)] += static_cast<acc_t>(px[in]);
    });
    out_t* po = out.data_ptr<out_t>();
    // The mean of no elements is 0 / 0 = NaN, as in PyTorch.
    for (size_t i = 0; i < acc.size(); ++i)
      po[i] = mean ? static_cast<out_t>(static_cast<double>(acc[i]) / count) : static_cast<out_t>(acc[i]);
  });
  return out;
}

struct MaxAlongDim {
  Tensor values;
  Tensor indices;  // int64: where along `dim` each maximum is (the first one on ties)
};

MaxAlongDim max_kernel(const char* op, const Tensor& x, int64_t dim, bool keepdim) {
  MG_CHECK(x.size(dim) > 0, "{}: cannot reduce over dim {} of size 0 (input 'self' has shape {}): the maximum of no "
           "elements is undefined", op, dim, shape_str(x.sizes()));
  std::vector<bool> reduced(static_cast<size_t>(x.dim()), false);
  reduced[static_cast<size_t>(dim)] = true;
  const Shape out_sizes = reduced_sizes(x.sizes(), reduced, keepdim);
  auto allocate_result = [&] {
    return MaxAlongDim{empty(out_sizes, TensorOptions(x.dtype()).device(x.device())),
                       empty(out_sizes, TensorOptions(kInt64).device(x.device()))};
  };
#ifdef MINIGRAD_WITH_CUDA
  if (x.device().is_cuda()) {
    MaxAlongDim result = allocate_result();
    cuda::max_reduce(x, dim, result.values, result.indices);
    return result;
  }
#endif
  check_cpu(op, "self", x);
  if (is_half(x.dtype())) {
    MaxAlongDim upcast = max_kernel(op, copy_as(x, kFloat32, x.device()), dim, keepdim);
    return {copy_as(upcast.values, x.dtype(), x.device()), upcast.indices};
  }
  MaxAlongDim result = allocate_result();
  dispatch_all(x.dtype(), [&](auto tag) {
    using scalar_t = decltype(tag);
    const scalar_t* px = x.data_ptr<scalar_t>();
    scalar_t* best = result.values.data_ptr<scalar_t>();
    int64_t* best_index = result.indices.data_ptr<int64_t>();
    // Every first element beats this start (ties with it lose on the index), so each
    // output ends up with a real element and its index.
    const int64_t n = result.values.numel();
    for (int64_t i = 0; i < n; ++i) {
      best[i] = lowest_value<scalar_t>();
      best_index[i] = std::numeric_limits<int64_t>::max();
    }
    for_each_reduced_element(x, reduced, [&](int64_t in, int64_t out_index, int64_t position) {
      if (max_prefers(px[in], position, best[out_index], best_index[out_index])) {
        best[out_index] = px[in];
        best_index[out_index] = position;
      }
    });
  });
  return result;
}

// dst[..., index[...], ...] = src[...] along `dim`: each output's gradient goes back to the
// input element the maximum came from. src and index have dst's shape with `dim` of size 1.
void scatter_along_dim(const Tensor& dst, int64_t dim, const Tensor& index, const Tensor& src) {
#ifdef MINIGRAD_WITH_CUDA
  if (dst.device().is_cuda()) {  // the kernel takes dst (fresh zeros), src and index contiguous
    cuda::scatter_along_dim(dst, dim, index.contiguous(), src.contiguous());
    return;
  }
#endif
  Shape dst_strides = dst.strides();
  const int64_t dim_stride = dst_strides[static_cast<size_t>(dim)];
  dst_strides[static_cast<size_t>(dim)] = 0;  // the index supplies the position along dim
  const int64_t* pi = index.data_ptr<int64_t>();
  dispatch_all(dst.dtype(), [&](auto tag) {
    using scalar_t = decltype(tag);
    scalar_t* pd = dst.data_ptr<scalar_t>();
    const scalar_t* ps = src.data_ptr<scalar_t>();
    for_each_offset<3>(src.sizes(), {dst_strides.data(), src.strides().data(), index.strides().data()},
                       [&](const std::array<int64_t, 3>& o) { pd[o[0] + pi[o[2]] * dim_stride] = ps[o[1]]; });
  });
}

// The gradient of a reduction, spread back over the input: the reduced dims come back
// as size 1 (when keepdim dropped them) and are then expanded, a view with stride 0.
Tensor expand_reduced_grad(const Tensor& grad, const Shape& input_sizes, const Shape& dims) {
  std::vector<bool> reduced(input_sizes.size(), false);
  for (int64_t d : dims) reduced[static_cast<size_t>(d)] = true;
  return grad.reshape(reduced_sizes(input_sizes, reduced, /*keepdim=*/true)).expand(input_sizes);
}

struct Sum : Function<Sum> {
  static Tensor forward(Context& ctx, const Tensor& x, const Shape& dims, bool keepdim) {
    const std::vector<bool> reduced = reduced_dims_mask("sum", dims, x.dim());
    ctx.saved_data["input_sizes"] = x.sizes();
    ctx.saved_data["dims"] = reduced_dims_list(reduced);
    return sum_kernel("sum", x, reduced, keepdim, /*mean=*/false);
  }
  static tensor_list backward(Context& ctx, tensor_list grads) {
    return {expand_reduced_grad(grads[0], ctx.saved_data["input_sizes"].toShape(), ctx.saved_data["dims"].toShape()),
            Tensor(), Tensor()};
  }
};

struct Mean : Function<Mean> {
  static Tensor forward(Context& ctx, const Tensor& x, const Shape& dims, bool keepdim) {
    const std::vector<bool> reduced = reduced_dims_mask("mean", dims, x.dim());
    ctx.saved_data["input_sizes"] = x.sizes();
    ctx.saved_data["dims"] = reduced_dims_list(reduced);
    ctx.saved_data["count"] = reduced_count(x.sizes(), reduced);
    return sum_kernel("mean", x, reduced, keepdim, /*mean=*/true);
  }
  static tensor_list backward(Context& ctx, tensor_list grads) {
    const Tensor spread =
        expand_reduced_grad(grads[0], ctx.saved_data["input_sizes"].toShape(), ctx.saved_data["dims"].toShape());
    return {div(spread, ctx.saved_data["count"].toDouble()), Tensor(), Tensor()};
  }
};

struct Max : Function<Max> {
  // `dim` is already wrapped, and x has at least one dim.
  static Tensor forward(Context& ctx, const Tensor& x, int64_t dim, bool keepdim) {
    MaxAlongDim result = max_kernel("max", x, dim, keepdim);
    ctx.save_for_backward({result.indices});
    ctx.saved_data["input_sizes"] = x.sizes();
    ctx.saved_data["dim"] = dim;
    ctx.saved_data["keepdim"] = keepdim;
    return result.values;
  }
  static tensor_list backward(Context& ctx, tensor_list grads) {
    const int64_t dim = ctx.saved_data["dim"].toInt();
    const bool keepdim = ctx.saved_data["keepdim"].toBool();
    Tensor indices = ctx.saved_tensors()[0];
    Tensor grad = grads[0];
    if (!keepdim) {
      indices = indices.unsqueeze(dim);
      grad = grad.unsqueeze(dim);
    }
    Tensor grad_input =
        zeros(ctx.saved_data["input_sizes"].toShape(), TensorOptions(grad.dtype()).device(grad.device()));
    scatter_along_dim(grad_input, dim, indices, grad);
    return {grad_input, Tensor(), Tensor()};
  }
};

}  // namespace

Tensor sum(const Tensor& x) { return sum(x, {}, false); }

Tensor sum(const Tensor& x, const Shape& dims, bool keepdim) {
  check_defined("sum", "self", x);
  return Sum::apply(x, dims, keepdim);
}

Tensor mean(const Tensor& x) { return mean(x, {}, false); }

Tensor mean(const Tensor& x, const Shape& dims, bool keepdim) {
  check_defined("mean", "self", x);
  check_floating("mean", "self", x);
  return Mean::apply(x, dims, keepdim);
}

Tensor max(const Tensor& x) {
  check_defined("max", "self", x);
  MG_CHECK(x.numel() > 0, "max: the input 'self' is empty (shape {}): the maximum of no elements is undefined",
           shape_str(x.sizes()));
  return Max::apply(x.reshape({-1}), 0, false);
}

Tensor max(const Tensor& x, int64_t dim, bool keepdim) {
  check_defined("max", "self", x);
  const int64_t wrapped = wrap_dim(dim, x.dim(), "max");
  // A 0-d tensor is its own maximum along its one (implicit) dim.
  if (x.dim() == 0) return Max::apply(x.reshape({1}), 0, false);
  return Max::apply(x, wrapped, keepdim);
}

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  check_defined("argmax", "self", x);
  const int64_t wrapped = wrap_dim(dim, x.dim(), "argmax");
  if (x.dim() == 0) return max_kernel("argmax", x.reshape({1}), 0, false).indices;
  return max_kernel("argmax", x, wrapped, keepdim).indices;
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  check_defined("sum_to", "self", x);
  if (x.sizes() == shape) return x;
  const int64_t ndim = x.dim();
  const int64_t leading = ndim - static_cast<int64_t>(shape.size());
  MG_CHECK(leading >= 0, "sum_to: cannot sum 'self' of shape {} down to the larger shape {}", shape_str(x.sizes()),
           shape_str(shape));
  // Sum away the leading dims broadcasting added, and the dims broadcast from size 1.
  Shape dims;
  for (int64_t d = 0; d < ndim; ++d) {
    if (d < leading) {
      dims.push_back(d);
      continue;
    }
    const int64_t target = shape[static_cast<size_t>(d - leading)];
    MG_CHECK(target == x.size(d) || target == 1,
             "sum_to: shape {} does not broadcast to the shape {} of 'self' (dim {}: {} vs {})", shape_str(shape),
             shape_str(x.sizes()), d, target, x.size(d));
    if (target == 1 && x.size(d) != 1) dims.push_back(d);
  }
  const Tensor summed = dims.empty() ? x : sum(x, dims, /*keepdim=*/true);
  return summed.reshape(shape);
}

// ---- Tensor members ----
Tensor Tensor::sum() const { return minigrad::sum(*this); }
Tensor Tensor::sum(const Shape& dims, bool keepdim) const { return minigrad::sum(*this, dims, keepdim); }
Tensor Tensor::mean() const { return minigrad::mean(*this); }
Tensor Tensor::mean(const Shape& dims, bool keepdim) const { return minigrad::mean(*this, dims, keepdim); }
Tensor Tensor::max() const { return minigrad::max(*this); }
Tensor Tensor::max(int64_t dim, bool keepdim) const { return minigrad::max(*this, dim, keepdim); }

}  // namespace minigrad
