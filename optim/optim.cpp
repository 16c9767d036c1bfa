// The optimizers of optim/optim.h: each step a few in-place tensor ops per parameter.
#include <minigrad/optim/optim.h>

#include <algorithm>
#include <cmath>

#include <minigrad/autograd/grad_mode.h>
#include <minigrad/core/error.h>
#include <minigrad/ops/ops.h>

namespace minigrad {
namespace optim {

Optimizer::Optimizer(std::vector<Tensor> params, double lr) : params_(std::move(params)), lr_(lr) {
  MG_CHECK(lr >= 0.0, "optimizer: the learning rate must be at least 0, got {}", lr);
  for (size_t i = 0; i < params_.size(); ++i) {
    MG_CHECK(params_[i].defined() && is_floating(params_[i].dtype()),
             "optimizer: parameter {} must be a defined floating tensor", i);
    MG_CHECK(params_[i].is_leaf(), "optimizer: parameter {} is not a leaf (it has a grad_fn): optimize the tensor "
                                   "it was computed from",
             i);
  }
  masters_.resize(params_.size());
}

void Optimizer::zero_grad() {
  for (Tensor& p : params_) p.mutable_grad() = Tensor();
}

Tensor& Optimizer::master(size_t i) {
  if (!is_half(params_[i].dtype())) return params_[i];
  if (!masters_[i].defined()) masters_[i] = params_[i].detach().to(kFloat32);
  return masters_[i];
}

void Optimizer::write_back(size_t i) {
  if (masters_[i].defined()) params_[i].copy_(masters_[i]);
}

SGD::SGD(std::vector<Tensor> params, SGDOptions options) : Optimizer(std::move(params), options.lr), options_(options) {
  MG_CHECK(options.momentum >= 0.0 && options.weight_decay >= 0.0,
           "SGD: momentum and weight_decay must be at least 0, got {} and {}", options.momentum, options.weight_decay);
  MG_CHECK(!options.nesterov || (options.momentum > 0.0 && options.dampening == 0.0),
           "SGD: nesterov needs a momentum above 0 and no dampening");
  momentum_buffers_.resize(params_.size());
}

void SGD::step() {
  NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].grad().defined()) continue;
    Tensor& w = master(i);
    Tensor g = params_[i].grad().to(w.dtype());  // may be the gradient itself: never written
    if (options_.weight_decay != 0.0) g = g + w * options_.weight_decay;
    if (options_.momentum != 0.0) {
      Tensor& buf = momentum_buffers_[i];
      if (!buf.defined())
        buf = g.clone();
      else
        buf.mul_(options_.momentum).add_(g, 1.0 - options_.dampening);
      g = options_.nesterov ? g + buf * options_.momentum : buf;
    }
    w.add_(g, -lr_);
    write_back(i);
  }
}

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options)
    : Optimizer(std::move(params), options.lr), options_(options) {
  MG_CHECK(options.beta1 >= 0.0 && options.beta1 < 1.0 && options.beta2 >= 0.0 && options.beta2 < 1.0,
           "AdamW: betas must be in [0, 1), got ({}, {})", options.beta1, options.beta2);
  MG_CHECK(options.eps >= 0.0 && options.weight_decay >= 0.0, "AdamW: eps and weight_decay must be at least 0");
  exp_avg_.resize(params_.size());
  exp_avg_sq_.resize(params_.size());
}

void AdamW::step() {
  NoGradGuard no_grad;
  ++step_;
  const double t = static_cast<double>(step_);
  const double bias_correction1 = 1.0 - std::pow(options_.beta1, t);
  const double bias_correction2 = 1.0 - std::pow(options_.beta2, t);
  const double step_size = lr_ / bias_correction1;
  const double sqrt_bias_correction2 = std::sqrt(bias_correction2);
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].grad().defined()) continue;
    Tensor& w = master(i);
    const Tensor g = params_[i].grad().to(w.dtype());
    if (!exp_avg_[i].defined()) {
      exp_avg_[i] = zeros_like(w);
      exp_avg_sq_[i] = zeros_like(w);
    }
    w.mul_(1.0 - lr_ * options_.weight_decay);
    exp_avg_[i].mul_(options_.beta1).add_(g, 1.0 - options_.beta1);
    exp_avg_sq_[i].mul_(options_.beta2).add_(g * g, 1.0 - options_.beta2);
    const Tensor denominator = sqrt(exp_avg_sq_[i]) / sqrt_bias_correction2 + options_.eps;
    w.add_(exp_avg_[i] / denominator, -step_size);
    write_back(i);
  }
}

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm) {
  NoGradGuard no_grad;
  Tensor total_square;  // on the gradients' device: one .item() at the end
  for (const Tensor& p : params) {
    if (!p.grad().defined()) continue;
    const Tensor g = p.grad().to(kFloat64);
    const Tensor square = sum(g * g);
    total_square = total_square.defined() ? total_square + square : square;
  }
  if (!total_square.defined()) return 0.0;
  const double total = std::sqrt(total_square.item<double>());
  const double coefficient = max_norm / (total + 1e-6);
  if (coefficient < 1.0)
    for (const Tensor& p : params)
      if (p.grad().defined()) Tensor(p.grad()).mul_(coefficient);
  return total;
}

double CosineSchedule::lr(int64_t step) const {
  if (step < warmup_steps) return base_lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  if (step >= total_steps) return min_lr;
  const double progress =
      static_cast<double>(step - warmup_steps) / static_cast<double>(std::max<int64_t>(total_steps - warmup_steps, 1));
  constexpr double kPi = 3.14159265358979323846;
  return min_lr + 0.5 * (base_lr - min_lr) * (1.0 + std::cos(kPi * progress));
}

}  // namespace optim
}  // namespace minigrad
