// Reductions: sum, mean, max / min (over a dim with their indices, or over any dims:
// amax / amin), argmax / argmin, prod, cumsum, sum_to (the backward of every broadcast),
// and the composites of those: logsumexp, var, std, norm, any, all.
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
// float16/bfloat16 load natively and accumulate in float) and the same max/min rule
// (extremum_prefers, kernels/reduce_combine.h). prod and cumsum accumulate as the sums do (double, uint64 for
// integers), in one plain row-major pass: no fast paths.
#include <algorithm>
#include <array>
#include <cmath>
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

// The maximum or minimum over the reduced dims, and where it is: `indices` (int64) holds
// its position among the reduced dims (row-major over them; for one dim, the index along
// it), the first extremum on ties.
struct Extremes {
  Tensor values;
  Tensor indices;
};

const char* extremum_name(Extremum kind) { return kind == Extremum::Max ? "maximum" : "minimum"; }

Extremes extremum_kernel(const char* op, const Tensor& x, const std::vector<bool>& reduced, bool keepdim,
                         Extremum kind) {
  for (size_t d = 0; d < reduced.size(); ++d)
    MG_CHECK(!reduced[d] || x.sizes()[d] > 0,
             "{}: cannot reduce over dim {} of size 0 (input 'self' has shape {}): the {} of no elements is undefined",
             op, d, shape_str(x.sizes()), extremum_name(kind));
  const Shape out_sizes = reduced_sizes(x.sizes(), reduced, keepdim);
  auto allocate_result = [&] {
    return Extremes{empty(out_sizes, x.options()),
                    empty(out_sizes, TensorOptions(kInt64).device(x.device()))};
  };
  if (x.device().is_cuda()) {
    Extremes result = allocate_result();
    cuda::extremum_reduce(x, reduced, kind, result.values, result.indices);
    return result;
  }
  check_cpu(op, "self", x);
  if (is_half(x.dtype())) {
    Extremes upcast = extremum_kernel(op, copy_as(x, kFloat32, x.device()), reduced, keepdim, kind);
    return {copy_as(upcast.values, x.dtype(), x.device()), upcast.indices};
  }
  Extremes result = allocate_result();
  dispatch_all(x.dtype(), [&](auto tag) {
    using scalar_t = decltype(tag);
    const scalar_t* px = x.data_ptr<scalar_t>();
    scalar_t* best = result.values.data_ptr<scalar_t>();
    int64_t* best_index = result.indices.data_ptr<int64_t>();
    // Every first element beats this start (ties with it lose on the index), so each
    // output ends up with a real element and its index.
    const int64_t n = result.values.numel();
    for (int64_t i = 0; i < n; ++i) {
      best[i] = extremum_start<scalar_t>(kind);
      best_index[i] = std::numeric_limits<int64_t>::max();
    }
    for_each_reduced_element(x, reduced, [&](int64_t in, int64_t out_index, int64_t position) {
      if (extremum_prefers(kind, px[in], position, best[out_index], best_index[out_index])) {
        best[out_index] = px[in];
        best_index[out_index] = position;
      }
    });
  });
  return result;
}

// The mask of one dim for extremum_kernel.
std::vector<bool> one_dim_mask(const Tensor& x, int64_t dim) {
  std::vector<bool> reduced(static_cast<size_t>(x.dim()), false);
  reduced[static_cast<size_t>(dim)] = true;
  return reduced;
}

// The product of x over the reduced dims: the accumulators of the sums (double for
// floating inputs, uint64 for integer ones, wrapping around). float16/bfloat16 are upcast
// to float32 and bool to int64 first, on both devices. One pass in row-major order; every
// output starts at 1, so a product of no elements is 1.
Tensor prod_kernel(const char* op, const Tensor& x, const std::vector<bool>& reduced, bool keepdim) {
  if (!x.device().is_cuda()) check_cpu(op, "self", x);
  if (is_half(x.dtype()))
    return copy_as(prod_kernel(op, copy_as(x, kFloat32, x.device()), reduced, keepdim), x.dtype(), x.device());
  if (x.dtype() == kBool) return prod_kernel(op, copy_as(x, kInt64, x.device()), reduced, keepdim);
  const DType out_dtype = is_floating(x.dtype()) ? x.dtype() : kInt64;
  Tensor out = empty(reduced_sizes(x.sizes(), reduced, keepdim), TensorOptions(out_dtype).device(x.device()));
  if (x.device().is_cuda()) {
    cuda::prod_reduce(x, reduced, out);
    return out;
  }
  dispatch_all(x.dtype(), [&](auto tag) {
    using scalar_t = decltype(tag);
    using acc_t = typename SumTypes<scalar_t>::acc_t;
    using out_t = typename SumTypes<scalar_t>::out_t;
    const scalar_t* px = x.data_ptr<scalar_t>();
    std::vector<acc_t> acc(static_cast<size_t>(out.numel()), acc_t(1));
    for_each_reduced_element(x, reduced, [&](int64_t in, int64_t out_index, int64_t) {
      acc[static_cast<size_t>(out_index)] *= static_cast<acc_t>(px[in]);
    });
    out_t* po = out.data_ptr<out_t>();
    for (size_t i = 0; i < acc.size(); ++i) po[i] = static_cast<out_t>(acc[i]);
  });
  return out;
}

