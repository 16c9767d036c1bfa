// Reductions: sum, mean, max, argmax, and sum_to (the backward of every broadcast).
//
// One general CPU loop serves them all (for_each_reduced_element): it visits every input
// element once, in row-major order, and tells the body which output element the input
// element belongs to and where it sits among the reduced dims. Sums accumulate in double for
// floating inputs (a float32 accumulator stops growing at 2^24 when adding ones) and in
// uint64 for integer and bool inputs (an int64 sum wraps around modulo 2^64, as in PyTorch,
// instead of overflowing a signed integer, which C++ leaves undefined); float16/bfloat16
// are upcast to float32 first.
//
// The fast loops below add float32 in short runs first: a lane adds kSumRun (8) terms in
// float, and that run's total goes into the lane's double accumulator. Converting every
// element to double costs more than the adds do (it made the row sum a third slower than
// LibTorch's all-float one); a run of 8 converts one element in 8. The error stays bounded
// independently of the length: each run is at most 7 float roundings of the sum of its 8
// magnitudes, and the 2^24 ceiling of a float accumulator never comes near (a run of ones
// holds at most 8).
//
// Sums of a contiguous input over one run of adjacent dims (the last dim, the first, all
// of them: nearly every sum) take two faster loops instead, on the input seen as
// [outer, reduced, inner] (see sum_fast_path):
// - inner == 1, each output the sum of a contiguous row: the row is cut into blocks of
//   kSumBlock elements; in a block, element i adds into accumulator lane i % kSumLanes, and
//   the lanes combine pairwise (lane j += lane j + 8, then + 4, + 2, + 1: sum_in_lanes,
//   ops/cpu_loops.h, which softmax's rows use too); the blocks' sums add left to right.
// - inner > 1, each output a column: rows add into a row of accumulators one after the
//   other, in row order (an axpy per row, vectorized across the columns).
// Both orders are fixed by the shape alone, so sums are bitwise the same for any thread
// count (tests/test_parallel.cpp), and the threads split work only along those fixed lines:
// blocks or rows, or ranges of columns.
//
// Every backward here is built from public ops (reshape, expand, eq, where, ...), so each
// reduction is twice differentiable.
// On the GPU, cuda/reduce.cu has the kernels (the same accumulators, except that
// float16/bfloat16 load natively and accumulate in float) and the same max_prefers rule.
#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include <minigrad/autograd/function.h>
#include <minigrad/core/cpu_arch.h>
#include <minigrad/core/parallel.h>
#include <minigrad/core/shape.h>
#include <minigrad/core/strided_loop.h>
#include <minigrad/ops/cpu_loops.h>
#include <minigrad/ops/ops.h>
#include <minigrad/kernels/reduce_combine.h>
#include <minigrad/cuda/reduce.h>

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

// What a sum of scalar_t accumulates in (acc_t), what the fast loops add a short run in
// before it reaches acc_t (run_t), and what the sum returns.
template <typename scalar_t>
struct SumTypes {
  using acc_t = double;
  using run_t = double;
  using out_t = scalar_t;
};
template <>
struct SumTypes<float> {
  using acc_t = double;
  using run_t = float;
  using out_t = float;
};
// Integers add in uint64_t, where overflow is defined to wrap around; converting the total
// back to int64 gives the two's-complement result PyTorch gives (INT64_MAX + 1 is INT64_MIN).
template <>
struct SumTypes<int64_t> {
  using acc_t = uint64_t;
  using run_t = uint64_t;
  using out_t = int64_t;
};
template <>
struct SumTypes<bool> {
  using acc_t = uint64_t;
  using run_t = uint64_t;
  using out_t = int64_t;
};

// ---- the fast sums ----

// x as [outer, reduced, inner], when x is contiguous and its reduced dims (those of size
// above 1) are adjacent; dims of size 1 count on neither side.
struct ReductionLayout {
  int64_t outer = 1, reduced = 1, inner = 1;
};
bool as_outer_reduced_inner(const Tensor& x, const std::vector<bool>& reduced, ReductionLayout& layout) {
  if (!x.is_contiguous() || x.numel() == 0) return false;
  const int64_t ndim = x.dim();
  int64_t first = -1, last = -1;
  for (int64_t d = 0; d < ndim; ++d) {
    if (x.size(d) == 1 || !reduced[static_cast<size_t>(d)]) continue;
    if (first < 0) first = d;
    last = d;
  }
  if (first < 0) return false;  // nothing to add up: the general loop copies
  for (int64_t d = 0; d < ndim; ++d) {
    const int64_t size = x.size(d);
    if (d < first)
      layout.outer *= size;
    else if (d > last)
      layout.inner *= size;
    else if (size != 1 && !reduced[static_cast<size_t>(d)])
      return false;  // a kept dim between reduced ones
    else
      layout.reduced *= size;
  }
  return true;
}

