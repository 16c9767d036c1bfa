#pragma once
// The tape's entries. Every differentiable op that runs while grad mode is on creates one
// Node: it knows how to turn the gradients of the op's outputs into gradients of its
// inputs (apply), and where each input's gradient goes next (next_edges). Nodes are
// numbered in creation order (sequence_nr): the engine replays them in reverse.
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

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

class Node {
 public:
  explicit Node(uint64_t sequence_nr = next_sequence_nr()) : sequence_nr_(sequence_nr) {}
  // Releases the chain of nodes behind this one iteratively: a 100000-op graph would
  // otherwise be destroyed by 100000 nested destructor calls and overflow the stack.
  virtual ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // Gradients of the forward outputs in, gradients of the forward inputs out (one per edge).
  virtual tensor_list apply(tensor_list&& grad_outputs) = 0;
  virtual std::string name() const = 0;
  // Frees saved tensors after backward (unless retain_graph).
  virtual void release_variables() {}

  uint64_t sequence_nr() const { return sequence_nr_; }
  const std::vector<Edge>& next_edges() const { return next_edges_; }
  void set_next_edges(std::vector<Edge> edges) { next_edges_ = std::move(edges); }
  // How many outputs the forward produced: how many gradients flow into apply().
  size_t num_outputs() const { return output_meta_.size(); }
  const TensorMeta& output_meta(size_t i) const { return output_meta_[i]; }
  void add_output_meta(TensorMeta m) { output_meta_.push_back(std::move(m)); }

 private:
  uint64_t sequence_nr_;
  std::vector<Edge> next_edges_;
  std::vector<TensorMeta> output_meta_;
};

// The node at the end of every path: adds the incoming gradient into a leaf's .grad.
// It holds the leaf; the leaf holds it only weakly, so there is no reference cycle.
class AccumulateGrad : public Node {
 public:
  explicit AccumulateGrad(std::shared_ptr<TensorImpl> leaf);
  tensor_list apply(tensor_list&& grad_outputs) override;
  std::string name() const override { return "AccumulateGrad"; }
  const std::shared_ptr<TensorImpl>& leaf() const { return leaf_; }

 private:
  std::shared_ptr<TensorImpl> leaf_;
};

// The edge a tensor's gradient flows along: its grad_fn, or its leaf's accumulator, or none.
Edge gradient_edge(const Tensor& t);

}  // namespace autograd
}  // namespace minigrad
