// Views: tensors over their input's storage (sharing its version counter) that differ only
// in sizes, strides and offset. Each view is a Function whose forward is one as_strided call
// and whose backward maps the gradient back onto the input's shape with Functions again
// (reshape, transpose, permute, sum_to, and the SliceBackward/SelectBackward pair), so every
// view is twice differentiable. The public member functions check the arguments and
// compute the new geometry; the Functions only apply it.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include <minigrad/autograd/function.h>
#include <minigrad/core/shape.h>
#include <minigrad/ops/cpu_loops.h>
#include <minigrad/ops/ops.h>

namespace minigrad {
namespace {

// ---- geometry ----

// `shape` with its -1 (at most one) replaced by the size that makes `numel` elements.
Shape infer_size(const char* op, const Shape& shape, int64_t numel) {
  Shape sizes = shape;
  int64_t inferred_dim = -1;
  Shape known_sizes;  // every size but the -1
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == -1) {
      MG_CHECK(inferred_dim < 0, "{}: only one dimension can be inferred (-1) in the argument 'shape' {}", op,
               shape_str(shape));
      inferred_dim = static_cast<int64_t>(d);
    } else {
      MG_CHECK(shape[d] >= 0, "{}: invalid size {} at dimension {} of the argument 'shape' {}", op, shape[d], d,
               shape_str(shape));
      known_sizes.push_back(shape[d]);
    }
  }
  // Sizes whose product overflows int64 are an error here, before the product could wrap
  // around to a count that happens to match numel.
  const int64_t known_numel = checked_numel(known_sizes, op);
  if (inferred_dim >= 0) {
    MG_CHECK(known_numel != 0,
             "{}: cannot infer the -1 in the argument 'shape' {}: with the other sizes multiplying to 0, any "
             "size fits", op, shape_str(shape));
    MG_CHECK(numel % known_numel == 0, "{}: shape {} is invalid for an input of {} elements", op, shape_str(shape),
             numel);
    sizes[static_cast<size_t>(inferred_dim)] = numel / known_numel;
  } else {
    MG_CHECK(known_numel == numel, "{}: shape {} is invalid for an input of {} elements", op, shape_str(shape), numel);
  }
  return sizes;
}

// The strides that read a tensor of `sizes`/`strides` as `new_sizes` without copying, or
// nothing when there are none.
//
// The input's dims fall into chunks: runs of neighbouring dims laid out like one dim
// (stride[d] == stride[d + 1] * size[d + 1]). A view may split and merge dims inside a chunk,
// never across two: read from the right, the new dims must fill each chunk exactly, and
// inside a chunk they get the strides of a contiguous block starting at the chunk's
// innermost stride. Size-1 dims hold no elements and may sit anywhere.
std::optional<Shape> view_strides(const Shape& sizes, const Shape& strides, const Shape& new_sizes) {
  if (shape_numel(sizes) == 0) return contiguous_strides(new_sizes);  // no element to read: any strides do
  struct Chunk {
    int64_t numel;
    int64_t inner_stride;
  };
  std::vector<Chunk> chunks;  // innermost first
  for (size_t d = sizes.size(); d-- > 0;) {
    if (sizes[d] == 1) continue;
    if (!chunks.empty() && strides[d] == chunks.back().inner_stride * chunks.back().numel)
      chunks.back().numel *= sizes[d];
    else
      chunks.push_back({sizes[d], strides[d]});
  }

  Shape new_strides(new_sizes.size());
  size_t chunk = 0;
  int64_t filled = 1;  // elements of the current chunk the new dims placed so far cover
  for (size_t d = new_sizes.size(); d-- > 0;) {
    if (new_sizes[d] == 1) {
      // Any stride works; this one is what a contiguous layout would give.
      new_strides[d] = chunk < chunks.size() ? chunks[chunk].inner_stride * filled
                                             : (chunks.empty() ? 1 : chunks.back().inner_stride * chunks.back().numel);
      continue;
    }
    if (chunk == chunks.size()) return std::nullopt;
    new_strides[d] = chunks[chunk].inner_stride * filled;
    filled *= new_sizes[d];
    if (filled > chunks[chunk].numel) return std::nullopt;  // this dim would span two chunks
    if (filled == chunks[chunk].numel) {
      ++chunk;
      filled = 1;
    }
  }
  if (chunk != chunks.size()) return std::nullopt;
  return new_strides;
}