constexpr int64_t kSumBlock = 4096;  // elements of a row summed as one block
constexpr int64_t kSumRun = 8;       // terms a lane adds in run_t before the run goes into acc_t
constexpr int64_t kSumColumns = 256; // columns one work item of a column sum adds

// The sum of p[0, n), n <= kSumBlock, in the order the header describes (sum_in_lanes,
// ops/cpu_loops.h). With run_t narrower than acc_t, element i of each stretch of
// kSumLanes * kSumRun elements adds into run lane i % kSumLanes; at the stretch's end each
// run lane goes into its acc_t lane (the last, shorter stretch the same way), and the acc_t
// lanes combine pairwise (combine_lanes).
template <typename acc_t, typename run_t, typename scalar_t>
MG_CPU_CLONES static acc_t block_sum(const scalar_t* p, int64_t n) {
  if constexpr (std::is_same_v<acc_t, run_t>) {
    return sum_in_lanes<acc_t>(n, [p](int64_t i) { return static_cast<acc_t>(p[i]); });
  } else {
    constexpr int64_t kStretch = kSumLanes * kSumRun;
    acc_t lane[kSumLanes] = {};
    int64_t i = 0;
    auto add_stretch = [&](int64_t end) {
      run_t run[kSumLanes] = {};
      const int64_t whole = i + (end - i) / kSumLanes * kSumLanes;
      for (; i < whole; i += kSumLanes)
        for (int j = 0; j < kSumLanes; ++j) run[j] += static_cast<run_t>(p[i + j]);
      for (int j = 0; i < end; ++i, ++j) run[j] += static_cast<run_t>(p[i]);
      for (int j = 0; j < kSumLanes; ++j) lane[j] += static_cast<acc_t>(run[j]);
    };
    while (i + kStretch <= n) add_stretch(i + kStretch);
    if (i < n) add_stretch(n);
    return combine_lanes(lane);
  }
}

// acc[j] += x[r * row_stride + j] for rows r = 0 .. rows-1 in order, columns j in [0, cols),
// cols <= kSumColumns. With run_t narrower than acc_t, each kSumRun rows add into a run of
// run_t first, which then goes into acc.
template <typename acc_t, typename run_t, typename scalar_t>
MG_CPU_CLONES static void add_rows(acc_t* acc, const scalar_t* x, int64_t rows, int64_t row_stride, int64_t cols) {
  if constexpr (std::is_same_v<acc_t, run_t>) {
    for (int64_t r = 0; r < rows; ++r) {
      const scalar_t* row = x + r * row_stride;
      for (int64_t j = 0; j < cols; ++j) acc[j] += static_cast<acc_t>(row[j]);
    }
  } else {
    run_t run[kSumColumns];
    for (int64_t r0 = 0; r0 < rows; r0 += kSumRun) {
      const int64_t r1 = std::min(rows, r0 + kSumRun);
      for (int64_t j = 0; j < cols; ++j) run[j] = static_cast<run_t>(x[r0 * row_stride + j]);
      for (int64_t r = r0 + 1; r < r1; ++r) {
        const scalar_t* row = x + r * row_stride;
        for (int64_t j = 0; j < cols; ++j) run[j] += static_cast<run_t>(row[j]);
      }
      for (int64_t j = 0; j < cols; ++j) acc[j] += static_cast<acc_t>(run[j]);
    }
  }
}

// out[o] = finish(sum of row o) for the rows of a [outer, reduced] layout (inner == 1).
template <typename acc_t, typename run_t, typename scalar_t, typename Finish>
void sum_rows(const scalar_t* px, const ReductionLayout& l, const Finish& finish) {
  const int64_t blocks = (l.reduced + kSumBlock - 1) / kSumBlock;
  std::vector<acc_t> partial(static_cast<size_t>(l.outer * blocks));
  const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / std::min(l.reduced, kSumBlock));
  parallel_for(0, l.outer * blocks, grain, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t row = t / blocks, block = t % blocks;
      const int64_t start = block * kSumBlock;
      partial[static_cast<size_t>(t)] =
          block_sum<acc_t, run_t>(px + row * l.reduced + start, std::min(kSumBlock, l.reduced - start));
    }
  });
  for (int64_t row = 0; row < l.outer; ++row) {
    acc_t total = partial[static_cast<size_t>(row * blocks)];
    for (int64_t block = 1; block < blocks; ++block) total += partial[static_cast<size_t>(row * blocks + block)];
    finish(row, total);
  }
}

