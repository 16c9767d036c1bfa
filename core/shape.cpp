#include <minigrad/core/shape.h>

#include <fmt/ranges.h>

namespace minigrad {

int64_t shape_numel(const Shape& sizes) {
  uint64_t n = 1;  // wraps rather than overflows; see TensorImpl::numel
  for (int64_t s : sizes) n *= static_cast<uint64_t>(s);
  return static_cast<int64_t>(n);
}

int64_t checked_numel(const Shape& sizes, const char* op) {
  for (size_t i = 0; i < sizes.size(); ++i)
    MG_CHECK(sizes[i] >= 0, "{}: negative size {} in dim {} of shape {}", op, sizes[i], i, shape_str(sizes));
  // A zero size makes the tensor empty whatever the other sizes are: no element, no bytes.
  for (int64_t s : sizes)
    if (s == 0) return 0;
  int64_t n = 1;
  for (int64_t s : sizes) {
    const bool overflow = __builtin_mul_overflow(n, s, &n);
    MG_CHECK(!overflow, "{}: shape {} has too many elements (the product of the sizes overflows int64)", op,
             shape_str(sizes));
  }
  return n;
}

size_t checked_nbytes(int64_t numel, size_t element_size, const char* op) {
  MG_CHECK(numel >= 0, "{}: negative element count {}", op, numel);
  int64_t nbytes = 0;
  const bool overflow = __builtin_mul_overflow(numel, static_cast<int64_t>(element_size), &nbytes);
  MG_CHECK(!overflow, "{}: {} elements of {} bytes do not fit in a byte count (it overflows int64)", op, numel,
           element_size);
  return static_cast<size_t>(nbytes);
}

Shape contiguous_strides(const Shape& sizes) {
  Shape strides(sizes.size());
  // In unsigned arithmetic, which wraps instead of overflowing: a shape whose product
  // passes int64 is refused by checked_numel unless one of its sizes is 0, and an empty
  // tensor's strides never step over an element.
  uint64_t running = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = static_cast<int64_t>(running);
    running *= static_cast<uint64_t>(std::max<int64_t>(sizes[i], 1));
  }
  return strides;
}

std::string shape_str(const Shape& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  const int64_t lo = ndim == 0 ? -1 : -ndim;  // a 0-d tensor accepts dim 0 and -1, like PyTorch
  const int64_t hi = ndim == 0 ? 0 : ndim - 1;
  MG_CHECK(dim >= lo && dim <= hi, "{}: dim {} is out of range for a {}-D tensor (expected [{}, {}])", op, dim,
           ndim, lo, hi);
  return dim < 0 ? dim + std::max<int64_t>(ndim, 1) : dim;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t sa = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t sb = i < n - b.size() ? 1 : b[i - (n - b.size())];
    MG_CHECK(sa == sb || sa == 1 || sb == 1,
             "{}: shapes {} and {} do not broadcast (dim {}: {} vs {})", op, shape_str(a), shape_str(b), i, sa, sb);
    out[i] = sa == 1 ? sb : sa;
  }
  return out;
}

bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  const size_t lead = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] != 1 && from[i] != to[lead + i]) return false;
  return true;
}

Shape broadcast_strides(const Tensor& t, const Shape& sizes) {
  MG_CHECK(broadcasts_to(t.sizes(), sizes), "broadcast: shape {} does not broadcast to {}", shape_str(t.sizes()),
           shape_str(sizes));
  const size_t n = sizes.size();
  const size_t k = static_cast<size_t>(t.dim());
  Shape strides(n, 0);
  for (size_t i = 0; i < k; ++i) {
    const size_t d = n - k + i;
    const int64_t s = t.sizes()[i];
    strides[d] = (s == 1 && sizes[d] != 1) ? 0 : t.strides()[i];
  }
  return strides;
}

}  // namespace minigrad
