#pragma once
// Optimizers, gradient clipping and a learning-rate schedule, with PyTorch's names,
// arguments and formulas (torch::optim::SGD, torch::optim::AdamW,
// torch::nn::utils::clip_grad_norm_).
//
// On the CPU each step is written with tensor ops in place, under NoGradGuard, one parameter
// at a time: the reference, and the form to read first. On CUDA the parameters with a
// gradient are grouped by device and dtype, and each group is updated by the multi-tensor
// kernels of cuda/optim.h: one pass over each parameter's p, g and state per step, many
// tensors per launch, with the same operations in the same order as the tensor ops, each
// rounded as they round it. clip_grad_norm_ sums the squares of a group's gradients the same way, then scales
// them in one more pass when clipping. A CUDA parameter that is not contiguous, or whose
// gradient has another dtype, takes the tensor ops.
//
// Parameters of float16/bfloat16 are updated through a float32 copy kept in the optimizer's
// state (the "master weights"): an update smaller than the parameter's rounding step would
// otherwise be lost, and a long run's small steps with it. On CUDA the kernel writes the
// rounded value into the parameter in the same pass as the update.
#include <cstdint>
#include <optional>
#include <vector>

#include <minigrad/core/tensor.h>

namespace minigrad {
namespace optim {

// Parameters with a weight decay of their own: PyTorch's parameter groups, for the option
// they are most used for. A transformer usually decays its matrices and not its biases or
// normalization weights:
//   AdamW({{matrices}, {vectors, /*weight_decay=*/0.0}}, AdamWOptions{...});
struct ParamGroup {
  std::vector<Tensor> params;
  std::optional<double> weight_decay;  // none: the optimizer options' weight_decay
};

// What every optimizer shares: the parameters, the learning rate, zero_grad.
class Optimizer {
 public:
  Optimizer(std::vector<ParamGroup> groups, double lr);
  virtual ~Optimizer() = default;
  // One update of every parameter that has a gradient (one without is left as it is).
  virtual void step() = 0;
  // Forgets every parameter's gradient (set to none, as PyTorch's default).
  void zero_grad();
  double lr() const { return lr_; }
  void set_lr(double lr) { lr_ = lr; }
  const std::vector<Tensor>& params() const { return params_; }

 protected:
  // The float32 value a step updates: the parameter itself, or its master copy (float16 and
  // bfloat16), made at the first step. write_back copies a master copy into the parameter.
  Tensor& master(size_t i);
  void write_back(size_t i);
  // Each parameter's weight decay: its group's, or the options' where its group has none.
  std::vector<double> weight_decays(double options_weight_decay) const;

  std::vector<Tensor> params_;
  std::vector<std::optional<double>> weight_decays_;  // each parameter's group's
  std::vector<Tensor> masters_;  // undefined for float32 and float64 parameters
  double lr_;
};

// SGD with momentum (PyTorch's form: buf = momentum * buf + (1 - dampening) * g, the first
// step's buf = g), Nesterov momentum, and L2 weight decay added to the gradient.
struct SGDOptions {
  double lr = 1e-2;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, SGDOptions options);
  SGD(std::vector<ParamGroup> groups, SGDOptions options);
  void step() override;

 private:
  SGDOptions options_;
  std::vector<Tensor> momentum_buffers_;
};

// AdamW (Loshchilov & Hutter): Adam's moments with bias correction, and the weight decay
// applied to the parameter directly (p -= lr * weight_decay * p), not through the gradient:
//   p = p * (1 - lr * wd)
//   m = b1 * m + (1 - b1) * g,   v = b2 * v + (1 - b2) * g^2
//   p = p - lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
};

class AdamW : public Optimizer {
 public:
  AdamW(std::vector<Tensor> params, AdamWOptions options);
  AdamW(std::vector<ParamGroup> groups, AdamWOptions options);
  void step() override;
  int64_t steps_taken() const { return step_; }

 private:
  AdamWOptions options_;
  int64_t step_ = 0;
  std::vector<Tensor> exp_avg_, exp_avg_sq_;  // m and v, float32 (float64 for float64 parameters)
};

// Scales every gradient by max_norm / total_norm when the total 2-norm of all of them
// together exceeds max_norm; returns the total norm (before clipping). One synchronization
// with the device, for the norm.
double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm);

// The learning rate of step `step` (counted from 0): a linear warmup, base_lr * (step + 1) /
// warmup_steps, up to base_lr at step warmup_steps - 1; then a half cosine from base_lr down
// to min_lr at step total_steps; min_lr after.
struct CosineSchedule {
  double base_lr;
  int64_t warmup_steps;
  int64_t total_steps;
  double min_lr = 0.0;
  double lr(int64_t step) const;
};

}  // namespace optim
}  // namespace minigrad
