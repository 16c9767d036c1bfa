#pragma once
// The engine: runs backward over the part of the tape reachable from the roots.
#include <functional>
#include <optional>

#include <minigrad/core/tensor.h>

namespace minigrad {
namespace autograd {

// Replays the reachable nodes in reverse sequence order (iteratively, no recursion),
// summing gradients of tensors used more than once and accumulating into leaves' .grad.
// `grad_roots[i]` may be undefined for a one-element root (the gradient 1 is implied).
// retain_graph keeps the saved tensors for another backward; it defaults to create_graph.
// create_graph runs the backward formulas with grad mode on, so the gradients have
// history and can be differentiated again (higher-order gradients).
void backward(const tensor_list& roots, const tensor_list& grad_roots = {},
              std::optional<bool> retain_graph = std::nullopt, bool create_graph = false);

// The gradients of `outputs` with respect to `inputs`, returned rather than accumulated
// into .grad (leaves' .grad is left as it is). An input that the outputs do not depend on
// is an error unless allow_unused, which returns Tensor() for it.
tensor_list grad(const tensor_list& outputs, const tensor_list& inputs, const tensor_list& grad_outputs = {},
                 std::optional<bool> retain_graph = std::nullopt, bool create_graph = false,
                 bool allow_unused = false);

// Called from a hook or a backward while the engine runs: `callback` runs once, after the
// whole backward has finished (every gradient accumulated). Gradient clipping, logging and
// data-parallel all-reduce hang on this.
void queue_callback(std::function<void()> callback);

}  // namespace autograd
}  // namespace minigrad
