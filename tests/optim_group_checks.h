#pragma once
// The parameter-group check shared by test_optim (CPU) and test_cuda_optim (GPU, where the
// groups become launches of their own).
#include <optional>
#include <vector>

#include "tests/test_support.h"

namespace minigrad {
namespace test {

// Steps `grouped` (one optimizer, two parameter groups) and one optimizer per group (the
// second with the group's weight decay in its options) on the same gradients: the parameters
// must come out the same bits. A group's decay ignored, or the options' decay not applied to
// the group without one, changes the bits of that group's parameters.
template <class Optimizer, class Options>
void check_groups_match_separate_optimizers(const Options& options, Device device, int steps) {
  const std::vector<Tensor> start = {randn({5}, kFloat64), randn({3, 4}, kFloat64), randn({6}, kFloat64)};
  auto leaves = [&] {
    std::vector<Tensor> out;
    for (const Tensor& t : start) out.push_back(t.clone().to(device).requires_grad_());  // a tensor of its own
    return out;
  };
  std::vector<Tensor> a = leaves(), b = leaves();
  Options no_decay = options;
  no_decay.weight_decay = 0.0;
  // Group 0 takes the options' weight decay; group 1 none.
  Optimizer grouped({optim::ParamGroup{{a[0], a[1]}, std::nullopt}, optim::ParamGroup{{a[2]}, 0.0}}, options);
  Optimizer decayed({b[0], b[1]}, options);
  Optimizer undecayed({b[2]}, no_decay);
  for (int s = 0; s < steps; ++s) {
    for (size_t i = 0; i < start.size(); ++i) {
      const Tensor g = randn(start[i].sizes(), kFloat64).to(device);
      a[i].mutable_grad() = g.clone();
      b[i].mutable_grad() = g.clone();
    }
    grouped.step();
    decayed.step();
    undecayed.step();
  }
  for (size_t i = 0; i < start.size(); ++i) {
    CAPTURE(i);
    CHECK(same_bits(a[i].detach().cpu(), b[i].detach().cpu()));
  }
}

}  // namespace test
}  // namespace minigrad
