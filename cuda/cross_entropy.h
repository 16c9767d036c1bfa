#pragma once
// cross_entropy on the GPU (cuda/cross_entropy.cu), called by ops/loss.cpp once it has checked
// the arguments' shapes, dtypes and devices. One kernel reads each row of the logits once from
// memory, computes the row's loss and, when a gradient is wanted, writes the row's gradient in
// the same launch: the backward then only scales it by dy. Plain C++; on the current stream of
// the tensors' device.
#include <cstdint>

#include <minigrad/core/tensor.h>

namespace minigrad {
namespace cuda {

// counts (contiguous int64 [2], on targets' device) = {the targets that are not ignore_index,
// how many of those are outside [0, classes)}, in one pass over targets (int64 [N], any
// stride). Launches only: the caller reads counts[1] for its error, and hands counts[0] to
// cross_entropy_rows as Mean's divisor without reading it.
void cross_entropy_count_targets(const Tensor& targets, int64_t classes, int64_t ignore_index, const Tensor& counts);

struct CrossEntropyRows {
  int64_t ignore_index = -100;
  double label_smoothing = 0.0;
  // Each counted row's weight in the gradient: 1 when undefined (Sum, None), or 1 / count with
  // count the first element of this int64 tensor (Mean: counts[0] of cross_entropy_count_targets),
  // read by the kernel on the device.
  Tensor counted_rows;
};

// For each row i of logits (contiguous [N, C], floating) with target t = targets[i] (int64 [N],
// any stride; each one in [0, C) or ignore_index), eps the label smoothing:
//   loss_rows[i] = lse_i - (1 - eps) x_it - eps mean_j x_ij,    lse_i = log sum_j exp(x_ij)
// and 0 where t is ignore_index; loss_rows is contiguous [N], float (double for double logits).
// When grad is defined (contiguous, the logits' shape and dtype), also
//   grad[i, j] = w_i (softmax_ij - (1 - eps) [j == t] - eps / C)
// with w_i the row's weight (options.counted_rows), 0 for an ignored row: the gradient of the
// reduced loss for dy = 1. float16/bfloat16 compute in float.
void cross_entropy_rows(const Tensor& logits, const Tensor& targets, const CrossEntropyRows& options,
                        const Tensor& loss_rows, const Tensor& grad);

// grad (contiguous [N, C]) times dy, in place: dy 0-dim (every row) or [N] (row i times dy[i],
// any stride), of grad's dtype and on its device. Rows whose factor is 1 are left as they are,
// read by the kernel: loss.backward() costs one launch and no pass over grad.
void cross_entropy_scale_grad(const Tensor& grad, const Tensor& dy);

}  // namespace cuda
}  // namespace minigrad