// ---- the Functions ----

// Views whose backward reshapes the gradient to the input's sizes: view, reshape (when it
// is a view), squeeze and unsqueeze. One template, so each still has its own name on the tape.
template <class Derived>
struct ReshapingView : Function<Derived> {
  struct State {
    Shape input_sizes;
  };
  static Tensor forward(Context& ctx, const Tensor& x, const Shape& sizes, const Shape& strides) {
    ctx.state<State>().input_sizes = x.sizes();
    return as_strided(x, sizes, strides, x.storage_offset());
  }
  static tensor_list backward(Context& ctx, tensor_list grads) {
    return {grads[0].reshape(ctx.state<State>().input_sizes), Tensor(), Tensor()};
  }
};
struct View : ReshapingView<View> {};
struct Squeeze : ReshapingView<Squeeze> {};
struct Unsqueeze : ReshapingView<Unsqueeze> {};

struct Transpose : Function<Transpose> {
  struct State {
    int64_t dim0 = 0, dim1 = 0;
  };
  // dim0 and dim1 are wrapped. Equal dims (always the case for a 0-d tensor, which has no
  // sizes to swap) give an alias of x, as in PyTorch.
  static Tensor forward(Context& ctx, const Tensor& x, int64_t dim0, int64_t dim1) {
    Shape sizes = x.sizes();
    Shape strides = x.strides();
    if (dim0 != dim1) {
      std::swap(sizes[static_cast<size_t>(dim0)], sizes[static_cast<size_t>(dim1)]);
      std::swap(strides[static_cast<size_t>(dim0)], strides[static_cast<size_t>(dim1)]);
    }
    ctx.state<State>() = {dim0, dim1};
    return as_strided(x, sizes, strides, x.storage_offset());
  }
  static tensor_list backward(Context& ctx, tensor_list grads) {
    const auto& s = ctx.state<State>();
    return {grads[0].transpose(s.dim0, s.dim1), Tensor(), Tensor()};
  }
};

struct Permute : Function<Permute> {
  struct State {
    Shape dims;
  };
  // dims is a permutation of x's dims, wrapped: output dim i is input dim dims[i].
  static Tensor forward(Context& ctx, const Tensor& x, const Shape& dims) {
    Shape sizes(dims.size());
    Shape strides(dims.size());
    for (size_t i = 0; i < dims.size(); ++i) {
      sizes[i] = x.size(dims[i]);
      strides[i] = x.stride(dims[i]);
    }
    ctx.state<State>().dims = dims;
    return as_strided(x, sizes, strides, x.storage_offset());
  }
  static tensor_list backward(Context& ctx, tensor_list grads) {
    const Shape& dims = ctx.state<State>().dims;
    Shape inverse(dims.size());
    for (size_t i = 0; i < dims.size(); ++i) inverse[static_cast<size_t>(dims[i])] = static_cast<int64_t>(i);
    return {grads[0].permute(inverse), Tensor()};
  }
};

struct Expand : Function<Expand> {
  struct State {
    Shape input_sizes;
  };
  static Tensor forward(Context& ctx, const Tensor& x, const Shape& sizes, const Shape& strides) {
    ctx.state<State>().input_sizes = x.sizes();
    return as_strided(x, sizes, strides, x.storage_offset());
  }
  static tensor_list backward(Context& ctx, tensor_list grads) {
    return {sum_to(grads[0], ctx.state<State>().input_sizes), Tensor(), Tensor()};
  }
};

// The gradients of slice and select: zeros of the input's shape, with the incoming
// gradient written into the part the view read. Writing into zeros is no op the tape
// knows, so each is a Function of its own; its backward is the view itself, taken of the
// incoming gradient (only the written part of the zeros depended on it), which makes slice
// and select twice differentiable.
struct SliceBackward : Function<SliceBackward> {
  struct State {
    int64_t dim = 0, start = 0, end = 0, step = 1;
  };
  // The slice arguments as Slice got them: normalized, so slicing with them again is exact.
  static Tensor forward(Context& ctx, const Tensor& grad, const Shape& input_sizes, int64_t dim, int64_t start,
                        int64_t end, int64_t step) {
    ctx.state<State>() = {dim, start, end, step};
    Tensor grad_input = zeros(input_sizes, grad.options());
    copy_into(grad_input.slice(dim, start, end, step), grad);
    return grad_input;
  }
  static tensor_list backward(Context& ctx, tensor_list grads) {
    const auto& s = ctx.state<State>();
    return {grads[0].slice(s.dim, s.start, s.end, s.step), Tensor(), Tensor(), Tensor(), Tensor(), Tensor()};
  }
};

