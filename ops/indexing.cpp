// Indexing: gather and the scatters, index_select and index_add (a gather and a scatter_add
// with the index expanded along the other dims), embedding, one_hot, topk and multinomial.
//
// Three Functions on two kernels (a gather, a scatter) carry the differentiable ops, each
// backward built from the others:
//   Gather      out[p] = x[p with coordinate index[p] along dim]   backward: ScatterAdd into zeros
//   ScatterAdd  out = x, out[... index[p] ...] += src[p]            backward: grad, and Gather of grad
//   Scatter     out = x, out[... index[p] ...]  = src[p]            backward: Scatter of 0s, Gather of grad
// so gather, scatter, scatter_add, index_select, index_add, embedding and topk (its values
// are a gather at the indices it found) are all twice differentiable. The scatters add (or
// overwrite) in the row-major order of the index, on the GPU too (cuda/indexing.cu), so the
// gradients of gather, index_select and embedding are deterministic and the same bits on
// both devices (kernels/indexing.h has the accumulator).
//
// The public functions check the arguments (dtypes, ranks, shapes, dims, and the index
// values against the sizes) and call the Functions, which trust them: a backward calling
// a Function again does not re-check, which on the GPU would cost a synchronization.
#include <algorithm>
#include <limits>
#include <numeric>
#include <type_traits>
#include <vector>

#include <minigrad/autograd/function.h>
#include <minigrad/core/generator.h>
#include <minigrad/core/parallel.h>
#include <minigrad/core/shape.h>
#include <minigrad/core/strided_loop.h>
#include <minigrad/cuda/indexing.h>
#include <minigrad/kernels/indexing.h>
#include <minigrad/ops/cpu_loops.h>
#include <minigrad/ops/ops.h>

