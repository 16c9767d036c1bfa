#pragma once
// The tape's entries. Every differentiable op that runs while grad mode is on creates one
// Node: it knows how to turn the gradients of the op's outputs into gradients of its
// inputs (apply), and where each input's gradient goes next (next_edges). Nodes are
// numbered in creation order (sequence_nr): the engine replays them in reverse.
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <minigrad/core/tensor.h>

namespace minigrad {
namespace autograd {

class Node;

// Where a gradient goes: input `input_nr` of node `fn` (input_nr = which forward output
// of that node the tensor was). An empty edge means "no gradient needed".
struct Edge {
  std::shared_ptr<Node> fn;
  uint32_t input_nr = 0;
  bool valid() const { return fn != nullptr; }
};

// What a gradient for a tensor must look like: its shape, dtype and device.
struct TensorMeta {
  Shape sizes;
  DType dtype = kFloat32;
  Device device;
  static TensorMeta of(const Tensor& t) { return {t.sizes(), t.dtype(), t.device()}; }
};

uint64_t next_sequence_nr();

// True when nothing but `t` can see its memory: the engine and the accumulator may then sum
// into it in place.
inline bool sole_owner(const Tensor& t) {
  return t.impl_ptr().use_count() == 1 && t.storage().use_count() == 1;
}

// Drops these references to nodes. A node whose last reference goes releases the nodes it
// holds through the same loop, so freeing a long graph never nests destructors.
void release_nodes(std::vector<std::shared_ptr<Node>>&& nodes);

// A hook on a tensor's gradient: gets the gradient, returns a replacement or Tensor() to
// keep it as it is.
using GradHook = std::function<Tensor(const Tensor&)>;

// What anomaly mode records about the forward call that made a node (autograd/anomaly_mode.h).
struct AnomalyMetadata;

class Node : public std::enable_shared_from_this<Node> {
 public:
  explicit Node(uint64_t sequence_nr = next_sequence_nr()) : sequence_nr_(sequence_nr) {}
  // Releases the chain of nodes behind this one iteratively (release_nodes): a 100000-op
  // graph would otherwise be destroyed by 100000 nested destructor calls and overflow the stack.
  virtual ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // Gradients of the forward outputs in, gradients of the forward inputs out (one per edge).
  virtual tensor_list apply(tensor_list&& grad_outputs) = 0;
  virtual std::string name() const = 0;
  // Frees saved tensors after backward (unless retain_graph).
  virtual void release_variables() {}
  // Shapes, dtypes and devices of the tensors saved for backward (for graph export).
  virtual std::vector<TensorMeta> saved_tensor_metas() const { return {}; }

  uint64_t sequence_nr() const { return sequence_nr_; }
  const std::vector<Edge>& next_edges() const { return next_edges_; }
  void set_next_edges(std::vector<Edge> edges) { next_edges_ = std::move(edges); }
  // How many outputs the forward produced: how many gradients flow into apply().
  size_t num_outputs() const { return output_meta_.size(); }
  const TensorMeta& output_meta(size_t i) const { return output_meta_[i]; }
  void add_output_meta(TensorMeta m) { output_meta_.push_back(std::move(m)); }

  // Hooks on the gradient of output `output_nr` (a non-leaf tensor's register_hook),
  // run in order before apply(); each may replace the gradient. Returns a handle.
  size_t add_tensor_pre_hook(uint32_t output_nr, GradHook hook);
  void remove_tensor_pre_hook(size_t handle);
  bool has_tensor_pre_hooks() const { return !pre_hooks_.empty() || !retains_grad_.empty(); }
  // Runs the hooks of output `output_nr` on its gradient (undefined gradients are skipped).
  Tensor run_tensor_pre_hooks(uint32_t output_nr, Tensor grad) const;
  // retain_grad() of a non-leaf: runs after its other hooks and keeps the gradient in the
  // tensor's .grad. Weak, so the node does not keep the tensor alive.
  void set_retains_grad(uint32_t output_nr, std::weak_ptr<TensorImpl> tensor);
  bool retains_grad(uint32_t output_nr, const TensorImpl* tensor) const;

  const std::shared_ptr<const AnomalyMetadata>& anomaly_metadata() const { return anomaly_metadata_; }
  void set_anomaly_metadata(std::shared_ptr<const AnomalyMetadata> m) { anomaly_metadata_ = std::move(m); }

 private:
  struct PreHook {
    uint32_t output_nr;
    GradHook hook;  // empty once removed (handles stay valid)
  };
  uint64_t sequence_nr_;
  std::vector<Edge> next_edges_;
  std::vector<TensorMeta> output_meta_;
  std::vector<PreHook> pre_hooks_;
  std::vector<std::pair<uint32_t, std::weak_ptr<TensorImpl>>> retains_grad_;
  std::shared_ptr<const AnomalyMetadata> anomaly_metadata_;
};

// The node at the end of every path: adds the incoming gradient into a leaf's .grad.
// It holds the leaf; the leaf holds it only weakly, so there is no reference cycle.
// Two threads may backpropagate into one shared leaf: the accumulation is guarded.
class AccumulateGrad : public Node {
 public:
  explicit AccumulateGrad(std::shared_ptr<TensorImpl> leaf);
  tensor_list apply(tensor_list&& grad_outputs) override;
  std::string name() const override { return "AccumulateGrad"; }
  const std::shared_ptr<TensorImpl>& leaf() const { return leaf_; }

 private:
  std::shared_ptr<TensorImpl> leaf_;
};

// The node a once-differentiable Function's gradients get under create_graph: reaching it
// in a second backward is an error naming that Function.
class OnceDifferentiableError : public Node {
 public:
  explicit OnceDifferentiableError(std::string function_name) : function_name_(std::move(function_name)) {}
  tensor_list apply(tensor_list&& grad_outputs) override;
  std::string name() const override { return function_name_ + "Backward (once differentiable)"; }

 private:
  std::string function_name_;
};

// A leaf's hooks: register_hook (run on a gradient before it is accumulated, or captured
// by autograd::grad) and register_post_accumulate_grad_hook (run after). Removed hooks
// stay as empty entries, so handles stay valid.
struct LeafHooks {
  std::vector<GradHook> pre;
  std::vector<std::function<void(const Tensor&)>> post_accumulate;
};
Tensor run_leaf_hooks(const TensorImpl& leaf, Tensor grad);

// The edge a tensor's gradient flows along: its grad_fn, or its leaf's accumulator, or none.
Edge gradient_edge(const Tensor& t);

}  // namespace autograd
}  // namespace minigrad
