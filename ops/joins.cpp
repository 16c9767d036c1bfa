// Joins and the ops that split a tensor into pieces or rearrange its elements: split (and
// chunk, unbind), cat (and stack), repeat, flip, tril and triu.
//
// split and cat are each other's backward: Split's pieces are views of its input, and their
// gradients are joined back with cat; Cat writes each input into its slice of a new tensor,
// and its gradient is split back into those slices. Each backward calls the other op as a
// Function, so both are twice differentiable (and so are chunk, unbind and stack, built on
// them). Cat's forward copies with copy_into into slices of the output, which runs on
// either device through the existing strided copy, one copy per input.
#include <algorithm>
#include <cstdint>
#include <vector>

#include <minigrad/autograd/function.h>
#include <minigrad/core/shape.h>
#include <minigrad/ops/cpu_loops.h>
#include <minigrad/ops/ops.h>

namespace minigrad {
namespace {

// ---- the Functions ----

// Views of x along dim, of the given sizes (non-negative, adding up to x.size(dim)).
struct Split : Function<Split> {
  struct State {
    int64_t dim = 0;
  };
  static tensor_list forward(Context& ctx, const Tensor& x, int64_t dim, const Shape& split_sizes) {
    ctx.state<State>().dim = dim;
    tensor_list pieces;
    pieces.reserve(split_sizes.size());
    Shape sizes = x.sizes();
    int64_t start = 0;
    for (int64_t length : split_sizes) {
      sizes[static_cast<size_t>(dim)] = length;
      pieces.push_back(as_strided(x, sizes, x.strides(), x.storage_offset() + start * x.stride(dim)));
      start += length;
    }
    return pieces;
  }
  // Pieces that got no gradient get zeros (the tape's default), so the join is complete.
  static tensor_list backward(Context& ctx, tensor_list grads) {
    return {cat(grads, ctx.state<State>().dim), Tensor(), Tensor()};
  }
};

// A 1-D tensor of size 0, which cat skips (see cat below).
bool is_legacy_empty(const Tensor& t) { return t.dim() == 1 && t.size(0) == 0; }

struct Cat : Function<Cat> {
  struct State {
    int64_t dim = 0;
    Shape lengths;  // each input's size along dim, -1 for a skipped one
    DType dtype = kFloat32;
    Device device;
  };
  // The checks are done (cat below): one dtype and device, one shape but for dim, except
  // the inputs marked skipped.
  static Tensor forward(Context& ctx, const tensor_list& tensors, int64_t dim, const std::vector<bool>& skipped) {
    const Tensor* reference = nullptr;
    Shape lengths(tensors.size(), -1);
    int64_t total = 0;
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (skipped[i]) continue;
      if (!reference) reference = &tensors[i];
      lengths[i] = tensors[i].size(dim);
      total += lengths[i];
    }
    Shape out_sizes = reference->sizes();
    out_sizes[static_cast<size_t>(dim)] = total;
    Tensor out = empty(out_sizes, TensorOptions(reference->dtype()).device(reference->device()));
    int64_t start = 0;
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (skipped[i]) continue;
      copy_into(out.narrow(dim, start, lengths[i]), tensors[i]);
      start += lengths[i];
    }
    ctx.state<State>() = {dim, lengths, out.dtype(), out.device()};
    return out;
  }
  static tensor_list backward(Context& ctx, tensor_list grads) {
    const auto& s = ctx.state<State>();
    Shape split_sizes;
    for (int64_t length : s.lengths)
      if (length >= 0) split_sizes.push_back(length);
    const tensor_list pieces = grads[0].split_with_sizes(split_sizes, s.dim);
    tensor_list grad_inputs;
    size_t next = 0;
    for (int64_t length : s.lengths)  // a skipped input's gradient is empty like the input
      grad_inputs.push_back(length >= 0 ? pieces[next++] : zeros({0}, TensorOptions(s.dtype).device(s.device)));
    grad_inputs.push_back(Tensor());  // dim
    grad_inputs.push_back(Tensor());  // skipped
    return grad_inputs;
  }
};