// The running sum of x along `dim` (wrapped; a 0-d x is one line of one element), from the
// end when `reverse`: each line in order, in the sums' accumulators (double, or uint64
// wrapping around for integer and bool inputs, which give int64).
Tensor cumsum_kernel(const Tensor& x, int64_t dim, bool reverse) {
  if (!x.device().is_cuda()) {
    check_cpu("cumsum", "self", x);
    if (is_half(x.dtype()))
      return copy_as(cumsum_kernel(copy_as(x, kFloat32, x.device()), dim, reverse), x.dtype(), x.device());
  }
  const DType out_dtype = is_floating(x.dtype()) ? x.dtype() : kInt64;
  // x as [outer, length, inner], contiguous.
  const Tensor source = x.is_contiguous() ? x : copy_as(x, x.dtype(), x.device());
  int64_t outer = 1, length = 1, inner = 1;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (d < dim) outer *= x.size(d);
    else if (d == dim) length = x.size(d);
    else inner *= x.size(d);
  }
  Tensor out = empty(x.sizes(), TensorOptions(out_dtype).device(x.device()));
  if (x.device().is_cuda()) {
    cuda::cumsum(source, outer, length, inner, reverse, out);
    return out;
  }
  dispatch_all(x.dtype(), [&](auto tag) {
    using scalar_t = decltype(tag);
    using acc_t = typename SumTypes<scalar_t>::acc_t;
    using out_t = typename SumTypes<scalar_t>::out_t;
    const scalar_t* px = source.data_ptr<scalar_t>();
    out_t* po = out.data_ptr<out_t>();
    const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(1, length * inner));
    parallel_for(0, outer, grain, [&](int64_t begin, int64_t end) {
      std::vector<acc_t> total(static_cast<size_t>(inner));
      for (int64_t o = begin; o < end; ++o) {
        std::fill(total.begin(), total.end(), acc_t(0));
        for (int64_t step = 0; step < length; ++step) {
          const int64_t r = reverse ? length - 1 - step : step;
          const int64_t row = (o * length + r) * inner;
          for (int64_t i = 0; i < inner; ++i) {
            total[static_cast<size_t>(i)] += static_cast<acc_t>(px[row + i]);
            po[row + i] = static_cast<out_t>(total[static_cast<size_t>(i)]);
          }
        }
      }
    });
  });
  return out;
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

// max or min along one dim: the gradient goes to the element the index points at (the
// first extremum), as in PyTorch.
//
// Backward builds it from public ops, a one-hot mask along `dim` and a where:
//   mask = (arange(size) viewed along dim) == indices,  grad_input = where(mask, grad, 0)
// so it is twice differentiable: where's own backward picks the gradient back out of the
// mask's positions (a gather). It costs a bool mask of the input's size and one pass
// over it, the same order of work as the zero-filled gradient every reduction's backward
// writes anyway; a scatter/gather Function pair would save the mask but needs two more
// kernels per device for a backward that is rarely the bottleneck.
struct ExtremumAlongDim : Function<ExtremumAlongDim> {
  struct State {
    Shape input_sizes;
    int64_t dim = 0;
    bool keepdim = false;
  };
  // `dim` is already wrapped, and x has at least one dim. Returns {values, indices}.
  static tensor_list forward(Context& ctx, const Tensor& x, int64_t dim, bool keepdim, Extremum kind) {
    Extremes result = extremum_kernel(kind == Extremum::Max ? "max" : "min", x, one_dim_mask(x, dim), keepdim, kind);
    ctx.save_for_backward({result.indices});
    ctx.mark_non_differentiable({result.indices});
    auto& s = ctx.state<State>();
    s.input_sizes = x.sizes();
    s.dim = dim;
    s.keepdim = keepdim;
    return {result.values, result.indices};
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
    const Tensor is_extremum = eq(positions, indices);  // broadcasts to the input's shape
    const Tensor zero = zeros({}, grad.options());
    return {where(is_extremum, grad, zero), Tensor(), Tensor(), Tensor()};
  }
};

