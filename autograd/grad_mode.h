#pragma once
// Grad mode: whether ops record themselves on the tape. Thread-local, as in PyTorch.
namespace minigrad {

struct GradMode {
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

// RAII: no recording inside the scope (optimizer steps, evaluation, Function::forward).
class NoGradGuard {
 public:
  NoGradGuard() : prev_(GradMode::is_enabled()) { GradMode::set_enabled(false); }
  ~NoGradGuard() { GradMode::set_enabled(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

}  // namespace minigrad