// A copy of x with the order along each of `dims` (wrapped, distinct) reversed: the strided
// copy reads x through a view that walks those dims backwards (a negative stride, starting
// at the last element). The view never leaves this Function: other ops expect strides >= 0.
struct Flip : Function<Flip> {
  struct State {
    Shape dims;
  };
  static Tensor forward(Context& ctx, const Tensor& x, const Shape& dims) {
    ctx.state<State>().dims = dims;
    Tensor out = empty(x.sizes(), x.options());
    if (x.numel() == 0) return out;
    Shape strides = x.strides();
    int64_t offset = x.storage_offset();
    for (int64_t d : dims) {
      const size_t i = static_cast<size_t>(d);
      offset += (x.size(d) - 1) * strides[i];
      strides[i] = -strides[i];
    }
    copy_into(out, as_strided(x, x.sizes(), strides, offset));
    return out;
  }
  static tensor_list backward(Context& ctx, tensor_list grads) {
    return {Flip::apply(grads[0], ctx.state<State>().dims), Tensor()};
  }
};

// ---- checks shared by cat and stack ----

// Every tensor defined, of the first one's dtype and device.
void check_joinable(const char* op, const tensor_list& tensors) {
  MG_CHECK(!tensors.empty(), "{}: expected a non-empty list of tensors", op);
  for (size_t i = 0; i < tensors.size(); ++i)
    MG_CHECK(tensors[i].defined(), "{}: the tensor at position {} is undefined", op, i);
  const Tensor& first = tensors[0];
  for (size_t i = 1; i < tensors.size(); ++i) {
    MG_CHECK(tensors[i].dtype() == first.dtype(),
             "{}: expected all tensors to have dtype {} (that of the tensor at position 0), but the tensor at "
             "position {} has dtype {}",
             op, first.dtype(), i, tensors[i].dtype());
    MG_CHECK(tensors[i].device() == first.device(),
             "{}: expected all tensors to be on {} (the device of the tensor at position 0), but the tensor at "
             "position {} is on {}",
             op, first.device(), i, tensors[i].device());
  }
}

// The keep-mask of tril (lower) or triu for the last two dims of x: [rows, cols] bools,
// true where col - row <= diagonal (tril) or >= diagonal (triu).
Tensor triangle_mask(const char* op, const Tensor& x, int64_t diagonal, bool lower) {
  check_defined(op, "self", x);
  MG_CHECK(x.dim() >= 2, "{}: expects 'self' to have at least 2 dimensions, got {}-D", op, x.dim());
  const int64_t rows = x.size(-2);
  const int64_t cols = x.size(-1);
  // Past these bounds every element is kept or every one dropped, as at the bounds: the
  // clamp keeps row + diagonal exact in arange's doubles.
  diagonal = std::clamp<int64_t>(diagonal, -rows, cols);
  const TensorOptions indices = TensorOptions(kInt64).device(x.device());
  const Tensor col = arange(0.0, static_cast<double>(cols), 1.0, indices);
  const Tensor row_plus_diagonal =
      arange(static_cast<double>(diagonal), static_cast<double>(rows + diagonal), 1.0, indices).unsqueeze(1);
  return lower ? le(col, row_plus_diagonal) : ge(col, row_plus_diagonal);
}

Tensor keep_triangle(const char* op, const Tensor& x, int64_t diagonal, bool lower) {
  const Tensor mask = triangle_mask(op, x, diagonal, lower);
  return where(mask, x, zeros({}, x.options()));
}

}  // namespace

// ---- split, chunk, unbind ----

tensor_list Tensor::split_with_sizes(const Shape& split_sizes, int64_t dim) const {
  check_defined("split_with_sizes", "self", *this);
  MG_CHECK(this->dim() > 0, "split_with_sizes: cannot split a 0-d tensor 'self': it has no dimension");
  const int64_t d = wrap_dim(dim, this->dim(), "split_with_sizes");
  int64_t total = 0;
  for (int64_t length : split_sizes) {
    MG_CHECK(length >= 0, "split_with_sizes: split_sizes {} holds a negative size {}", shape_str(split_sizes), length);
    total += length;
  }
  MG_CHECK(total == size(d),
           "split_with_sizes: expects split_sizes {} to sum exactly to {} (the size of 'self' at dimension {}), but "
           "they sum to {}",
           shape_str(split_sizes), size(d), d, total);
  return Split::apply(*this, d, split_sizes);
}