namespace minigrad {
namespace {

// ---- argument checks ----

void check_index_dtype(const char* op, const char* arg, const Tensor& index) {
  check_defined(op, arg, index);
  MG_CHECK(index.dtype() == kInt64, "{}: expected an int64 tensor for argument '{}', got {}", op, arg,
           index.dtype());
}

// The smallest and largest value of a non-empty int64 tensor, on its device.
void index_min_max(const Tensor& index, int64_t& lo, int64_t& hi) {
  if (index.device().is_cuda()) return cuda::index_min_max(index, lo, hi);
  lo = std::numeric_limits<int64_t>::max();
  hi = std::numeric_limits<int64_t>::min();
  const int64_t* p = index.data_ptr<int64_t>();
  for_each_offset<1>(index.sizes(), {index.strides().data()}, [&](const std::array<int64_t, 1>& o) {
    lo = std::min(lo, p[o[0]]);
    hi = std::max(hi, p[o[0]]);
  });
}

// Every value of `index` in [0, size): else an error naming the op, an offending value (the
// smallest if it is negative, else the largest), the dim and its size.
void check_index_range(const char* op, const Tensor& index, int64_t dim, int64_t size) {
  if (index.numel() == 0) return;
  int64_t lo = 0, hi = 0;
  index_min_max(index, lo, hi);
  const int64_t bad = lo < 0 ? lo : hi;
  MG_CHECK(lo >= 0 && hi < size, "{}: index {} is out of range for dimension {} with size {}", op, bad, dim, size);
}

// gather's rule: index has x's rank and is no larger than x off dim.
void check_gather_shapes(const char* op, const Tensor& x, int64_t dim, const Tensor& index) {
  MG_CHECK(index.dim() == x.dim(), "{}: 'index' has {} dims but 'self' has {} (shapes {} and {})", op, index.dim(),
           x.dim(), shape_str(index.sizes()), shape_str(x.sizes()));
  for (int64_t d = 0; d < x.dim(); ++d)
    MG_CHECK(d == dim || index.size(d) <= x.size(d),
             "{}: 'index' (shape {}) is larger than 'self' (shape {}) at dimension {}, which is not dim {}", op,
             shape_str(index.sizes()), shape_str(x.sizes()), d, dim);
}

// scatter's rule: gather's, and index no larger than src anywhere.
void check_scatter_shapes(const char* op, const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  check_gather_shapes(op, x, dim, index);
  MG_CHECK(src.dim() == x.dim(), "{}: 'src' has {} dims but 'self' has {}", op, src.dim(), x.dim());
  for (int64_t d = 0; d < x.dim(); ++d)
    MG_CHECK(index.size(d) <= src.size(d), "{}: 'index' (shape {}) is larger than 'src' (shape {}) at dimension {}",
             op, shape_str(index.sizes()), shape_str(src.sizes()), d);
}

TensorOptions options_of(const Tensor& t) { return t.options(); }

// ---- the CPU loops ----

// out (index's shape, contiguous) = x at the index's positions along dim.
Tensor gather_kernel(const Tensor& x, int64_t dim, const Tensor& index) {
  Tensor out = empty(index.sizes(), options_of(x));
  if (x.device().is_cuda()) {
    cuda::gather(x, dim, index, out);
    return out;
  }
  check_cpu("gather", "self", x);
  Shape x_strides = x.strides();
  x_strides[static_cast<size_t>(dim)] = 0;  // the index supplies the coordinate along dim
  const int64_t step = x.stride(dim);
  const int64_t* pi = index.data_ptr<int64_t>();
  dispatch_all(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* po = static_cast<T*>(out.raw_data());
    const T* px = static_cast<const T*>(x.raw_data());
    for_each_offset<3>(index.sizes(), {out.strides().data(), index.strides().data(), x_strides.data()},
                       [&](const std::array<int64_t, 3>& o) { po[o[0]] = px[o[2] + pi[o[1]] * step]; });
  });
  return out;
}

// out (x's shape, contiguous) = x with src written or added at the index's positions, in
// the index's row-major order: the order of the CUDA kernel. float32, float64 and int64 add
// in place (int64 through uint64, which wraps); float16 and bfloat16 in a float per element
// of out, started from x and rounded once at the end, as the CUDA kernel does.
Tensor scatter_kernel(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src, bool accumulate) {
  Tensor out = empty(x.sizes(), options_of(x));
  if (x.device().is_cuda()) {
    cuda::scatter(x, dim, index, src, accumulate, out);
    return out;
  }
  check_cpu(accumulate ? "scatter_add" : "scatter", "self", x);
  copy_into(out, x);
  Shape out_strides = out.strides();
  out_strides[static_cast<size_t>(dim)] = 0;  // the index supplies the coordinate along dim
  const int64_t step = out.stride(dim);
  const int64_t* pi = index.data_ptr<int64_t>();
  const std::array<const int64_t*, 3> strides = {index.strides().data(), src.strides().data(), out_strides.data()};
  dispatch_all(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* po = static_cast<T*>(out.raw_data());
    const T* ps = static_cast<const T*>(src.raw_data());
    if (!accumulate) {
      for_each_offset<3>(index.sizes(), strides,
                         [&](const std::array<int64_t, 3>& o) { po[o[2] + pi[o[0]] * step] = ps[o[1]]; });
      return;
    }
    if constexpr (std::is_same_v<T, bool>) {
      MG_CHECK(false, "scatter_add: no kernel for bool");
    } else {
      using acc_t = typename indexing::ScatterAccumulator<T>::type;
      auto to_acc = [](T v) { return static_cast<acc_t>(static_cast<compute_t<T>>(v)); };
      auto from_acc = [](acc_t v) { return static_cast<T>(static_cast<compute_t<T>>(v)); };
      if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
        std::vector<acc_t> acc(static_cast<size_t>(out.numel()));
        for (size_t i = 0; i < acc.size(); ++i) acc[i] = to_acc(po[i]);
        for_each_offset<3>(index.sizes(), strides, [&](const std::array<int64_t, 3>& o) {
          acc[static_cast<size_t>(o[2] + pi[o[0]] * step)] += to_acc(ps[o[1]]);
        });
        for (size_t i = 0; i < acc.size(); ++i) po[i] = from_acc(acc[i]);
      } else {  // rounding each step in T is what the accumulator in T does
        for_each_offset<3>(index.sizes(), strides, [&](const std::array<int64_t, 3>& o) {
          T& slot = po[o[2] + pi[o[0]] * step];
          slot = from_acc(to_acc(slot) + to_acc(ps[o[1]]));
        });
      }
    }
  });
  return out;
}

