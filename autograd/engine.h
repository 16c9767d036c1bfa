#pragma once
// The engine: runs backward over the part of the tape reachable from the roots.
#include "core/tensor.h"

namespace minigrad {
namespace autograd {

// Replays the reachable nodes in reverse sequence order (iteratively, no recursion),
// summing gradients of tensors used more than once and accumulating into leaves' .grad.
// `grad_roots[i]` may be undefined for a one-element root (the gradient 1 is implied).
void backward(const tensor_list& roots, const tensor_list& grad_roots = {}, bool retain_graph = false);

}  // namespace autograd
}  // namespace minigrad