// Pieces of split_size, the last one holding the rest; a dim of size 0 gives one empty piece.
tensor_list Tensor::split_by_size(int64_t split_size, int64_t dim) const {
  check_defined("split", "self", *this);
  MG_CHECK(this->dim() > 0, "split: cannot split a 0-d tensor 'self': it has no dimension");
  const int64_t d = wrap_dim(dim, this->dim(), "split");
  const int64_t size = this->size(d);
  MG_CHECK(split_size >= 0, "split: split_size must be non-negative, got {}", split_size);
  MG_CHECK(split_size > 0 || size == 0, "split: split_size can be 0 only for a dimension of size 0, not {}", size);
  Shape split_sizes;
  for (int64_t start = 0; start < size; start += split_size) split_sizes.push_back(std::min(split_size, size - start));
  if (split_sizes.empty()) split_sizes.push_back(0);
  return Split::apply(*this, d, split_sizes);
}

// Pieces of ceil(size / chunks); fewer than `chunks` when they cover the dim sooner (a size
// 5 in 4 chunks is 2, 2, 1), as in PyTorch. A dim of size 0 gives `chunks` empty pieces.
tensor_list Tensor::chunk(int64_t chunks, int64_t dim) const {
  check_defined("chunk", "self", *this);
  MG_CHECK(this->dim() > 0, "chunk: cannot be applied to a 0-d tensor 'self': it has no dimension");
  MG_CHECK(chunks > 0, "chunk: expects 'chunks' to be greater than 0, got {}", chunks);
  const int64_t d = wrap_dim(dim, this->dim(), "chunk");
  const int64_t size = this->size(d);
  if (size == 0) return split_with_sizes(Shape(static_cast<size_t>(chunks), 0), d);
  const int64_t split_size = size / chunks + (size % chunks != 0 ? 1 : 0);
  return split_by_size(split_size, d);
}

// The pieces of size 1 with dim squeezed away: each is x.select(dim, i), and the backward is
// one cat rather than a zero-filled tensor per piece.
tensor_list Tensor::unbind(int64_t dim) const {
  check_defined("unbind", "self", *this);
  MG_CHECK(this->dim() > 0, "unbind: cannot be applied to a 0-d tensor 'self': it has no dimension");
  const int64_t d = wrap_dim(dim, this->dim(), "unbind");
  if (size(d) == 0) return {};
  tensor_list pieces = split_by_size(1, d);
  for (Tensor& piece : pieces) piece = piece.squeeze(d);
  return pieces;
}

tensor_list chunk(const Tensor& x, int64_t chunks, int64_t dim) { return x.chunk(chunks, dim); }
tensor_list unbind(const Tensor& x, int64_t dim) { return x.unbind(dim); }

// ---- cat, stack ----

// A 1-D tensor of size 0 is skipped whatever the other shapes (PyTorch keeps this for code
// that grows a result from torch.tensor([]) by cat), unless every tensor is one; all other
// tensors must match the first kept one in rank and in every size but dim's.
Tensor cat(const tensor_list& tensors, int64_t dim) {
  check_joinable("cat", tensors);
  std::vector<bool> skipped(tensors.size());
  const bool all_legacy_empty = std::all_of(tensors.begin(), tensors.end(), is_legacy_empty);
  size_t first = tensors.size();  // the first kept tensor: the shape the others must have
  for (size_t i = 0; i < tensors.size(); ++i) {
    skipped[i] = !all_legacy_empty && is_legacy_empty(tensors[i]);
    if (!skipped[i] && first == tensors.size()) first = i;
  }
  const Tensor& reference = tensors[first];
  MG_CHECK(reference.dim() > 0, "cat: the tensor at position {} is 0-d, and a 0-d tensor cannot be concatenated",
           first);
  const int64_t d = wrap_dim(dim, reference.dim(), "cat");
  for (size_t i = first + 1; i < tensors.size(); ++i) {
    if (skipped[i]) continue;
    const Tensor& t = tensors[i];
    MG_CHECK(t.dim() == reference.dim(),
             "cat: tensors must have the same number of dimensions: the tensor at position {} has {}, the one at "
             "position {} has {}",
             first, reference.dim(), i, t.dim());
    for (int64_t k = 0; k < t.dim(); ++k)
      MG_CHECK(k == d || t.size(k) == reference.size(k),
               "cat: sizes of tensors must match except in dimension {}: expected size {} but got size {} for the "
               "tensor at position {} in dimension {} (shapes {} and {})",
               d, reference.size(k), t.size(k), i, k, shape_str(reference.sizes()), shape_str(t.sizes()));
  }
  return Cat::apply(tensors, d, skipped);
}

