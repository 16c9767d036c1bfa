#pragma once
// scaled_dot_product_attention on the GPU (cuda/flash_attention.cu), called by
// ops/attention.cpp: FlashAttention-2's forward and backward on tensor cores, never storing
// a [Sq, Sk] score matrix. Plain C++; on the current stream of the tensors' device.
#include <cstdint>

#include <minigrad/core/tensor.h>
#include <minigrad/kernels/dropout.h>

namespace minigrad {
namespace cuda {

// What attention applies besides q, k and v, on either device (ops/attention.cpp fills it).
struct AttentionSpec {
  double scale = 1.0;
  Tensor mask;  // undefined, bool (false masks out) or additive; broadcasts to [B, Hq, Sq, Sk]
  bool is_causal = false;
  bool drop = false;
  dropout_bits::Mask dropout;  // the scores' dropout when drop: score (b, h, i, j) is element
                               // ((b * Hq + h) * Sq + i) * Sk + j of the stream
  int64_t group = 1;           // query heads per key/value head (grouped-query attention)
};

// Whether the kernels run attention on these inputs: float16 or bfloat16, one head dim of 64
// or 128 for q, k and v. Anything else runs as the composite twin on the GPU.
bool flash_attention_supports(DType dtype, int64_t head_dim, int64_t value_dim);

// O = dropout(softmax(scale * Q K^T + mask)) V and each query row's log-sum-exp of its
// scores (+inf for a row whose every key is masked out; its O row is 0). q [B, Hq, Sq, D],
// k and v [B, Hk, Sk, D], Hq = Hk * spec.group, any strides with a contiguous last dim. out
// [B, Hq, Sq, D] of q's dtype and log_sum_exp [B, Hq, Sq] float32, both contiguous.
void flash_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionSpec& spec,
                             const Tensor& out, const Tensor& log_sum_exp);

// dQ, dK, dV (contiguous, the shapes and dtype of q, k, v) from grad (O's gradient) and what
// the forward saved: out and log_sum_exp. In one pass, dQ summed by float32 atomic adds (its
// last bits may differ from run to run), or with use_deterministic_algorithms on in two
// passes without atomics (the same bits every run).
void flash_attention_backward(const Tensor& grad, const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor& out, const Tensor& log_sum_exp, const AttentionSpec& spec,
                              const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v);

}  // namespace cuda
}  // namespace minigrad