// amax / amin over any dims, and max() / min() over all of them: values only, no index to
// follow. When several elements tie for the extremum the gradient is split evenly among
// them, as PyTorch's amax and max() do (evenly_distribute_backward): each gets grad / count.
// When the extremum is NaN, the NaN elements are the ones that tie.
struct ExtremumOverDims : Function<ExtremumOverDims> {
  struct State {
    Shape input_sizes;
    Shape dims;  // the reduced dims, wrapped and ascending
  };
  static Tensor forward(Context& ctx, const Tensor& x, const Shape& dims, bool keepdim, Extremum kind,
                        const char* op) {
    const std::vector<bool> reduced = reduced_dims_mask(op, dims, x.dim());
    Tensor values = extremum_kernel(op, x, reduced, keepdim, kind).values;
    auto& s = ctx.state<State>();
    s.input_sizes = x.sizes();
    s.dims = reduced_dims_list(reduced);
    ctx.save_for_backward({x, values});
    return values;
  }
  static tensor_list backward(Context& ctx, tensor_list grads) {
    const auto& s = ctx.state<State>();
    const tensor_list saved = ctx.saved_tensors();
    const Tensor& x = saved[0];
    const Tensor value = expand_reduced_grad(saved[1], s.input_sizes, s.dims);
    // x != x is NaN; where (not a branch on the value) keeps a GPU backward free of a sync.
    const Tensor is_extremum = where(ne(value, value), ne(x, x), eq(x, value));
    const Tensor share = is_extremum.to(grads[0].dtype());
    const Tensor count = sum(share, s.dims, /*keepdim=*/true);
    const Tensor grad = expand_reduced_grad(grads[0], s.input_sizes, s.dims);
    return {mul(share, div(grad, count)), Tensor(), Tensor(), Tensor(), Tensor()};
  }
};

// prod over the reduced dims. The gradient of element i is the product of the others; with
// zeros in the input that cannot be prod / x_i, so backward counts the zeros of each
// output's group (nz) and takes p, the product with every zero replaced by 1:
//   x_i != 0:  p / x_i                (nz = 0)     p / x_i * S            (nz = 1)   0 (nz >= 2)
//   x_i == 0:  p                      (nz = 1)     p * (S - x_i)          (nz = 2)   0 (nz >= 3)
// where S is the sum of the group's zero elements. S is 0, but it carries the derivative the
// product of the others has with respect to the other zero (x_z in "the others" of a
// non-zero x_i when nz = 1, the second zero when nz = 2), so the gradient of this gradient
// is right too: every piece is a public op, p a prod with no zeros left.
struct Prod : Function<Prod> {
  struct State {
    Shape input_sizes;
    Shape dims;
  };
  static Tensor forward(Context& ctx, const Tensor& x, const Shape& dims, bool keepdim) {
    const std::vector<bool> reduced = reduced_dims_mask("prod", dims, x.dim());
    auto& s = ctx.state<State>();
    s.input_sizes = x.sizes();
    s.dims = reduced_dims_list(reduced);
    ctx.save_for_backward({x});
    return prod_kernel("prod", x, reduced, keepdim);
  }
  static tensor_list backward(Context& ctx, tensor_list grads) {
    const auto& s = ctx.state<State>();
    const Tensor x = ctx.saved_tensors()[0];
    const TensorOptions options = x.options();
    const Tensor zero = zeros({}, options);
    const Tensor one = ones({}, options);
    const Tensor is_zero = eq(x, 0.0);
    const Tensor zeros_in_group = sum(is_zero, s.dims, /*keepdim=*/true);  // int64
    const Tensor without_zeros = where(is_zero, one, x);
    const Tensor p = Prod::apply(without_zeros, s.dims, /*keepdim=*/true);
    const Tensor sum_of_zeros = sum(where(is_zero, x, zero), s.dims, /*keepdim=*/true);
    const Tensor nonzero_factor =
        where(eq(zeros_in_group, 0.0), one, where(eq(zeros_in_group, 1.0), sum_of_zeros, zero));
    const Tensor zero_factor =
        where(eq(zeros_in_group, 1.0), one, where(eq(zeros_in_group, 2.0), sub(sum_of_zeros, x), zero));
    const Tensor others = where(is_zero, mul(p, zero_factor), mul(div(p, without_zeros), nonzero_factor));
    return {mul(expand_reduced_grad(grads[0], s.input_sizes, s.dims), others), Tensor(), Tensor()};
  }
};