// ---- the Functions ----

struct ScatterAdd;

struct Gather : Function<Gather> {
  struct State {
    Shape input_sizes;
    int64_t dim = 0;
  };
  static Tensor forward(Context& ctx, const Tensor& x, int64_t dim, const Tensor& index) {
    ctx.save_for_backward({index});
    ctx.state<State>() = {x.sizes(), dim};
    return gather_kernel(x, dim, index);
  }
  static tensor_list backward(Context& ctx, tensor_list grads);
};

struct ScatterAdd : Function<ScatterAdd> {
  struct State {
    int64_t dim = 0;
  };
  static Tensor forward(Context& ctx, const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
    ctx.save_for_backward({index});
    ctx.state<State>().dim = dim;
    return scatter_kernel(x, dim, index, src, /*accumulate=*/true);
  }
  static tensor_list backward(Context& ctx, tensor_list grads) {
    const Tensor index = ctx.saved_tensors()[0];
    const int64_t dim = ctx.state<State>().dim;
    const Tensor grad_src = ctx.needs_input_grad(3) ? Gather::apply(grads[0], dim, index) : Tensor();
    return {grads[0], Tensor(), Tensor(), grad_src};
  }
};

// The gradient of a gather: the incoming gradient added into zeros at the positions read.
tensor_list Gather::backward(Context& ctx, tensor_list grads) {
  const Tensor index = ctx.saved_tensors()[0];
  const State& s = ctx.state<State>();
  const Tensor zero = zeros(s.input_sizes, options_of(grads[0]));
  return {ScatterAdd::apply(zero, s.dim, index, grads[0]), Tensor(), Tensor()};
}

// src has index's shape here (the public function slices it): the gradient of the part of
// src that was not read is the slice's business. Where positions repeat, src's gradient is
// PyTorch's (the gradient gathered at every position, overwritten ones included): the
// derivative only when the positions are unique.
struct Scatter : Function<Scatter> {
  struct State {
    int64_t dim = 0;
  };
  static Tensor forward(Context& ctx, const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
    ctx.save_for_backward({index});
    ctx.state<State>().dim = dim;
    return scatter_kernel(x, dim, index, src, /*accumulate=*/false);
  }
  static tensor_list backward(Context& ctx, tensor_list grads) {
    const Tensor index = ctx.saved_tensors()[0];
    const int64_t dim = ctx.state<State>().dim;
    const Tensor& grad = grads[0];
    Tensor grad_x, grad_src;
    if (ctx.needs_input_grad(0)) {  // the overwritten elements of x had no effect
      const Tensor zero = zeros({}, options_of(grad)).expand(index.sizes());
      grad_x = Scatter::apply(grad, dim, index, zero);
    }
    if (ctx.needs_input_grad(3)) grad_src = Gather::apply(grad, dim, index);
    return {grad_x, Tensor(), Tensor(), grad_src};
  }
};

// The lookup is a gather of whole rows; the gradient adds each looked-up row's gradient into
// its weight row, except for the padding row's lookups, which are masked out first.
struct Embedding : Function<Embedding> {
  struct State {
    Shape weight_sizes;
    int64_t padding_idx = -1;  // wrapped; -1: none
  };
  static Tensor rows_index(const Tensor& flat, int64_t width) {
    return flat.view({flat.numel(), 1}).expand({flat.numel(), width});
  }
  static Tensor forward(Context& ctx, const Tensor& weight, const Tensor& indices, int64_t padding_idx) {
    ctx.save_for_backward({indices});
    ctx.state<State>() = {weight.sizes(), padding_idx};
    const Tensor flat = indices.reshape({-1});
    Shape out_sizes = indices.sizes();
    out_sizes.push_back(weight.size(1));
    return gather_kernel(weight, 0, rows_index(flat, weight.size(1))).view(out_sizes);
  }
  static tensor_list backward(Context& ctx, tensor_list grads) {
    const Tensor flat = ctx.saved_tensors()[0].reshape({-1});
    const State& s = ctx.state<State>();
    const int64_t width = s.weight_sizes[1];
    Tensor grad = grads[0].reshape({flat.numel(), width});
    if (s.padding_idx >= 0) {
      const Tensor keep = ne(flat, static_cast<double>(s.padding_idx)).view({flat.numel(), 1});
      grad = where(keep, grad, zeros({}, options_of(grad)));
    }
    const Tensor zero = zeros(s.weight_sizes, options_of(grad));
    return {ScatterAdd::apply(zero, 0, rows_index(flat, width), grad), Tensor(), Tensor()};
  }
};