struct SelectBackward : Function<SelectBackward> {
  struct State {
    int64_t dim = 0, index = 0;
  };
  static Tensor forward(Context& ctx, const Tensor& grad, const Shape& input_sizes, int64_t dim, int64_t index) {
    ctx.state<State>() = {dim, index};
    Tensor grad_input = zeros(input_sizes, grad.options());
    copy_into(grad_input.select(dim, index), grad);
    return grad_input;
  }
  static tensor_list backward(Context& ctx, tensor_list grads) {
    const auto& s = ctx.state<State>();
    return {grads[0].select(s.dim, s.index), Tensor(), Tensor(), Tensor()};
  }
};

// Elements a slice of `start`, `end`, `step` (0 <= start <= end, step >= 1) reads. Written
// so that nothing overflows: (end - start + step - 1) / step does for a step near INT64_MAX.
int64_t slice_length(int64_t start, int64_t end, int64_t step) {
  return start == end ? 0 : (end - start - 1) / step + 1;
}

struct Slice : Function<Slice> {
  struct State {
    Shape input_sizes;
    int64_t dim = 0, start = 0, end = 0, step = 1;
  };
  // dim is wrapped, 0 <= start <= end <= size, step >= 1.
  static Tensor forward(Context& ctx, const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
    Shape sizes = x.sizes();
    Shape strides = x.strides();
    const size_t d = static_cast<size_t>(dim);
    sizes[d] = slice_length(start, end, step);
    // With two elements or more, step < size and stride * step stays inside the storage's
    // range; with fewer the stride is never stepped over, and stride * step could overflow.
    if (sizes[d] > 1) strides[d] = x.stride(dim) * step;
    ctx.state<State>() = {x.sizes(), dim, start, end, step};
    return as_strided(x, sizes, strides, x.storage_offset() + start * x.stride(dim));
  }
  static tensor_list backward(Context& ctx, tensor_list grads) {
    const auto& s = ctx.state<State>();
    return {SliceBackward::apply(grads[0], s.input_sizes, s.dim, s.start, s.end, s.step), Tensor(), Tensor(),
            Tensor(), Tensor()};
  }
};

struct Select : Function<Select> {
  struct State {
    Shape input_sizes;
    int64_t dim = 0, index = 0;
  };
  // dim is wrapped, 0 <= index < size.
  static Tensor forward(Context& ctx, const Tensor& x, int64_t dim, int64_t index) {
    Shape sizes = x.sizes();
    Shape strides = x.strides();
    sizes.erase(sizes.begin() + dim);
    strides.erase(strides.begin() + dim);
    ctx.state<State>() = {x.sizes(), dim, index};
    return as_strided(x, sizes, strides, x.storage_offset() + index * x.stride(dim));
  }
  static tensor_list backward(Context& ctx, tensor_list grads) {
    const auto& s = ctx.state<State>();
    return {SelectBackward::apply(grads[0], s.input_sizes, s.dim, s.index), Tensor(), Tensor()};
  }
};

}  // namespace

// ---- Tensor members ----

Tensor Tensor::view(const Shape& shape) const {
  check_defined("view", "self", *this);
  const Shape new_sizes = infer_size("view", shape, numel());
  const std::optional<Shape> new_strides = view_strides(sizes(), strides(), new_sizes);
  MG_CHECK(new_strides.has_value(),
           "view: size {} is not compatible with the input's strides (input 'self' has sizes {} and strides {}); use "
           "reshape()",
           shape_str(new_sizes), shape_str(sizes()), shape_str(strides()));
  return View::apply(*this, new_sizes, *new_strides);
}