// cumsum along `dim`, from the end when `reverse`. Each output is the sum of the inputs up
// to it, so an input's gradient is the sum of the output gradients from it on: the same
// running sum, run from the other end.
struct Cumsum : Function<Cumsum> {
  struct State {
    int64_t dim = 0;
    bool reverse = false;
  };
  static Tensor forward(Context& ctx, const Tensor& x, int64_t dim, bool reverse) {
    auto& s = ctx.state<State>();
    s.dim = dim;
    s.reverse = reverse;
    return cumsum_kernel(x, dim, reverse);
  }
  static tensor_list backward(Context& ctx, tensor_list grads) {
    const auto& s = ctx.state<State>();
    return {Cumsum::apply(grads[0], s.dim, !s.reverse), Tensor(), Tensor()};
  }
};

// The p-norm for p other than 0, 1 and +-inf (those are composites: a count, sum(abs),
// amax / amin of abs). The gradient is PyTorch's:
//   p = 2:   x * grad / norm
//   else:    sign(x) |x|^(p-1) * grad / norm^(p-1)
// and 0 where the norm is 0 (x is all zeros there) instead of 0 * inf = NaN. The masked
// quantities divide by a safe 1 (and take |x|^(p-1) of a safe 1) where they are masked,
// so no NaN or inf reaches where's backward either: the gradient of this gradient stays
// finite. The saved norm is this node's output, so backward differentiates through it.
struct PNorm : Function<PNorm> {
  struct State {
    Shape input_sizes;
    Shape dims;
    double p = 2.0;
  };
  static Tensor forward(Context& ctx, const Tensor& x, const Shape& dims, bool keepdim, double p) {
    const std::vector<bool> reduced = reduced_dims_mask("norm", dims, x.dim());
    auto& s = ctx.state<State>();
    s.input_sizes = x.sizes();
    s.dims = reduced_dims_list(reduced);
    s.p = p;
    const Tensor out = p == 2.0 ? sqrt(sum(mul(x, x), s.dims, keepdim))
                                : pow(sum(pow(abs(x), p), s.dims, keepdim), 1.0 / p);
    ctx.save_for_backward({x, out});
    return out;
  }
  static tensor_list backward(Context& ctx, tensor_list grads) {
    const auto& s = ctx.state<State>();
    const tensor_list saved = ctx.saved_tensors();
    const Tensor& x = saved[0];
    std::vector<bool> reduced(s.input_sizes.size(), false);
    for (int64_t d : s.dims) reduced[static_cast<size_t>(d)] = true;
    const Shape kept = reduced_sizes(s.input_sizes, reduced, /*keepdim=*/true);
    const Tensor norm = saved[1].reshape(kept);
    const Tensor grad = grads[0].reshape(kept);
    const TensorOptions options = x.options();
    const Tensor zero = zeros({}, options);
    const Tensor one = ones({}, options);
    const Tensor norm_is_zero = eq(norm, 0.0);
    const Tensor safe_norm = where(norm_is_zero, one, norm);
    if (s.p == 2.0) return {mul(x, where(norm_is_zero, zero, div(grad, safe_norm))), Tensor(), Tensor(), Tensor()};
    const Tensor scale = where(norm_is_zero, zero, div(grad, pow(safe_norm, s.p - 1.0)));
    const Tensor x_is_zero = eq(x, 0.0);
    const Tensor sign = sub(gt(x, 0.0).to(x.dtype()), lt(x, 0.0).to(x.dtype()));
    const Tensor scaled = where(x_is_zero, zero, mul(sign, pow(where(x_is_zero, one, abs(x)), s.p - 1.0)));
    return {mul(scaled, scale), Tensor(), Tensor(), Tensor()};
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
  return ExtremumOverDims::apply(x, Shape{}, false, Extremum::Max, "max");
}

namespace {
// A 0-d tensor is its own extremum along its one (implicit) dim.
std::tuple<Tensor, Tensor> extremum_along_dim(const char* op, const Tensor& x, int64_t dim, bool keepdim,
                                              Extremum kind) {
  check_defined(op, "self", x);
  const int64_t wrapped = wrap_dim(dim, x.dim(), op);
  const tensor_list out = x.dim() == 0 ? ExtremumAlongDim::apply(x.reshape({1}), 0, false, kind)
                                       : ExtremumAlongDim::apply(x, wrapped, keepdim, kind);
  return {out[0], out[1]};
}

}  // namespace

std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
  return extremum_along_dim("max", x, dim, keepdim, Extremum::Max);
}

