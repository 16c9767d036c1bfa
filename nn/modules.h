#pragma once
// The layers of nn, each a Module whose forward is one of minigrad's ops (ops/ops.h), with
// PyTorch's constructor arguments and initializations:
//   Linear(in, out, bias)               linear; weight and bias uniform in +-1/sqrt(in)
//   LayerNorm(shape, eps, affine)       layer_norm; weight 1, bias 0
//   RMSNorm(shape, eps, affine)         rms_norm; weight 1
//   Embedding(count, dim, padding_idx)  embedding; weight normal(0, 1), the padding row 0
//   Dropout(p)                          dropout, in training only
//   GELU(approximate)                   gelu
//   MLP(in, hidden, approximate)        Linear, GELU, Linear: a transformer's feed-forward block
//   Sequential                          its children's forwards in order
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <minigrad/nn/module.h>
#include <minigrad/ops/ops.h>

namespace minigrad {
namespace nn {

class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "Linear"; }
  Tensor weight;  // [out_features, in_features]
  Tensor bias;    // [out_features], or undefined
};

class LayerNorm : public Module {
 public:
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true);
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "LayerNorm"; }
  Shape normalized_shape;
  double eps;
  Tensor weight, bias;  // undefined without elementwise_affine
};

class RMSNorm : public Module {
 public:
  // eps: none for rms_norm's default, the machine epsilon of the computation's dtype.
  explicit RMSNorm(Shape normalized_shape, std::optional<double> eps = std::nullopt, bool elementwise_affine = true);
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "RMSNorm"; }
  Shape normalized_shape;
  std::optional<double> eps;
  Tensor weight;  // undefined without elementwise_affine
};

class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, std::optional<int64_t> padding_idx = std::nullopt);
  // indices: int64 of any shape; the result has a trailing dim of embedding_dim.
  Tensor forward(const Tensor& indices) override;
  std::string name() const override { return "Embedding"; }
  std::optional<int64_t> padding_idx;
  Tensor weight;  // [num_embeddings, embedding_dim]
};

class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& x) override { return dropout(x, p, is_training()); }
  std::string name() const override { return "Dropout"; }
  double p;
};

class GELU : public Module {
 public:
  explicit GELU(GeluApproximation approximate = GeluApproximation::None) : approximate(approximate) {}
  Tensor forward(const Tensor& x) override { return gelu(x, approximate); }
  std::string name() const override { return "GELU"; }
  GeluApproximation approximate;
};

// The transformer's feed-forward block: fc2(gelu(fc1(x))), in_features -> hidden_features ->
// in_features (GPT-2's is 768 -> 3072 -> 768 with the tanh GELU). Its forward is the fused op
// mlp on fc1's and fc2's parameters (on the GPU the bias, GELU and their gradients run in the
// GEMMs' epilogues).
class MLP : public Module {
 public:
  MLP(int64_t in_features, int64_t hidden_features, GeluApproximation approximate = GeluApproximation::None);
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "MLP"; }
  std::shared_ptr<Linear> fc1, fc2;
  GeluApproximation approximate;
};

// Children named "0", "1", ... in the order they were added; forward runs them in that order.
class Sequential : public Module {
 public:
  Sequential() = default;
  // Adds a module at the end, and returns it.
  template <typename M>
  std::shared_ptr<M> push_back(std::shared_ptr<M> module) {
    return register_module(std::to_string(size()), std::move(module));
  }
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "Sequential"; }
  size_t size() const { return named_children().size(); }
};

}  // namespace nn
}  // namespace minigrad
