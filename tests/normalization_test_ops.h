#pragma once
// The four normalization ops the CPU and GPU suites (test_normalization,
// test_cuda_normalization) iterate over, each callable fused or as its composite twin.
#include <optional>
#include <vector>

#include "tests/test_support.h"

namespace minigrad {
namespace test {

enum class NormOp { LayerNorm, RMSNorm, GeluExact, GeluTanh };
inline const std::vector<NormOp> kNormOps = {NormOp::LayerNorm, NormOp::RMSNorm, NormOp::GeluExact,
                                             NormOp::GeluTanh};
constexpr double kNormEps = 1e-5;

inline const char* op_name(NormOp op) {
  switch (op) {
    case NormOp::LayerNorm: return "layer_norm";
    case NormOp::RMSNorm: return "rms_norm";
    case NormOp::GeluExact: return "layer_norm_gelu";
    case NormOp::GeluTanh: return "layer_norm_gelu, tanh";
  }
  return "";
}

inline bool has_bias(NormOp op) { return op != NormOp::RMSNorm; }

// The fused op (rms_norm ignores b).
inline Tensor fused(NormOp op, const Tensor& x, const Shape& shape, const std::optional<Tensor>& w,
                    const std::optional<Tensor>& b) {
  switch (op) {
    case NormOp::LayerNorm: return layer_norm(x, shape, w, b, kNormEps);
    case NormOp::RMSNorm: return rms_norm(x, shape, w, kNormEps);
    case NormOp::GeluExact: return layer_norm_gelu(x, shape, w, b, kNormEps);
    case NormOp::GeluTanh: return layer_norm_gelu(x, shape, w, b, kNormEps, GeluApproximation::Tanh);
  }
  return Tensor();
}

// Its composite twin, differentiated by the tape.
inline Tensor twin(NormOp op, const Tensor& x, const Shape& shape, const std::optional<Tensor>& w,
                   const std::optional<Tensor>& b) {
  switch (op) {
    case NormOp::LayerNorm: return composite::layer_norm(x, shape, w, b, kNormEps);
    case NormOp::RMSNorm: return composite::rms_norm(x, shape, w, kNormEps);
    case NormOp::GeluExact: return composite::layer_norm_gelu(x, shape, w, b, kNormEps);
    case NormOp::GeluTanh: return composite::layer_norm_gelu(x, shape, w, b, kNormEps, GeluApproximation::Tanh);
  }
  return Tensor();
}

}  // namespace test
}  // namespace minigrad