namespace {
Tensor arg_extremum(const char* op, const Tensor& x, int64_t dim, bool keepdim, Extremum kind) {
  check_defined(op, "self", x);
  const int64_t wrapped = wrap_dim(dim, x.dim(), op);
  if (x.dim() == 0) return extremum_kernel(op, x.reshape({1}), {true}, false, kind).indices;
  return extremum_kernel(op, x, one_dim_mask(x, wrapped), keepdim, kind).indices;
}

}  // namespace

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  return arg_extremum("argmax", x, dim, keepdim, Extremum::Max);
}

// ---- more reductions ----

Tensor min(const Tensor& x) {
  check_defined("min", "self", x);
  MG_CHECK(x.numel() > 0, "min: the input 'self' is empty (shape {}): the minimum of no elements is undefined",
           shape_str(x.sizes()));
  return ExtremumOverDims::apply(x, Shape{}, false, Extremum::Min, "min");
}

std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) {
  return extremum_along_dim("min", x, dim, keepdim, Extremum::Min);
}

Tensor argmin(const Tensor& x, int64_t dim, bool keepdim) {
  return arg_extremum("argmin", x, dim, keepdim, Extremum::Min);
}

Tensor amax(const Tensor& x, const Shape& dims, bool keepdim) {
  check_defined("amax", "self", x);
  return ExtremumOverDims::apply(x, dims, keepdim, Extremum::Max, "amax");
}

Tensor amin(const Tensor& x, const Shape& dims, bool keepdim) {
  check_defined("amin", "self", x);
  return ExtremumOverDims::apply(x, dims, keepdim, Extremum::Min, "amin");
}

// m + log(sum(exp(x - m))), m the maximum (detached: the result does not depend on it, so
// neither does its gradient, softmax(x)). An infinite m is replaced by 0, as PyTorch does:
// a row of -inf then sums exp(-inf) = 0 and gives log(0) = -inf, not -inf - -inf = NaN, and
// a row holding +inf gives +inf. No elements: log(0) = -inf.
Tensor logsumexp(const Tensor& x, const Shape& dims, bool keepdim) {
  check_defined("logsumexp", "self", x);
  check_floating("logsumexp", "self", x);
  const std::vector<bool> reduced = reduced_dims_mask("logsumexp", dims, x.dim());
  const Shape kept = reduced_sizes(x.sizes(), reduced, /*keepdim=*/true);
  const TensorOptions options = x.options();
  Tensor shift = zeros(kept, options);
  if (x.numel() > 0) {
    const Tensor m = amax(x.detach(), dims, /*keepdim=*/true);
    shift = where(eq(abs(m), std::numeric_limits<double>::infinity()), zeros({}, options), m);
  }
  const Tensor out = add(log(sum(exp(sub(x, shift)), dims, /*keepdim=*/true)), shift);
  return keepdim ? out : out.reshape(reduced_sizes(x.sizes(), reduced, /*keepdim=*/false));
}

Tensor prod(const Tensor& x) {
  check_defined("prod", "self", x);
  return Prod::apply(x, Shape{}, false);
}

Tensor prod(const Tensor& x, int64_t dim, bool keepdim) {
  check_defined("prod", "self", x);
  return Prod::apply(x, Shape{dim}, keepdim);
}

namespace {
// The two-pass form: the mean first, then the squared deviations from it, which stays
// accurate where sum(x^2) - N mean^2 would cancel. Differentiable through mean and sum.
Tensor var_impl(const char* op, const Tensor& x, const Shape& dims, double correction, bool keepdim) {
  check_defined(op, "self", x);
  check_floating(op, "self", x);
  const std::vector<bool> reduced = reduced_dims_mask(op, dims, x.dim());
  const double count = static_cast<double>(reduced_count(x.sizes(), reduced));
  const Tensor deviation = sub(x, mean(x, dims, /*keepdim=*/true));
  return div(sum(mul(deviation, deviation), dims, keepdim), std::max(0.0, count - correction));
}

}  // namespace

Tensor var(const Tensor& x) { return var_impl("var", x, {}, 1.0, false); }

Tensor var(const Tensor& x, const Shape& dims, double correction, bool keepdim) {
  return var_impl("var", x, dims, correction, keepdim);
}