Tensor stack(const tensor_list& tensors, int64_t dim) {
  check_joinable("stack", tensors);
  const Tensor& first = tensors[0];
  for (size_t i = 1; i < tensors.size(); ++i)
    MG_CHECK(tensors[i].sizes() == first.sizes(),
             "stack: expects each tensor to be of equal size, but got {} at position 0 and {} at position {}",
             shape_str(first.sizes()), shape_str(tensors[i].sizes()), i);
  const int64_t d = wrap_dim(dim, first.dim() + 1, "stack");
  tensor_list unsqueezed;
  unsqueezed.reserve(tensors.size());
  for (const Tensor& t : tensors) unsqueezed.push_back(t.unsqueeze(d));
  return cat(unsqueezed, d);
}

// ---- repeat, flip, tril, triu ----

// x (with leading size-1 dims up to repeats.size()) viewed as [1, s0, 1, s1, ...], expanded
// to [r0, s0, r1, s1, ...] and copied, then read as [r0 * s0, r1 * s1, ...]. The backward
// follows the same ops back: the sum over each repeat (expand's) and the views.
Tensor Tensor::repeat(const Shape& repeats) const {
  check_defined("repeat", "self", *this);
  MG_CHECK(static_cast<int64_t>(repeats.size()) >= dim(),
           "repeat: the number of repeats ({}) cannot be smaller than the number of dimensions of 'self' ({})",
           repeats.size(), dim());
  for (int64_t r : repeats)
    MG_CHECK(r >= 0, "repeat: repeats {} holds a negative count {}", shape_str(repeats), r);
  const size_t leading = repeats.size() - static_cast<size_t>(dim());
  Shape interleaved, expanded, result;
  for (size_t i = 0; i < repeats.size(); ++i) {
    const int64_t s = i < leading ? 1 : sizes()[i - leading];
    interleaved.insert(interleaved.end(), {1, s});
    expanded.insert(expanded.end(), {repeats[i], s});
    result.push_back(repeats[i] * s);
  }
  checked_numel(result, "repeat");
  return reshape(interleaved).expand(expanded).clone().view(result);
}

Tensor Tensor::flip(const Shape& dims) const {
  check_defined("flip", "self", *this);
  Shape wrapped;
  std::vector<bool> seen(static_cast<size_t>(std::max<int64_t>(dim(), 1)), false);
  for (int64_t d : dims) {
    const int64_t w = wrap_dim(d, dim(), "flip");
    MG_CHECK(!seen[static_cast<size_t>(w)], "flip: dim {} appears more than once in the argument 'dims' {}", w,
             shape_str(dims));
    seen[static_cast<size_t>(w)] = true;
    if (dim() > 0) wrapped.push_back(w);  // a 0-d tensor has one element: nothing to reverse
  }
  return Flip::apply(*this, wrapped);
}

Tensor Tensor::tril(int64_t diagonal) const { return keep_triangle("tril", *this, diagonal, /*lower=*/true); }
Tensor Tensor::triu(int64_t diagonal) const { return keep_triangle("triu", *this, diagonal, /*lower=*/false); }

Tensor flip(const Tensor& x, const Shape& dims) { return x.flip(dims); }
Tensor tril(const Tensor& x, int64_t diagonal) { return x.tril(diagonal); }
Tensor triu(const Tensor& x, int64_t diagonal) { return x.triu(diagonal); }

}  // namespace minigrad
