// The optimizers of optim/optim.h. On the CPU each step is a few in-place tensor ops per
// parameter; on CUDA the parameters are grouped by device and dtype and each group is one
// call into cuda/optim.h, whose kernels evaluate the same ops, in the same order, for many
// tensors per launch.
#include <minigrad/optim/optim.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>
#include <utility>

#include <minigrad/autograd/grad_mode.h>
#include <minigrad/core/error.h>
#include <minigrad/cuda/optim.h>
#include <minigrad/ops/ops.h>

namespace minigrad {
namespace optim {
namespace {

// The parameters with a gradient, split by how a step updates them: groups of CUDA
// parameters of one device, dtype and weight decay (the kernels take one decay a launch),
// each updated by one multi-tensor call, and the rest (CPU parameters, and the rare layouts
// the kernels do not take), one at a time with tensor ops.
struct StepPlan {
  struct CudaGroup {
    double weight_decay;
    std::vector<size_t> indices;
  };
  std::vector<CudaGroup> cuda_groups;
  std::vector<size_t> one_at_a_time;
};

StepPlan plan_step(const std::vector<Tensor>& params, const std::vector<double>& weight_decays) {
  StepPlan plan;
  // Ordered: the same launches every run.
  std::map<std::tuple<int, DType, double>, std::vector<size_t>> groups;
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    const Tensor& g = p.grad();
    if (!g.defined()) continue;
    // The kernels write a parameter through its flat memory and read its gradient in its own
    // dtype; a view with gaps, or a gradient of another dtype or device (which the tensor ops
    // convert, or refuse with a clear error), takes the tensor ops.
    if (p.device().is_cuda() && p.is_contiguous() && g.device() == p.device() && g.dtype() == p.dtype())
      groups[{p.device().index, p.dtype(), weight_decays[i]}].push_back(i);
    else
      plan.one_at_a_time.push_back(i);
  }
  for (auto& entry : groups) plan.cuda_groups.push_back({std::get<2>(entry.first), std::move(entry.second)});
  return plan;
}

std::vector<ParamGroup> one_group(std::vector<Tensor> params) { return {ParamGroup{std::move(params), std::nullopt}}; }

// The gradient as the kernels read it: contiguous (a copy where it is not; never written).
Tensor contiguous_grad(const Tensor& p) {
  const Tensor& g = p.grad();
  return g.is_contiguous() ? g : g.contiguous();
}

}  // namespace

Optimizer::Optimizer(std::vector<ParamGroup> groups, double lr) : lr_(lr) {
  MG_CHECK(lr >= 0.0, "optimizer: the learning rate must be at least 0, got {}", lr);
  for (size_t k = 0; k < groups.size(); ++k) {
    MG_CHECK(groups[k].weight_decay.value_or(0.0) >= 0.0,
             "optimizer: parameter group {}'s weight_decay must be at least 0, got {}", k, *groups[k].weight_decay);
    for (Tensor& p : groups[k].params) {
      params_.push_back(std::move(p));
      weight_decays_.push_back(groups[k].weight_decay);
    }
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    MG_CHECK(params_[i].defined() && is_floating(params_[i].dtype()),
             "optimizer: parameter {} must be a defined floating tensor", i);
    MG_CHECK(params_[i].is_leaf(), "optimizer: parameter {} is not a leaf (it has a grad_fn): optimize the tensor "
                                   "it was computed from",
             i);
    // A parameter listed twice (a weight shared by two modules, collected from both) would be
    // stepped twice per step, and on the GPU updated by two blocks of one launch at once.
    for (size_t j = 0; j < i; ++j)
      MG_CHECK(!params_[i].is_same(params_[j]),
               "optimizer: parameters {} and {} are the same tensor; list each parameter once", j, i);
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

std::vector<double> Optimizer::weight_decays(double options_weight_decay) const {
  std::vector<double> out;
  for (const std::optional<double>& d : weight_decays_) out.push_back(d.value_or(options_weight_decay));
  return out;
}

SGD::SGD(std::vector<Tensor> params, SGDOptions options) : SGD(one_group(std::move(params)), options) {}

SGD::SGD(std::vector<ParamGroup> groups, SGDOptions options)
    : Optimizer(std::move(groups), options.lr), options_(options) {
  MG_CHECK(options.momentum >= 0.0 && options.weight_decay >= 0.0,
           "SGD: momentum and weight_decay must be at least 0, got {} and {}", options.momentum, options.weight_decay);
  MG_CHECK(!options.nesterov || (options.momentum > 0.0 && options.dampening == 0.0),
           "SGD: nesterov needs a momentum above 0 and no dampening");
  momentum_buffers_.resize(params_.size());
}

void SGD::step() {
  NoGradGuard no_grad;
  const std::vector<double> decays = weight_decays(options_.weight_decay);
  const StepPlan plan = plan_step(params_, decays);
  const bool has_momentum = options_.momentum != 0.0;
  for (const StepPlan::CudaGroup& group : plan.cuda_groups) {
    // Parameters whose momentum buffer is new take their first step (buf = g) in a launch of
    // their own: usually all of them at step 1 and none after.
    std::vector<size_t> first_step, later_step;
    for (size_t i : group.indices) {
      Tensor& w = master(i);
      if (has_momentum && !momentum_buffers_[i].defined()) {
        momentum_buffers_[i] = empty_like(w);  // every element written by the first step
        first_step.push_back(i);
      } else {
        later_step.push_back(i);
      }
    }
    for (const std::vector<size_t>* indices : {&first_step, &later_step}) {
      if (indices->empty()) continue;
      std::vector<Tensor> params, masters, grads, buffers;
      for (size_t i : *indices) {
        params.push_back(params_[i]);
        if (masters_[i].defined()) masters.push_back(masters_[i]);
        grads.push_back(contiguous_grad(params_[i]));
        if (has_momentum) buffers.push_back(momentum_buffers_[i]);
      }
      cuda::sgd_step(params, masters, grads, buffers,
                     {lr_, options_.momentum, options_.dampening, group.weight_decay, options_.nesterov,
                      indices == &first_step});
      for (size_t i : *indices) {
        bump_version(params_[i]);
        if (masters_[i].defined()) bump_version(masters_[i]);
        if (has_momentum) bump_version(momentum_buffers_[i]);
      }
    }
  }
  for (size_t i : plan.one_at_a_time) {
    Tensor& w = master(i);
    Tensor g = params_[i].grad().to(w.dtype());  // may be the gradient itself: never written
    if (decays[i] != 0.0) g = g + w * decays[i];
    if (has_momentum) {
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

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options) : AdamW(one_group(std::move(params)), options) {}

AdamW::AdamW(std::vector<ParamGroup> groups, AdamWOptions options)
    : Optimizer(std::move(groups), options.lr), options_(options) {
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
  // p *= 1 - lr * weight_decay, with the parameter's group's weight decay.
  auto decay_factor = [this](double weight_decay) { return 1.0 - lr_ * weight_decay; };
  const std::vector<double> decays = weight_decays(options_.weight_decay);
  const StepPlan plan = plan_step(params_, decays);
  for (const StepPlan::CudaGroup& group : plan.cuda_groups) {
    std::vector<Tensor> params, masters, grads, exp_avg, exp_avg_sq;
    for (size_t i : group.indices) {
      Tensor& w = master(i);
      if (!exp_avg_[i].defined()) {
        exp_avg_[i] = zeros_like(w);
        exp_avg_sq_[i] = zeros_like(w);
      }
      params.push_back(params_[i]);
      if (masters_[i].defined()) masters.push_back(masters_[i]);
      grads.push_back(contiguous_grad(params_[i]));
      exp_avg.push_back(exp_avg_[i]);
      exp_avg_sq.push_back(exp_avg_sq_[i]);
    }
    cuda::adamw_step(params, masters, grads, exp_avg, exp_avg_sq,
                     {decay_factor(group.weight_decay), options_.beta1, options_.beta2, step_size,
                      sqrt_bias_correction2, options_.eps});
    for (size_t i : group.indices) {
      bump_version(params_[i]);
      if (masters_[i].defined()) bump_version(masters_[i]);
      bump_version(exp_avg_[i]);
      bump_version(exp_avg_sq_[i]);
    }
  }
  for (size_t i : plan.one_at_a_time) {
    Tensor& w = master(i);
    const Tensor g = params_[i].grad().to(w.dtype());
    if (!exp_avg_[i].defined()) {
      exp_avg_[i] = zeros_like(w);
      exp_avg_sq_[i] = zeros_like(w);
    }
    w.mul_(decay_factor(decays[i]));
    exp_avg_[i].mul_(options_.beta1).add_(g, 1.0 - options_.beta1);
    exp_avg_sq_[i].mul_(options_.beta2).add_(g * g, 1.0 - options_.beta2);
    const Tensor denominator = sqrt(exp_avg_sq_[i]) / sqrt_bias_correction2 + options_.eps;
    w.add_(exp_avg_[i] / denominator, -step_size);
    write_back(i);
  }
}

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm) {
  NoGradGuard no_grad;
  // CUDA gradients of one device and dtype: one multi-tensor sum of squares, one scaling.
  std::map<std::pair<int, DType>, std::vector<Tensor>> cuda_grads;
  // Each device's sum of squares stays on its device until the end: one .item() per device.
  std::map<std::pair<DeviceType, int>, Tensor> square_by_device;
  auto add_square = [&square_by_device](const Tensor& square) {
    Tensor& total = square_by_device[{square.device().type, square.device().index}];
    total = total.defined() ? total + square : square;
  };
  for (const Tensor& p : params) {
    const Tensor& g = p.grad();
    if (!g.defined()) continue;
    if (g.device().is_cuda()) {
      cuda_grads[{g.device().index, g.dtype()}].push_back(g);
      continue;
    }
    const Tensor g64 = g.to(kFloat64);
    add_square(sum(g64 * g64));
  }
  for (const auto& entry : cuda_grads) {
    std::vector<Tensor> contiguous;  // a copy of a strided gradient; the gradient itself otherwise
    for (const Tensor& g : entry.second) contiguous.push_back(g.is_contiguous() ? g : g.contiguous());
    add_square(cuda::sum_of_squares(contiguous));
  }
  if (square_by_device.empty()) return 0.0;
  double total_square = 0.0;
  for (const auto& entry : square_by_device) total_square += entry.second.item<double>();
  const double total = std::sqrt(total_square);
  const double coefficient = max_norm / (total + 1e-6);
  if (coefficient >= 1.0) return total;
  for (const Tensor& p : params) {
    const Tensor& g = p.grad();
    if (!g.defined()) continue;
    if (g.device().is_cuda() && g.is_contiguous()) continue;  // scaled below, many at a time
    Tensor(g).mul_(coefficient);
  }
  for (const auto& entry : cuda_grads) {
    std::vector<Tensor> contiguous;
    for (const Tensor& g : entry.second)
      if (g.is_contiguous()) contiguous.push_back(g);
    cuda::scale_(contiguous, coefficient);
    for (const Tensor& g : contiguous) bump_version(g);
  }
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