Tensor Tensor::reshape(const Shape& shape) const {
  check_defined("reshape", "self", *this);
  const Shape new_sizes = infer_size("reshape", shape, numel());
  const std::optional<Shape> new_strides = view_strides(sizes(), strides(), new_sizes);
  if (new_strides) return View::apply(*this, new_sizes, *new_strides);
  return contiguous().view(new_sizes);
}

Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const {
  check_defined("transpose", "self", *this);
  return Transpose::apply(*this, wrap_dim(dim0, dim(), "transpose"), wrap_dim(dim1, dim(), "transpose"));
}

Tensor Tensor::t() const {
  check_defined("t", "self", *this);
  MG_CHECK(dim() <= 2, "t: expects 'self' to have at most 2 dimensions, got {}-D; use transpose(dim0, dim1)", dim());
  if (dim() == 2) return transpose(0, 1);
  Shape identity(static_cast<size_t>(dim()));  // 0-D and 1-D: t() is the identity view
  for (size_t d = 0; d < identity.size(); ++d) identity[d] = static_cast<int64_t>(d);
  return permute(identity);
}

Tensor Tensor::permute(const Shape& dims) const {
  check_defined("permute", "self", *this);
  MG_CHECK(static_cast<int64_t>(dims.size()) == dim(),
           "permute: the argument 'dims' {} has {} entries, but 'self' has {} dimensions", shape_str(dims), dims.size(),
           dim());
  Shape wrapped(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    wrapped[i] = wrap_dim(dims[i], dim(), "permute");
    MG_CHECK(!seen[static_cast<size_t>(wrapped[i])], "permute: dim {} appears more than once in the argument 'dims' {}",
             wrapped[i], shape_str(dims));
    seen[static_cast<size_t>(wrapped[i])] = true;
  }
  return Permute::apply(*this, wrapped);
}

Tensor Tensor::slice(int64_t dim, int64_t start, int64_t end, int64_t step) const {
  check_defined("slice", "self", *this);
  MG_CHECK(this->dim() > 0, "slice: cannot be applied to a 0-d tensor 'self': it has no dimension to slice");
  const int64_t d = wrap_dim(dim, this->dim(), "slice");
  MG_CHECK(step >= 1, "slice: the argument 'step' must be positive, got {}", step);
  // Negative bounds count from the end; out-of-range bounds clamp, as in Python slicing.
  const int64_t size = this->size(d);
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = std::clamp<int64_t>(start, 0, size);
  end = std::clamp<int64_t>(end, start, size);
  return Slice::apply(*this, d, start, end, step);
}

Tensor Tensor::select(int64_t dim, int64_t index) const {
  check_defined("select", "self", *this);
  MG_CHECK(this->dim() > 0, "select: cannot be applied to a 0-d tensor 'self': it has no dimension to select from");
  const int64_t d = wrap_dim(dim, this->dim(), "select");
  const int64_t size = this->size(d);
  MG_CHECK(index >= -size && index < size, "select: index {} is out of range for dimension {} with size {}", index, d,
           size);
  return Select::apply(*this, d, index < 0 ? index + size : index);
}

Tensor Tensor::expand(const Shape& sizes) const {
  check_defined("expand", "self", *this);
  const int64_t ndim = dim();
  const int64_t new_ndim = static_cast<int64_t>(sizes.size());
  MG_CHECK(new_ndim >= ndim,
           "expand: the argument 'sizes' {} has {} dimensions, fewer than the {} of 'self' (shape {})",
           shape_str(sizes), new_ndim, ndim, shape_str(this->sizes()));
  const int64_t leading = new_ndim - ndim;
  Shape new_sizes(sizes.size());
  Shape new_strides(sizes.size());
  for (int64_t d = 0; d < new_ndim; ++d) {
    const size_t i = static_cast<size_t>(d);
    if (d < leading) {  // a new leading dim: every index reads the same data
      MG_CHECK(sizes[i] >= 0, "expand: size {} is not allowed for the new leading dimension {} of 'sizes' {}",
               sizes[i], d, shape_str(sizes));
      new_sizes[i] = sizes[i];
      new_strides[i] = 0;
      continue;
    }
    const int64_t old_size = size(d - leading);
    const int64_t target = sizes[i] == -1 ? old_size : sizes[i];
    MG_CHECK(target >= 0, "expand: invalid size {} at dimension {} of 'sizes' {}", sizes[i], d, shape_str(sizes));
    MG_CHECK(target == old_size || old_size == 1,
             "expand: the expanded size {} must match the existing size {} at non-singleton dimension {}; 'sizes' "
             "{}, 'self' has shape {}",
             target, old_size, d, shape_str(sizes), shape_str(this->sizes()));
    new_sizes[i] = target;
    new_strides[i] = target == old_size ? stride(d - leading) : 0;
  }
  checked_numel(new_sizes, "expand");  // a view of more elements than int64 counts is refused
  return Expand::apply(*this, new_sizes, new_strides);
}

