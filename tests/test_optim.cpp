// optim: SGD (momentum, dampening, Nesterov, weight decay) and AdamW against their formulas
// written here in plain doubles, over 10 steps of random gradients; float32 master weights
// for bfloat16 parameters; parameter groups; clip_grad_norm_; the cosine schedule; the errors.
#include <cmath>
#include <optional>
#include <vector>

#include "tests/optim_group_checks.h"
#include "tests/test_support.h"

using namespace minigrad;
using namespace minigrad::test;

namespace {

constexpr int kSteps = 10;

// The same random gradients for the optimizer and for the reference: grads[step][element].
std::vector<std::vector<double>> random_gradients(int64_t n) {
  std::vector<std::vector<double>> grads;
  for (int s = 0; s < kSteps; ++s) grads.push_back(randn({n}, kFloat64).to_vector<double>());
  return grads;
}

}  // namespace

TEST_CASE("SGD against its formula over 10 steps, every option") {
  manual_seed(1100);
  const int64_t n = 7;
  const std::vector<double> start = randn({n}, kFloat64).to_vector<double>();
  const auto grads = random_gradients(n);
  const std::vector<optim::SGDOptions> cases = {
      {0.1, 0.0, 0.0, 0.0, false}, {0.1, 0.9, 0.0, 0.0, false}, {0.05, 0.9, 0.2, 0.01, false},
      {0.05, 0.8, 0.0, 0.1, true}};
  for (const optim::SGDOptions& o : cases) {
    CAPTURE(o.momentum);
    CAPTURE(o.nesterov);
    Tensor p = from_vector(start, {n}).requires_grad_();
    optim::SGD sgd({p}, o);
    std::vector<double> w = start, buf(static_cast<size_t>(n));
    for (int s = 0; s < kSteps; ++s) {
      p.mutable_grad() = from_vector(grads[static_cast<size_t>(s)], {n});
      sgd.step();
      for (size_t i = 0; i < w.size(); ++i) {
        double g = grads[static_cast<size_t>(s)][i] + o.weight_decay * w[i];
        if (o.momentum != 0.0) {
          buf[i] = s == 0 ? g : o.momentum * buf[i] + (1.0 - o.dampening) * g;
          g = o.nesterov ? g + o.momentum * buf[i] : buf[i];
        }
        w[i] -= o.lr * g;
      }
    }
    CHECK_ALLCLOSE(p.detach(), from_vector(w, {n}), 1e-13, 1e-14);
  }
}

TEST_CASE("AdamW against its formula over 10 steps, float64 and float32") {
  manual_seed(1101);
  const int64_t n = 9;
  const std::vector<double> start = randn({n}, kFloat64).to_vector<double>();
  const auto grads = random_gradients(n);
  const optim::AdamWOptions o{3e-2, 0.8, 0.95, 1e-6, 0.1};
  std::vector<double> w = start, m(static_cast<size_t>(n)), v(static_cast<size_t>(n));
  for (int s = 1; s <= kSteps; ++s) {
    for (size_t i = 0; i < w.size(); ++i) {
      const double g = grads[static_cast<size_t>(s - 1)][i];
      w[i] *= 1.0 - o.lr * o.weight_decay;
      m[i] = o.beta1 * m[i] + (1.0 - o.beta1) * g;
      v[i] = o.beta2 * v[i] + (1.0 - o.beta2) * g * g;
      const double m_hat = m[i] / (1.0 - std::pow(o.beta1, s));
      const double v_hat = v[i] / (1.0 - std::pow(o.beta2, s));
      w[i] -= o.lr * m_hat / (std::sqrt(v_hat) + o.eps);
    }
  }
  for (DType dtype : {kFloat64, kFloat32}) {
    CAPTURE(dtype);
    Tensor p = from_vector(start, {n}).to(dtype).requires_grad_();
    optim::AdamW adamw({p}, o);
    for (int s = 0; s < kSteps; ++s) {
      p.mutable_grad() = from_vector(grads[static_cast<size_t>(s)], {n}).to(dtype);
      adamw.step();
    }
    CHECK(adamw.steps_taken() == kSteps);
    const double tol = dtype == kFloat64 ? 1e-12 : 1e-5;
    CHECK_ALLCLOSE(p.detach().to(kFloat64), from_vector(w, {n}), tol, tol);
  }
}

TEST_CASE("optimizers: a bfloat16 parameter is updated through float32 master weights") {
  // 100 steps of 1e-4 on a parameter at 1: each is below bfloat16's spacing at 1 (2^-7), so
  // updating the bfloat16 value itself would leave it at 1; the master copy reaches 0.99.
  Tensor p = ones({4}, kBFloat16).requires_grad_();
  optim::SGD sgd({p}, optim::SGDOptions{1e-4});
  for (int s = 0; s < 100; ++s) {
    p.mutable_grad() = ones({4}, kBFloat16);
    sgd.step();
  }
  CHECK(p.dtype() == kBFloat16);
  CHECK_ALLCLOSE(p.detach().to(kFloat64), full({4}, 0.99, kFloat64), 0.0, 4e-3);
  CHECK(lt(p.detach(), 1.0).all().item<bool>());
}