// index (1-D or 0-d, n values) as a tensor of `sizes` that holds index[j] wherever the
// coordinate along dim is j: a view, stride 0 off dim.
Tensor expand_along(const Tensor& index, int64_t dim, const Shape& sizes) {
  Shape along(sizes.size(), 1);
  along[static_cast<size_t>(dim)] = index.numel();
  return index.reshape({-1}).view(along).expand(sizes);
}

// ---- topk's rows ----

// indices[r, 0..k) = the first k positions of row r of rows ([R, n], contiguous) in topk's order.
void topk_indices(const Tensor& rows, int64_t k, bool largest, const Tensor& indices) {
  if (rows.device().is_cuda()) return cuda::topk_indices(rows, k, largest, indices);
  check_cpu("topk", "self", rows);
  const int64_t row_count = rows.size(0), n = rows.size(1);
  int64_t* out = indices.data_ptr<int64_t>();
  dispatch_all(rows.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      MG_CHECK(false, "topk: no kernel for bool");
    } else {
      using K = compute_t<T>;
      const T* data = static_cast<const T*>(rows.raw_data());
      const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(n, 1));
      parallel_for(0, row_count, grain, [&](int64_t begin, int64_t end) {
        std::vector<int64_t> order(static_cast<size_t>(n));
        for (int64_t r = begin; r < end; ++r) {
          const T* row = data + r * n;
          std::iota(order.begin(), order.end(), int64_t{0});
          std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) {
            return indexing::topk_precedes(static_cast<K>(row[a]), a, static_cast<K>(row[b]), b, largest);
          });
          std::copy(order.begin(), order.begin() + k, out + r * k);
        }
      });
    }
  });
}

}  // namespace

// ---- the public functions ----

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  check_defined("gather", "self", x);
  check_index_dtype("gather", "index", index);
  check_same_device("gather", "self", x, "index", index);
  const int64_t d = wrap_dim(dim, x.dim(), "gather");
  if (x.dim() == 0) return gather(x.reshape({1}), 0, index.reshape({-1})).reshape(index.sizes());
  check_gather_shapes("gather", x, d, index);
  check_index_range("gather", index, d, x.size(d));
  return Gather::apply(x, d, index);
}