Tensor Tensor::squeeze() const {
  check_defined("squeeze", "self", *this);
  Shape new_sizes;
  Shape new_strides;
  for (int64_t d = 0; d < dim(); ++d) {
    if (size(d) == 1) continue;
    new_sizes.push_back(size(d));
    new_strides.push_back(stride(d));
  }
  return Squeeze::apply(*this, new_sizes, new_strides);
}

Tensor Tensor::squeeze(int64_t dim) const {
  check_defined("squeeze", "self", *this);
  const int64_t d = wrap_dim(dim, this->dim(), "squeeze");
  Shape new_sizes = sizes();
  Shape new_strides = strides();
  // Only a size-1 dim goes away; squeezing any other dim is a no-op view, as in PyTorch.
  if (this->dim() > 0 && size(d) == 1) {
    new_sizes.erase(new_sizes.begin() + d);
    new_strides.erase(new_strides.begin() + d);
  }
  return Squeeze::apply(*this, new_sizes, new_strides);
}

Tensor Tensor::unsqueeze(int64_t dim) const {
  check_defined("unsqueeze", "self", *this);
  const int64_t d = wrap_dim(dim, this->dim() + 1, "unsqueeze");
  Shape new_sizes = sizes();
  Shape new_strides = strides();
  // The stride a contiguous layout would give the new dim; any value would do for size 1.
  const int64_t new_stride = d < this->dim() ? size(d) * stride(d) : 1;
  new_sizes.insert(new_sizes.begin() + d, 1);
  new_strides.insert(new_strides.begin() + d, new_stride);
  return Unsqueeze::apply(*this, new_sizes, new_strides);
}

// ---- more views ----
// Each is one of the views above with new geometry: slice, view, expand, permute, transpose.

Tensor Tensor::narrow(int64_t dim, int64_t start, int64_t length) const {
  check_defined("narrow", "self", *this);
  MG_CHECK(this->dim() > 0, "narrow: cannot be applied to a 0-d tensor 'self': it has no dimension to narrow");
  const int64_t d = wrap_dim(dim, this->dim(), "narrow");
  const int64_t size = this->size(d);
  MG_CHECK(start >= -size && start <= size, "narrow: start {} is out of range for dimension {} with size {}", start,
           d, size);
  if (start < 0) start += size;
  MG_CHECK(length >= 0, "narrow: length must be non-negative, got {}", length);
  MG_CHECK(length <= size - start, "narrow: start ({}) + length ({}) exceeds the size {} of dimension {}", start,
           length, size, d);
  return Slice::apply(*this, d, start, start + length, int64_t{1});
}

// A 0-d tensor flattens to one element of 1-D, as in PyTorch; start_dim == end_dim gives
// the tensor itself.
Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  check_defined("flatten", "self", *this);
  if (dim() == 0) return reshape({1});
  const int64_t start = wrap_dim(start_dim, dim(), "flatten");
  const int64_t end = wrap_dim(end_dim, dim(), "flatten");
  MG_CHECK(start <= end, "flatten: start_dim ({}) cannot come after end_dim ({}) for a tensor of {} dimensions",
           start, end, dim());
  if (start == end) return *this;
  Shape new_sizes(sizes().begin(), sizes().begin() + start);
  int64_t merged = 1;
  for (int64_t d = start; d <= end; ++d) merged *= size(d);
  new_sizes.push_back(merged);
  new_sizes.insert(new_sizes.end(), sizes().begin() + end + 1, sizes().end());
  return reshape(new_sizes);
}

