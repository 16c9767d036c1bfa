#pragma once
// The indexing ops on the GPU (cuda/indexing.cu), called by ops/indexing.cpp once it has
// checked the arguments (dtypes, shapes, dims, and the index values against the sizes).
// Plain C++: tensors come in, and the launchers work out the pointers, sizes and strides.
// Inputs may have any strides; outputs are contiguous. The launchers run on the tensors'
// device and its current stream.
#include <cstdint>

#include <minigrad/core/tensor.h>

namespace minigrad {
namespace cuda {

// The smallest and largest value of an int64 tensor with at least one element. The one
// host synchronization of the indexing ops: an index out of range is an error raised on the
// host, which needs the values there (a device-side assert instead would leave the CUDA
// context unusable for the rest of the process).
void index_min_max(const Tensor& index, int64_t& min, int64_t& max);

// out[p] = x[p with its coordinate along dim replaced by index[p]], over index's shape.
// index_select comes here with its index expanded (stride 0) to the output's shape.
void gather(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& out);

// out = self, then each element src[p] (p over index's shape) goes to the element of out at
// p with its coordinate along dim replaced by index[p]: written (accumulate false; where
// positions repeat, the last in row-major order wins) or added (true; in the order of p,
// in kernels/indexing.h's accumulator), deterministically and with the CPU's bits.
void scatter(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src, bool accumulate,
             const Tensor& out);

// indices[r, 0..k) = the positions of row r of `rows` (a contiguous [R, n] tensor) in topk's
// order (kernels/indexing.h), the first k of them. indices is a contiguous int64 [R, k].
void topk_indices(const Tensor& rows, int64_t k, bool largest, const Tensor& indices);

// multinomial: for each row of probs ([R, n], floating, any strides), its running sums into
// cdf (contiguous float64 [R, n]) and (status, nonzero count) into status (int64 [R, 2]).
void multinomial_scan(const Tensor& probs, const Tensor& cdf, const Tensor& status);
// out[r, s] (int64 [R, S]) = the category uniform number r * S + s of the stream picks.
void multinomial_with_replacement(const Tensor& cdf, uint64_t seed, uint64_t offset, const Tensor& out);
// keys[r, i] (float64 [R, n]) = the race key of category i of row r (element r * n + i of the stream).
void multinomial_race_keys(const Tensor& probs, uint64_t seed, uint64_t offset, const Tensor& keys);

}  // namespace cuda
}  // namespace minigrad
