#pragma once
// Whether ops must give the same bits on every run, as torch.use_deterministic_algorithms.
//
// Every minigrad op is deterministic whatever this says (sums run in a fixed order, scatters
// keep a fixed winner) but one: scaled_dot_product_attention's GPU backward (the flash kernels)
// sums dQ with FlashAttention-2's float32 atomic adds, whose order, and so dQ's last bits, may
// change from run to run. While this is on, it sums dQ in a pass of its own instead (two
// passes, slower: cuda/flash_attention.cu). The contract for any op given a faster,
// nondeterministic form: that form runs only while this is off.
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
