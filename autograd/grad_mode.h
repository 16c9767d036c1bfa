#pragma once
// Grad mode: whether ops record themselves on the tape. Thread-local, as in PyTorch.
namespace minigrad {

struct GradMode {
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

// RAII: grad mode set to `enabled` inside the scope, restored after (the engine turns it on
// for a backward with create_graph and off otherwise).
class AutoGradMode {
 public:
  explicit AutoGradMode(bool enabled) : prev_(GradMode::is_enabled()) { GradMode::set_enabled(enabled); }
  ~AutoGradMode() { GradMode::set_enabled(prev_); }
  AutoGradMode(const AutoGradMode&) = delete;
  AutoGradMode& operator=(const AutoGradMode&) = delete;

 private:
  bool prev_;
};

// RAII: no recording inside the scope (optimizer steps, evaluation, Function::forward).
class NoGradGuard : public AutoGradMode {
 public:
  NoGradGuard() : AutoGradMode(false) {}
};

}  // namespace minigrad