// out[o * inner + j] = finish(sum over r of x[o, r, j]) for a layout with inner > 1.
template <typename acc_t, typename run_t, typename scalar_t, typename Finish>
void sum_columns(const scalar_t* px, const ReductionLayout& l, const Finish& finish) {
  // Work items: (o, range of kSumColumns columns), each summed alone, rows in order.
  const int64_t ranges = (l.inner + kSumColumns - 1) / kSumColumns;
  const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / (l.reduced * std::min(l.inner, kSumColumns)));
  parallel_for(0, l.outer * ranges, grain, [&](int64_t begin, int64_t end) {
    std::vector<acc_t> acc(static_cast<size_t>(std::min(l.inner, kSumColumns)));
    for (int64_t t = begin; t < end; ++t) {
      const int64_t o = t / ranges, j0 = (t % ranges) * kSumColumns;
      const int64_t cols = std::min(kSumColumns, l.inner - j0);
      std::fill(acc.begin(), acc.end(), acc_t(0));
      add_rows<acc_t, run_t>(acc.data(), px + o * l.reduced * l.inner + j0, l.reduced, l.inner, cols);
      for (int64_t j = 0; j < cols; ++j) finish(o * l.inner + j0 + j, acc[static_cast<size_t>(j)]);
    }
  });
}

