#pragma once
// Shape arithmetic shared by every op: dim wrapping, contiguous strides, broadcasting.
#include <cstdint>
#include <string>

#include "core/tensor.h"

namespace minigrad {

int64_t shape_numel(const Shape& sizes);
Shape contiguous_strides(const Shape& sizes);
std::string shape_str(const Shape& s);  // "[2, 3]"

// Wraps a possibly negative dim into [0, ndim). `op` names the caller for the error message.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);

// NumPy broadcasting: sizes are aligned at the right; each pair is equal or one of them is 1.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

// Strides that read `t` as if expanded to `sizes` (0 for broadcast dims). Requires that t's
// shape broadcasts to `sizes`.
Shape broadcast_strides(const Tensor& t, const Shape& sizes);

}  // namespace minigrad
