#pragma once
// Shape arithmetic shared by every op: dim wrapping, contiguous strides, broadcasting.
#include <cstdint>
#include <string>

#include <minigrad/core/tensor.h>

namespace minigrad {

int64_t shape_numel(const Shape& sizes);

// The product of `sizes`, refusing a negative size or a product that does not fit in
// int64 (it would wrap, and the allocation or the loops would then use a wrong count).
// `op` names the caller for the error message: "zeros: negative size -1 in dim 0 of [-1]".
int64_t checked_numel(const Shape& sizes, const char* op);
// numel * element_size as a byte count, refusing one that does not fit in size_t or in
// int64 (offsets in bytes are computed with int64_t).
size_t checked_nbytes(int64_t numel, size_t element_size, const char* op);
Shape contiguous_strides(const Shape& sizes);
std::string shape_str(const Shape& s);  // "[2, 3]"

// Wraps a possibly negative dim into [0, ndim). `op` names the caller for the error message.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);

// NumPy broadcasting: sizes are aligned at the right; each pair is equal or one of them is 1.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
// Whether `from` broadcasts to exactly `to` (to's shape unchanged): from has at most to's dims,
// and each of its sizes, aligned at the right, is to's or 1.
bool broadcasts_to(const Shape& from, const Shape& to);

// Strides that read `t` as if expanded to `sizes` (0 for broadcast dims). Requires that t's
// shape broadcasts to `sizes`.
Shape broadcast_strides(const Tensor& t, const Shape& sizes);

}  // namespace minigrad