// The sum (or, with `mean`, the average) of x over the reduced dims.
Tensor sum_kernel(const char* op, const Tensor& x, const std::vector<bool>& reduced, bool keepdim, bool mean) {
  const DType out_dtype = is_floating(x.dtype()) ? x.dtype() : kInt64;
  const double count = static_cast<double>(reduced_count(x.sizes(), reduced));
  if (x.device().is_cuda()) {
    Tensor out = empty(reduced_sizes(x.sizes(), reduced, keepdim), TensorOptions(out_dtype).device(x.device()));
    cuda::sum_reduce(x, reduced, mean ? count : 1.0, out);
    return out;
  }
  check_cpu(op, "self", x);
  if (is_half(x.dtype()))
    return copy_as(sum_kernel(op, copy_as(x, kFloat32, x.device()), reduced, keepdim, mean), x.dtype(), x.device());
  Tensor out = empty(reduced_sizes(x.sizes(), reduced, keepdim), TensorOptions(out_dtype).device(x.device()));
  dispatch_all(x.dtype(), [&](auto tag) {
    using scalar_t = decltype(tag);
    using acc_t = typename SumTypes<scalar_t>::acc_t;
    using run_t = typename SumTypes<scalar_t>::run_t;
    using out_t = typename SumTypes<scalar_t>::out_t;
    const scalar_t* px = x.data_ptr<scalar_t>();
    out_t* po = out.data_ptr<out_t>();
    // One output from its total: the integer sum wraps (mean refuses integer inputs); the
    // mean of no elements is 0 / 0 = NaN, as in PyTorch.
    auto finish = [&](int64_t index, acc_t total) {
      if constexpr (std::is_same_v<acc_t, uint64_t>)
        po[index] = static_cast<out_t>(total);
      else
        po[index] = mean ? static_cast<out_t>(total / count) : static_cast<out_t>(total);
    };
    ReductionLayout layout;
    if (as_outer_reduced_inner(x, reduced, layout)) {
      if (layout.inner == 1)
        sum_rows<acc_t, run_t>(px, layout, finish);
      else
        sum_columns<acc_t, run_t>(px, layout, finish);
      return;
    }
    std::vector<acc_t> acc(static_cast<size_t>(out.numel()), acc_t(0));
    for_each_reduced_element(x, reduced, [&](int64_t in, int64_t out_index, int64_t) {
      acc[static_cast<size_t>(out_index)] += static_cast<acc_t>(px[in]);
    });
    for (size_t i = 0; i < acc.size(); ++i) finish(static_cast<int64_t>(i), acc[i]);
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
  if (x.device().is_cuda()) {
    MaxAlongDim result = allocate_result();
    cuda::max_reduce(x, dim, result.values, result.indices);
    return result;
  }
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

// The gradient of a reduction, spread back over the input: the reduced dims come back
// as size 1 (when keepdim dropped them) and are then expanded, a view with stride 0.
Tensor expand_reduced_grad(const Tensor& grad, const Shape& input_sizes, const Shape& dims) {
  std::vector<bool> reduced(input_sizes.size(), false);
  for (int64_t d : dims) reduced[static_cast<size_t>(d)] = true;
  return grad.reshape(reduced_sizes(input_sizes, reduced, /*keepdim=*/true)).expand(input_sizes);
}

struct Sum : Function<Sum> {
  struct State {
    Shape input_sizes;
    Shape dims;  // the reduced dims, wrapped and ascending
  };
  static Tensor forward(Context& ctx, const Tensor& x, const Shape& dims, bool keepdim) {
    const std::vector<bool> reduced = reduced_dims_mask("sum", dims, x.dim());
    auto& s = ctx.state<State>();
    s.input_sizes = x.sizes();
    s.dims = reduced_dims_list(reduced);
    return sum_kernel("sum", x, reduced, keepdim, /*mean=*/false);
  }
  static tensor_list backward(Context& ctx, tensor_list grads) {
    const auto& s = ctx.state<State>();
    return {expand_reduced_grad(grads[0], s.input_sizes, s.dims), Tensor(), Tensor()};
  }
};

struct Mean : Function<Mean> {
  struct State {
    Shape input_sizes;
    Shape dims;
    int64_t count = 0;  // elements per output
  };
  static Tensor forward(Context& ctx, const Tensor& x, const Shape& dims, bool keepdim) {
    const std::vector<bool> reduced = reduced_dims_mask("mean", dims, x.dim());
    auto& s = ctx.state<State>();
    s.input_sizes = x.sizes();
    s.dims = reduced_dims_list(reduced);
    s.count = reduced_count(x.sizes(), reduced);
    return sum_kernel("mean", x, reduced, keepdim, /*mean=*/true);
  }
  static tensor_list backward(Context& ctx, tensor_list grads) {
    const auto& s = ctx.state<State>();
    const Tensor spread = expand_reduced_grad(grads[0], s.input_sizes, s.dims);
    return {div(spread, static_cast<double>(s.count)), Tensor(), Tensor()};
  }
};

// max along one dim: the gradient goes to the element the index points at (the first
// maximum), as in PyTorch.
//
// Backward builds it from public ops, a one-hot mask along `dim` and a where:
//   mask = (arange(size) viewed along dim) == indices,  grad_input = where(mask, grad, 0)
// so it is twice differentiable: where's own backward picks the gradient back out of the
// mask's positions (a gather). It costs a bool mask of the input's size and one pass
// over it, the same order of work as the zero-filled gradient every reduction's backward
// writes anyway; a scatter/gather Function pair would save the mask but needs two more
// kernels per device for a backward that is rarely the bottleneck.
struct Max : Function<Max> {
  struct State {
    Shape input_sizes;
    int64_t dim = 0;
    bool keepdim = false;
  };
  // `dim` is already wrapped, and x has at least one dim.
  static Tensor forward(Context& ctx, const Tensor& x, int64_t dim, bool keepdim) {
    MaxAlongDim result = max_kernel("max", x, dim, keepdim);
    ctx.save_for_backward({result.indices});
    auto& s = ctx.state<State>();
    s.input_sizes = x.sizes();
    s.dim = dim;
    s.keepdim = keepdim;
    return result.values;
  }
  static tensor_list backward(Context& ctx, tensor_list grads) {
    const auto& s = ctx.state<State>();
    Tensor indices = ctx.saved_tensors()[0];
    Tensor grad = grads[0];
    if (!s.keepdim) {
      indices = indices.unsqueeze(s.dim);
      grad = grad.unsqueeze(s.dim);
    }
    const TensorOptions index_options = TensorOptions(kInt64).device(grad.device());
    Shape positions_sizes(s.input_sizes.size(), 1);
    positions_sizes[static_cast<size_t>(s.dim)] = s.input_sizes[static_cast<size_t>(s.dim)];
    const Tensor positions = arange(s.input_sizes[static_cast<size_t>(s.dim)], index_options).view(positions_sizes);
    const Tensor is_max = eq(positions, indices);  // broadcasts to the input's shape
    const Tensor zero = zeros({}, TensorOptions(grad.dtype()).device(grad.device()));
    return {where(is_max, grad, zero), Tensor(), Tensor()};
  }
};

// max over all elements: one value, and no index to follow. When several elements tie for
// the maximum the gradient is split evenly among them, as PyTorch's max() does
// (evenly_distribute_backward): each gets grad / count. When the maximum is NaN, the NaN
// elements are the ones that tie.
struct MaxAll : Function<MaxAll> {
  static Tensor forward(Context& ctx, const Tensor& x) {
    MG_CHECK(x.numel() > 0, "max: the input 'self' is empty (shape {}): the maximum of no elements is undefined",
             shape_str(x.sizes()));
    Tensor value = max_kernel("max", x.reshape({-1}), 0, /*keepdim=*/false).values;
    ctx.save_for_backward({x, value});
    return value;
  }
  static tensor_list backward(Context& ctx, tensor_list grads) {
    const tensor_list saved = ctx.saved_tensors();
    const Tensor& x = saved[0];
    const Tensor& value = saved[1];
    // x != x is NaN; where (not a branch on the value) keeps a GPU backward free of a sync.
    const Tensor is_max = where(ne(value, value), ne(x, x), eq(x, value));
    const Tensor share = is_max.to(grads[0].dtype());
    return {mul(share, div(grads[0], share.sum()))};
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
  return MaxAll::apply(x);
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
Tensor Tensor::argmax(int64_t dim, bool keepdim) const { return minigrad::argmax(*this, dim, keepdim); }

}  // namespace minigrad