// Splitting one dim into several is always a view: the new dims step through the old one.
Tensor Tensor::unflatten(int64_t dim, const Shape& sizes) const {
  check_defined("unflatten", "self", *this);
  MG_CHECK(this->dim() > 0, "unflatten: cannot be applied to a 0-d tensor 'self': it has no dimension to split");
  const int64_t d = wrap_dim(dim, this->dim(), "unflatten");
  MG_CHECK(!sizes.empty(), "unflatten: the argument 'sizes' must be non-empty");
  const Shape inner = infer_size("unflatten", sizes, size(d));
  Shape new_sizes(this->sizes().begin(), this->sizes().begin() + d);
  new_sizes.insert(new_sizes.end(), inner.begin(), inner.end());
  new_sizes.insert(new_sizes.end(), this->sizes().begin() + d + 1, this->sizes().end());
  return view(new_sizes);
}

Tensor Tensor::view_as(const Tensor& other) const {
  check_defined("view_as", "other", other);
  return view(other.sizes());
}

Tensor Tensor::reshape_as(const Tensor& other) const {
  check_defined("reshape_as", "other", other);
  return reshape(other.sizes());
}

Tensor Tensor::expand_as(const Tensor& other) const {
  check_defined("expand_as", "other", other);
  return expand(other.sizes());
}

Tensor Tensor::movedim(int64_t source, int64_t destination) const {
  return movedim(Shape{source}, Shape{destination});
}

// Dim source[i] goes to position destination[i]; the other dims keep their order in the
// positions left over.
Tensor Tensor::movedim(const Shape& source, const Shape& destination) const {
  check_defined("movedim", "self", *this);
  MG_CHECK(source.size() == destination.size(),
           "movedim: 'source' {} and 'destination' {} must have the same number of dims", shape_str(source),
           shape_str(destination));
  if (dim() == 0) {  // dims 0 and -1 name a 0-d tensor's only "dim": nothing moves
    for (size_t i = 0; i < source.size(); ++i) {
      wrap_dim(source[i], 0, "movedim");
      wrap_dim(destination[i], 0, "movedim");
    }
    return permute({});
  }
  const size_t ndim = static_cast<size_t>(dim());
  Shape order(ndim, -1);                // order[position] = the input dim placed there
  std::vector<bool> moved(ndim, false);  // input dims named in source
  for (size_t i = 0; i < source.size(); ++i) {
    const int64_t src = wrap_dim(source[i], dim(), "movedim");
    const int64_t dst = wrap_dim(destination[i], dim(), "movedim");
    MG_CHECK(!moved[static_cast<size_t>(src)], "movedim: repeated dim {} in 'source' {}", src, shape_str(source));
    MG_CHECK(order[static_cast<size_t>(dst)] < 0, "movedim: repeated dim {} in 'destination' {}", dst,
             shape_str(destination));
    moved[static_cast<size_t>(src)] = true;
    order[static_cast<size_t>(dst)] = src;
  }
  size_t next = 0;  // the next input dim not named in source
  for (size_t position = 0; position < ndim; ++position) {
    if (order[position] >= 0) continue;
    while (moved[next]) ++next;
    order[position] = static_cast<int64_t>(next++);
  }
  return permute(order);
}

Tensor Tensor::swapaxes(int64_t dim0, int64_t dim1) const {
  check_defined("swapaxes", "self", *this);
  return transpose(wrap_dim(dim0, dim(), "swapaxes"), wrap_dim(dim1, dim(), "swapaxes"));
}

Tensor Tensor::swapdims(int64_t dim0, int64_t dim1) const {
  check_defined("swapdims", "self", *this);
  return transpose(wrap_dim(dim0, dim(), "swapdims"), wrap_dim(dim1, dim(), "swapdims"));
}

Tensor Tensor::mT() const {
  check_defined("mT", "self", *this);
  MG_CHECK(dim() >= 2, "mT: expects 'self' to have at least 2 dimensions, got {}-D", dim());
  return transpose(-2, -1);
}

// The free forms (ops/ops.h).
Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  check_defined("flatten", "self", x);
  return x.flatten(start_dim, end_dim);
}
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) { return x.narrow(dim, start, length); }
Tensor movedim(const Tensor& x, int64_t source, int64_t destination) { return x.movedim(source, destination); }
Tensor movedim(const Tensor& x, const Shape& source, const Shape& destination) {
  return x.movedim(source, destination);
}
Tensor swapaxes(const Tensor& x, int64_t dim0, int64_t dim1) { return x.swapaxes(dim0, dim1); }
Tensor swapdims(const Tensor& x, int64_t dim0, int64_t dim1) { return x.swapdims(dim0, dim1); }

}  // namespace minigrad
