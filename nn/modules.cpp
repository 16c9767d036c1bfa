// The layers of nn/modules.h: their parameters, their initializations, their forwards.
#include <minigrad/nn/modules.h>

#include <cmath>
#include <memory>
#include <optional>

#include <minigrad/autograd/grad_mode.h>
#include <minigrad/core/error.h>

namespace minigrad {
namespace nn {
namespace {

// Uniform in [-bound, bound]: PyTorch's initialization of Linear's weight and bias, bound
// 1/sqrt(in_features) (its kaiming_uniform with a = sqrt(5) comes to that for the weight).
Tensor uniform(const Shape& sizes, double bound) { return (rand(sizes) * 2.0 - 1.0) * bound; }

std::optional<Tensor> defined_or_none(const Tensor& t) { return t.defined() ? std::optional<Tensor>(t) : std::nullopt; }

}  // namespace

Linear::Linear(int64_t in_features, int64_t out_features, bool with_bias) {
  MG_CHECK(in_features > 0 && out_features > 0, "Linear: in_features and out_features must be positive, got {} and {}",
           in_features, out_features);
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
  register_parameter("weight", weight, uniform({out_features, in_features}, bound));
  if (with_bias) register_parameter("bias", bias, uniform({out_features}, bound));
}

Tensor Linear::forward(const Tensor& x) { return linear(x, weight, defined_or_none(bias)); }

LayerNorm::LayerNorm(Shape shape, double eps_, bool elementwise_affine)
    : normalized_shape(std::move(shape)), eps(eps_) {
  if (!elementwise_affine) return;
  register_parameter("weight", weight, ones(normalized_shape));
  register_parameter("bias", bias, zeros(normalized_shape));
}

Tensor LayerNorm::forward(const Tensor& x) {
  return layer_norm(x, normalized_shape, defined_or_none(weight), defined_or_none(bias), eps);
}

RMSNorm::RMSNorm(Shape shape, std::optional<double> eps_, bool elementwise_affine)
    : normalized_shape(std::move(shape)), eps(eps_) {
  if (elementwise_affine) register_parameter("weight", weight, ones(normalized_shape));
}

Tensor RMSNorm::forward(const Tensor& x) { return rms_norm(x, normalized_shape, defined_or_none(weight), eps); }

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim, std::optional<int64_t> padding_idx_)
    : padding_idx(padding_idx_) {
  MG_CHECK(num_embeddings > 0 && embedding_dim > 0,
           "Embedding: num_embeddings and embedding_dim must be positive, got {} and {}", num_embeddings,
           embedding_dim);
  if (padding_idx) {
    MG_CHECK(*padding_idx >= -num_embeddings && *padding_idx < num_embeddings,
             "Embedding: padding_idx {} is out of range for {} embeddings", *padding_idx, num_embeddings);
    if (*padding_idx < 0) *padding_idx += num_embeddings;
  }
  Tensor w = randn({num_embeddings, embedding_dim});
  if (padding_idx) {
    NoGradGuard no_grad;
    w.select(0, *padding_idx).zero_();
  }
  register_parameter("weight", weight, w);
}

Tensor Embedding::forward(const Tensor& indices) { return embedding(weight, indices, padding_idx); }

Dropout::Dropout(double p_) : p(p_) {
  MG_CHECK(p >= 0.0 && p < 1.0, "Dropout: p must be in [0, 1), got {}", p);
}

MLP::MLP(int64_t in_features, int64_t hidden_features, GeluApproximation approximate_)
    : fc1(register_module("fc1", std::make_shared<Linear>(in_features, hidden_features))),
      fc2(register_module("fc2", std::make_shared<Linear>(hidden_features, in_features))),
      approximate(approximate_) {}

Tensor MLP::forward(const Tensor& x) {
  auto optional = [](const Tensor& t) { return t.defined() ? std::optional<Tensor>(t) : std::nullopt; };
  return mlp(x, fc1->weight, optional(fc1->bias), fc2->weight, optional(fc2->bias), approximate);
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor out = x;
  for (const auto& [name, child] : named_children()) out = child->forward(out);
  return out;
}

}  // namespace nn
}  // namespace minigrad