namespace {
// scatter and scatter_add, src a tensor: checked, and src sliced to index's shape.
Tensor scatter_with(const char* op, bool accumulate, const Tensor& x, int64_t dim, const Tensor& index,
                    const Tensor& src) {
  check_defined(op, "self", x);
  check_index_dtype(op, "index", index);
  check_defined(op, "src", src);
  check_same_dtype(op, "self", x, "src", src);
  check_same_device(op, "self", x, "index", index);
  check_same_device(op, "self", x, "src", src);
  MG_CHECK(!accumulate || x.dtype() != kBool, "{}: bool tensors cannot be added; convert them to int64", op);
  const int64_t d = wrap_dim(dim, x.dim(), op);
  if (x.dim() == 0) {
    const Tensor out = scatter_with(op, accumulate, x.reshape({1}), 0, index.reshape({-1}), src.reshape({-1}));
    return out.reshape({});
  }
  check_scatter_shapes(op, x, d, index, src);
  check_index_range(op, index, d, x.size(d));
  Tensor used = src;  // the part of src the index reaches
  for (int64_t k = 0; k < x.dim(); ++k)
    if (used.size(k) != index.size(k)) used = used.slice(k, 0, index.size(k));
  return accumulate ? ScatterAdd::apply(x, d, index, used) : Scatter::apply(x, d, index, used);
}
}  // namespace

Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  return scatter_with("scatter", false, x, dim, index, src);
}

Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  return scatter_with("scatter_add", true, x, dim, index, src);
}

Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, double value) {
  check_defined("scatter", "self", x);
  check_index_dtype("scatter", "index", index);
  // full() checks that an int64 or bool tensor can hold the value.
  const Tensor src = full({}, value, options_of(x)).expand(index.sizes());
  return scatter(x, dim, index, src);
}

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  check_defined("index_select", "self", x);
  check_index_dtype("index_select", "index", index);
  check_same_device("index_select", "self", x, "index", index);
  MG_CHECK(index.dim() <= 1, "index_select: 'index' must be 1-D or 0-d, got shape {}", shape_str(index.sizes()));
  const int64_t d = wrap_dim(dim, x.dim(), "index_select");
  if (x.dim() == 0) {
    MG_CHECK(index.numel() == 1, "index_select: a 0-d 'self' takes an index of one element, got {}", index.numel());
    return index_select(x.reshape({1}), 0, index).reshape({});
  }
  check_index_range("index_select", index, d, x.size(d));
  Shape out_sizes = x.sizes();
  out_sizes[static_cast<size_t>(d)] = index.numel();
  return Gather::apply(x, d, expand_along(index, d, out_sizes));
}

Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source, double alpha) {
  check_defined("index_add", "self", x);
  check_index_dtype("index_add", "index", index);
  check_defined("index_add", "source", source);
  check_same_dtype("index_add", "self", x, "source", source);
  check_same_device("index_add", "self", x, "index", index);
  check_same_device("index_add", "self", x, "source", source);
  MG_CHECK(x.dtype() != kBool, "index_add: bool tensors cannot be added; convert them to int64");
  MG_CHECK(index.dim() <= 1, "index_add: 'index' must be 1-D or 0-d, got shape {}", shape_str(index.sizes()));
  const int64_t d = wrap_dim(dim, x.dim(), "index_add");
  if (x.dim() == 0) return index_add(x.reshape({1}), 0, index, source.reshape({-1}), alpha).reshape({});
  Shape expected = x.sizes();
  expected[static_cast<size_t>(d)] = index.numel();
  MG_CHECK(source.sizes() == expected,
           "index_add: 'source' has shape {}, expected {} ('self' {} with dim {} the index's length {})",
           shape_str(source.sizes()), shape_str(expected), shape_str(x.sizes()), d, index.numel());
  check_index_range("index_add", index, d, x.size(d));
  const Tensor scaled = alpha == 1.0 ? source : mul(source, alpha);
  return ScatterAdd::apply(x, d, expand_along(index, d, expected), scaled);
}

Tensor embedding(const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx) {
  check_defined("embedding", "weight", weight);
  check_index_dtype("embedding", "indices", indices);
  check_same_device("embedding", "weight", weight, "indices", indices);
  MG_CHECK(weight.dim() == 2, "embedding: 'weight' must be 2-D ([num_embeddings, embedding_dim]), got shape {}",
           shape_str(weight.sizes()));
  const int64_t num = weight.size(0);
  int64_t padding = -1;
  if (padding_idx) {
    MG_CHECK(*padding_idx >= -num && *padding_idx < num,
             "embedding: padding_idx {} is out of range for {} embeddings", *padding_idx, num);
    padding = *padding_idx < 0 ? *padding_idx + num : *padding_idx;
  }
  check_index_range("embedding", indices, 0, num);
  return Embedding::apply(weight, indices, padding);
}