TEST_CASE("optimizers: parameters without a gradient are left alone; zero_grad forgets gradients") {
  Tensor a = ones({2}).requires_grad_(), b = ones({2}).requires_grad_();
  optim::AdamW adamw({a, b}, optim::AdamWOptions{});
  a.mutable_grad() = ones({2});
  adamw.step();
  CHECK(lt(a.detach(), 1.0).all().item<bool>());
  CHECK(equal(b.detach(), ones({2})));
  adamw.zero_grad();
  CHECK(!a.grad().defined());
}

TEST_CASE("clip_grad_norm_: returns the total norm and scales the gradients to max_norm") {
  Tensor a = zeros({2}).requires_grad_(), b = zeros({1}).requires_grad_(), c = zeros({1}).requires_grad_();
  a.mutable_grad() = from_vector<float>({3.0f, 0.0f}, {2});
  b.mutable_grad() = from_vector<float>({4.0f}, {1});
  CHECK(optim::clip_grad_norm_({a, b, c}, 10.0) == doctest::Approx(5.0));  // under max_norm: unchanged
  CHECK(equal(b.grad(), from_vector<float>({4.0f}, {1})));
  CHECK(optim::clip_grad_norm_({a, b, c}, 1.0) == doctest::Approx(5.0));
  CHECK_ALLCLOSE(a.grad(), from_vector<float>({0.6f, 0.0f}, {2}), 1e-5, 1e-6);
  CHECK_ALLCLOSE(b.grad(), from_vector<float>({0.8f}, {1}), 1e-5, 1e-6);
}

TEST_CASE("CosineSchedule: linear warmup, half cosine to min_lr, min_lr after") {
  const optim::CosineSchedule s{1.0, 4, 14, 0.1};
  CHECK(s.lr(0) == doctest::Approx(0.25));
  CHECK(s.lr(3) == doctest::Approx(1.0));
  CHECK(s.lr(4) == doctest::Approx(1.0));
  CHECK(s.lr(9) == doctest::Approx(0.55));  // half way: (1 + 0.1) / 2
  CHECK(s.lr(14) == doctest::Approx(0.1));
  CHECK(s.lr(100) == doctest::Approx(0.1));
}

TEST_CASE("optimizers: errors name the optimizer and the argument") {
  Tensor p = ones({2}).requires_grad_();
  CHECK_THROWS_CONTAINING(optim::SGD({p * 2.0}, optim::SGDOptions{}), "optimizer: parameter 0 is not a leaf");
  CHECK_THROWS_CONTAINING(optim::SGD({p}, optim::SGDOptions{-1.0}), "the learning rate must be at least 0, got -1");
  CHECK_THROWS_CONTAINING(optim::SGD({p}, optim::SGDOptions{0.1, 0.0, 0.0, 0.0, true}),
                          "SGD: nesterov needs a momentum above 0 and no dampening");
  optim::AdamWOptions bad;
  bad.beta1 = 1.0;
  CHECK_THROWS_CONTAINING(optim::AdamW({p}, bad), "AdamW: betas must be in [0, 1), got (1, 0.999)");
}

TEST_CASE("optimizer: a parameter listed twice is an error") {
  const Tensor w = randn({3}).requires_grad_();
  CHECK_THROWS_CONTAINING(optim::SGD({w, randn({2}).requires_grad_(), w}, optim::SGDOptions{}),
                          "optimizer: parameters 0 and 2 are the same tensor; list each parameter once");
}

TEST_CASE("parameter groups: each group steps with its own weight decay, as an optimizer of its own would") {
  manual_seed(1102);
  check_groups_match_separate_optimizers<optim::AdamW>(optim::AdamWOptions{3e-2, 0.8, 0.95, 1e-6, 0.1}, kCPU, 10);
  check_groups_match_separate_optimizers<optim::SGD>(optim::SGDOptions{0.05, 0.9, 0.0, 0.1, true}, kCPU, 10);
  Tensor p = ones({2}).requires_grad_();
  CHECK_THROWS_CONTAINING(optim::AdamW({optim::ParamGroup{{p}, -0.5}}, optim::AdamWOptions{}),
                          "optimizer: parameter group 0's weight_decay must be at least 0, got -0.5");
  // A parameter in two groups is listed twice.
  CHECK_THROWS_CONTAINING(optim::SGD({optim::ParamGroup{{p}, std::nullopt}, optim::ParamGroup{{p}, 0.0}},
                                     optim::SGDOptions{}),
                          "optimizer: parameters 0 and 1 are the same tensor");
}
