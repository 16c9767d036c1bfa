#pragma once
// The optimizers' steps on the GPU (cuda/optim.cu), called by optim/optim.cpp: AdamW, SGD,
// and the two halves of clip_grad_norm_ (the sum of squares, the scaling).
//
// Each call takes lists of tensors, entry i of every list belonging to parameter i, and
// updates all of them in a few launches ("multi-tensor apply"): the tensors are cut into
// chunks, and one launch passes the pointers of up to a hundred tensors to a kernel whose
// blocks take one chunk each. A model has hundreds of parameter tensors, many of them small
// (a LayerNorm's 768 weights); a launch per tensor and per tensor op would cost more than
// the update itself.
//
// Every tensor of one call is contiguous, on one device, and every list but the master
// copies has one dtype (float32, float64, float16 or bfloat16); optim/optim.cpp groups the
// parameters so. Runs on the current stream of that device; nothing waits for the GPU except
// sum_of_squares' caller, when it reads the value.
#include <vector>

#include <minigrad/core/tensor.h>

namespace minigrad {
namespace cuda {

// The numbers of one AdamW step, as optim/optim.cpp computes them on the host.
struct AdamWStep {
  double decay;                  // 1 - lr * weight_decay
  double beta1, beta2;
  double step_size;              // lr / (1 - beta1^t)
  double sqrt_bias_correction2;  // sqrt(1 - beta2^t)
  double eps;
};

// One AdamW step of every parameter, per element:
//   w = w * decay;  m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2
//   w = w - step_size * m / (sqrt(v) / sqrt_bias_correction2 + eps)
// in float (double for float64 parameters), each operation rounded as the CPU's tensor ops
// round it. w is the parameter itself for float32 and float64; for float16 and bfloat16 it is
// masters[i] (float32), and the parameter receives w rounded to its dtype in the same pass.
// masters is empty for float32 and float64. grads in the parameters' dtype; exp_avg and
// exp_avg_sq in w's dtype.
void adamw_step(const std::vector<Tensor>& params, const std::vector<Tensor>& masters, const std::vector<Tensor>& grads,
                const std::vector<Tensor>& exp_avg, const std::vector<Tensor>& exp_avg_sq, const AdamWStep& step);

// The options of one SGD step (optim::SGDOptions, with the step's learning rate).
struct SGDStep {
  double lr;
  double momentum;      // 0: no momentum buffers (momentum_buffers is empty)
  double dampening;
  double weight_decay;
  bool nesterov;
  bool first_step;      // the buffers are new: buf = g (PyTorch's first step), not read
};

// One SGD step of every parameter, per element, with w as in adamw_step:
//   g = g + weight_decay * w                                        (when weight_decay != 0)
//   buf = g on the first step, else buf = momentum buf + (1 - dampening) g
//   g = nesterov ? g + momentum buf : buf                           (when momentum != 0)
//   w = w - lr g
// momentum_buffers in w's dtype.
void sgd_step(const std::vector<Tensor>& params, const std::vector<Tensor>& masters, const std::vector<Tensor>& grads,
              const std::vector<Tensor>& momentum_buffers, const SGDStep& step);

// The sum of the squares of every element of `tensors` (one floating dtype), accumulated in
// double: a float64 tensor of one element on their device. The same bits on every run: each
// block writes its partial sum to a buffer and one block adds the partials in a fixed order
// (no atomics, whose order would vary).
Tensor sum_of_squares(const std::vector<Tensor>& tensors);

// x = x * factor for every x of `tensors` (one floating dtype), in x's compute type as
// Tensor::mul_ computes it.
void scale_(const std::vector<Tensor>& tensors, double factor);

}  // namespace cuda
}  // namespace minigrad