Tensor one_hot(const Tensor& indices, int64_t num_classes) {
  check_index_dtype("one_hot", "indices", indices);
  MG_CHECK(num_classes >= -1, "one_hot: num_classes must be -1 (inferred) or at least 0, got {}", num_classes);
  Shape out_sizes = indices.sizes();
  if (indices.numel() == 0) {
    MG_CHECK(num_classes != -1, "one_hot: cannot infer the number of classes from an empty tensor");
    out_sizes.push_back(num_classes);
    return zeros(out_sizes, TensorOptions(kInt64).device(indices.device()));
  }
  int64_t lo = 0, hi = 0;
  index_min_max(indices, lo, hi);
  MG_CHECK(lo >= 0, "one_hot: class values must be non-negative, got {}", lo);
  const int64_t classes = num_classes == -1 ? hi + 1 : num_classes;
  MG_CHECK(hi < classes, "one_hot: class value {} is out of range for num_classes {}", hi, classes);
  const Tensor positions = arange(classes, TensorOptions(kInt64).device(indices.device()));
  return eq(indices.unsqueeze(-1), positions).to(kInt64);
}

std::tuple<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted) {
  (void)sorted;  // the k elements always come in topk's order, which "unsorted" allows too
  check_defined("topk", "self", x);
  MG_CHECK(x.dtype() != kBool, "topk: expected a floating-point or int64 tensor, got bool");
  const int64_t d = wrap_dim(dim, x.dim(), "topk");
  if (x.dim() == 0) {
    auto [values, indices] = topk(x.reshape({1}), k, 0, largest, sorted);
    return k == 1 ? std::make_tuple(values.reshape({}), indices.reshape({})) : std::make_tuple(values, indices);
  }
  const int64_t n = x.size(d);
  MG_CHECK(k >= 0 && k <= n, "topk: k {} is out of range for dimension {} with size {}", k, d, n);
  // The rows along d, contiguous: [R, n].
  const Tensor moved = x.transpose(d, -1).contiguous();
  Shape moved_sizes = moved.sizes();
  int64_t row_count = 1;  // counted, not numel / n: n may be 0
  for (size_t i = 0; i + 1 < moved_sizes.size(); ++i) row_count *= moved_sizes[i];
  const Tensor rows = moved.reshape({row_count, n});
  const Tensor row_indices = empty({row_count, k}, TensorOptions(kInt64).device(x.device()));
  topk_indices(rows, k, largest, row_indices);
  moved_sizes.back() = k;
  const Tensor indices = row_indices.view(moved_sizes).transpose(d, -1).contiguous();
  // The values through Gather, so that their gradient (a scatter into zeros at the chosen
  // positions, unique along each row) is on the tape like any gather's.
  return {Gather::apply(x, d, indices), indices};
}

Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement, Generator* generator) {
  check_defined("multinomial", "probs", probs);
  check_floating("multinomial", "probs", probs);
  MG_CHECK(probs.dim() == 1 || probs.dim() == 2, "multinomial: 'probs' must be 1-D or 2-D, got shape {}",
           shape_str(probs.sizes()));
  MG_CHECK(num_samples > 0, "multinomial: num_samples must be positive, got {}", num_samples);
  const Tensor p = probs.dim() == 1 ? probs.unsqueeze(0) : probs;
  const int64_t row_count = p.size(0), n = p.size(1);
  MG_CHECK(n > 0, "multinomial: 'probs' has no categories (shape {})", shape_str(probs.sizes()));
  MG_CHECK(replacement || num_samples <= n,
           "multinomial: cannot draw {} samples without replacement from {} categories", num_samples, n);
  const Device device = p.device();

  // Each row's running sums, and whether it is a distribution.
  Tensor cdf = empty({row_count, n}, TensorOptions(kFloat64).device(device));
  Tensor status = empty({row_count, 2}, TensorOptions(kInt64).device(device));
  if (device.is_cuda()) {
    cuda::multinomial_scan(p, cdf, status);
  } else {
    check_cpu("multinomial", "probs", p);
    dispatch_floating(p.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* data = static_cast<const T*>(p.raw_data());
      double* c = cdf.data_ptr<double>();
      int64_t* st = status.data_ptr<int64_t>();
      for (int64_t r = 0; r < row_count; ++r) {
        const indexing::RowScan scan = indexing::scan_probabilities(data + r * p.stride(0), p.stride(1), n, c + r * n);
        st[2 * r] = static_cast<int64_t>(scan.status);
        st[2 * r + 1] = scan.nonzero;
      }
    });
  }
  const std::vector<int64_t> scans = status.to_vector<int64_t>();  // on the GPU: the one synchronization
  for (int64_t r = 0; r < row_count; ++r) {
    const auto row_status = static_cast<indexing::RowStatus>(scans[static_cast<size_t>(2 * r)]);
    const int64_t nonzero = scans[static_cast<size_t>(2 * r + 1)];
    MG_CHECK(row_status != indexing::RowStatus::Negative, "multinomial: row {} of 'probs' has a negative weight", r);
    MG_CHECK(row_status != indexing::RowStatus::Infinite, "multinomial: row {} of 'probs' has an infinite weight", r);
    MG_CHECK(row_status != indexing::RowStatus::NaN, "multinomial: row {} of 'probs' has a NaN weight", r);
    MG_CHECK(row_status != indexing::RowStatus::ZeroSum,
             "multinomial: the weights of row {} of 'probs' do not sum to a positive finite number", r);
    MG_CHECK(replacement || nonzero >= num_samples,
             "multinomial: cannot draw {} samples without replacement from row {} of 'probs', which has {} "
             "categories of positive weight",
             num_samples, r, nonzero);
  }

  // The checks passed: reserve the stream and draw.
  const Generator::Stream stream = (generator ? *generator : default_generator()).reserve();
  Tensor out = empty({row_count, num_samples}, TensorOptions(kInt64).device(device));
  if (replacement) {
    if (device.is_cuda()) {
      cuda::multinomial_with_replacement(cdf, stream.seed, stream.offset, out);
    } else {
      const double* c = cdf.data_ptr<double>();
      int64_t* o = out.data_ptr<int64_t>();
      for (int64_t t = 0; t < out.numel(); ++t) {
        const double u = random_values::uniform<double>(stream.seed, stream.offset, static_cast<uint64_t>(t));
        o[t] = indexing::pick_category(c + (t / num_samples) * n, n, u);
      }
    }
  } else {
    Tensor keys = empty({row_count, n}, TensorOptions(kFloat64).device(device));
    if (device.is_cuda()) {
      cuda::multinomial_race_keys(p, stream.seed, stream.offset, keys);
    } else {
      dispatch_floating(p.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const T* data = static_cast<const T*>(p.raw_data());
        double* k = keys.data_ptr<double>();
        for (int64_t r = 0; r < row_count; ++r)
          for (int64_t i = 0; i < n; ++i) {
            const double weight = static_cast<double>(static_cast<compute_t<T>>(data[r * p.stride(0) + i * p.stride(1)]));
            k[r * n + i] = indexing::race_key(weight, stream.seed, stream.offset, static_cast<uint64_t>(r * n + i));
          }
      });
    }
    topk_indices(keys, num_samples, /*largest=*/true, out);
  }
  return probs.dim() == 1 ? out.view({num_samples}) : out;
}

// ---- Tensor members ----
Tensor Tensor::index_select(int64_t dim, const Tensor& index) const { return minigrad::index_select(*this, dim, index); }
Tensor Tensor::index_add(int64_t dim, const Tensor& index, const Tensor& source, double alpha) const {
  return minigrad::index_add(*this, dim, index, source, alpha);
}
Tensor Tensor::gather(int64_t dim, const Tensor& index) const { return minigrad::gather(*this, dim, index); }
Tensor Tensor::scatter(int64_t dim, const Tensor& index, const Tensor& src) const {
  return minigrad::scatter(*this, dim, index, src);
}
Tensor Tensor::scatter(int64_t dim, const Tensor& index, double value) const {
  return minigrad::scatter(*this, dim, index, value);
}
Tensor Tensor::scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const {
  return minigrad::scatter_add(*this, dim, index, src);
}
std::tuple<Tensor, Tensor> Tensor::topk(int64_t k, int64_t dim, bool largest, bool sorted) const {
  return minigrad::topk(*this, k, dim, largest, sorted);
}
Tensor Tensor::multinomial(int64_t num_samples, bool replacement, Generator* generator) const {
  return minigrad::multinomial(*this, num_samples, replacement, generator);
}

}  // namespace minigrad
