#pragma once
// Whether ops must give the same bits on every run, as torch.use_deterministic_algorithms.
//
// Every minigrad op is deterministic whatever this says (sums run in a fixed order, scatters
// keep a fixed winner), except one: scaled_dot_product_attention's backward on the GPU. Its
// fast form, FlashAttention-2's, adds each key tile's share of dQ into a float32 buffer with
// atomic adds, whose order (and so the rounding of the sum) changes from run to run. With
// deterministic algorithms on, it runs a second pass that owns the query rows and sums dQ in
// registers instead: the same bits every run, for the price of computing the scores again.
//
// Off by default, as in PyTorch. Process-wide; read when an op runs.
namespace minigrad {

void use_deterministic_algorithms(bool on);
bool are_deterministic_algorithms_enabled();

// RAII: deterministic algorithms on (or off) inside the scope, the earlier setting after it.
class DeterministicAlgorithmsGuard {
 public:
  explicit DeterministicAlgorithmsGuard(bool on = true) : previous_(are_deterministic_algorithms_enabled()) {
    use_deterministic_algorithms(on);
  }
  ~DeterministicAlgorithmsGuard() { use_deterministic_algorithms(previous_); }
  DeterministicAlgorithmsGuard(const DeterministicAlgorithmsGuard&) = delete;
  DeterministicAlgorithmsGuard& operator=(const DeterministicAlgorithmsGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace minigrad