Tensor std(const Tensor& x) { return sqrt(var_impl("std", x, {}, 1.0, false)); }

Tensor std(const Tensor& x, const Shape& dims, double correction, bool keepdim) {
  return sqrt(var_impl("std", x, dims, correction, keepdim));
}

Tensor norm(const Tensor& x, double p, const Shape& dims, bool keepdim) {
  check_defined("norm", "self", x);
  check_floating("norm", "self", x);
  MG_CHECK(!std::isnan(p), "norm: the order p is NaN");
  if (p == 0.0) return sum(ne(x, 0.0), dims, keepdim).to(x.dtype());
  if (p == 1.0) return sum(abs(x), dims, keepdim);
  if (std::isinf(p)) {
    const Tensor magnitudes = abs(x);
    return p > 0 ? ExtremumOverDims::apply(magnitudes, dims, keepdim, Extremum::Max, "norm")
                 : ExtremumOverDims::apply(magnitudes, dims, keepdim, Extremum::Min, "norm");
  }
  return PNorm::apply(x, dims, keepdim, p);
}

Tensor cumsum(const Tensor& x, int64_t dim) {
  check_defined("cumsum", "self", x);
  const int64_t wrapped = wrap_dim(dim, x.dim(), "cumsum");
  return Cumsum::apply(x, x.dim() == 0 ? int64_t{0} : wrapped, false);
}

// Composites of a comparison and a sum: exact, and bool out.
Tensor any(const Tensor& x) {
  check_defined("any", "self", x);
  return gt(sum(ne(x, 0.0)), 0.0);
}

Tensor any(const Tensor& x, int64_t dim, bool keepdim) {
  check_defined("any", "self", x);
  return gt(sum(ne(x, 0.0), {dim}, keepdim), 0.0);
}

Tensor all(const Tensor& x) {
  check_defined("all", "self", x);
  return eq(sum(eq(x, 0.0)), 0.0);
}

Tensor all(const Tensor& x, int64_t dim, bool keepdim) {
  check_defined("all", "self", x);
  return eq(sum(eq(x, 0.0), {dim}, keepdim), 0.0);
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
std::tuple<Tensor, Tensor> Tensor::max(int64_t dim, bool keepdim) const { return minigrad::max(*this, dim, keepdim); }
Tensor Tensor::argmax(int64_t dim, bool keepdim) const { return minigrad::argmax(*this, dim, keepdim); }
Tensor Tensor::min() const { return minigrad::min(*this); }
std::tuple<Tensor, Tensor> Tensor::min(int64_t dim, bool keepdim) const { return minigrad::min(*this, dim, keepdim); }
Tensor Tensor::argmin(int64_t dim, bool keepdim) const { return minigrad::argmin(*this, dim, keepdim); }
Tensor Tensor::amax(const Shape& dims, bool keepdim) const { return minigrad::amax(*this, dims, keepdim); }
Tensor Tensor::amin(const Shape& dims, bool keepdim) const { return minigrad::amin(*this, dims, keepdim); }
Tensor Tensor::logsumexp(const Shape& dims, bool keepdim) const { return minigrad::logsumexp(*this, dims, keepdim); }
Tensor Tensor::prod() const { return minigrad::prod(*this); }
Tensor Tensor::prod(int64_t dim, bool keepdim) const { return minigrad::prod(*this, dim, keepdim); }
Tensor Tensor::var() const { return minigrad::var(*this); }
Tensor Tensor::var(const Shape& dims, double correction, bool keepdim) const {
  return minigrad::var(*this, dims, correction, keepdim);
}
Tensor Tensor::std() const { return minigrad::std(*this); }
Tensor Tensor::std(const Shape& dims, double correction, bool keepdim) const {
  return minigrad::std(*this, dims, correction, keepdim);
}
Tensor Tensor::norm(double p, const Shape& dims, bool keepdim) const { return minigrad::norm(*this, p, dims, keepdim); }
Tensor Tensor::cumsum(int64_t dim) const { return minigrad::cumsum(*this, dim); }
Tensor Tensor::any() const { return minigrad::any(*this); }
Tensor Tensor::any(int64_t dim, bool keepdim) const { return minigrad::any(*this, dim, keepdim); }
Tensor Tensor::all() const { return minigrad::all(*this); }
Tensor Tensor::all(int64_t dim, bool keepdim) const { return minigrad::all(*this, dim, keepdim); }

}  // namespace minigrad
