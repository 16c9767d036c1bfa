#pragma once
// Anomaly mode: a debugging aid for backward. While a DetectAnomalyGuard is alive, every
// op recorded on the tape remembers where it was created, and backward checks every
// gradient a node returns for NaN and Inf; the first bad one is an error naming the forward
// op that made the node, its sequence number, its input shapes and where it was created.
// It costs a check per gradient (a copy to the host) and a backtrace per op, so it is off
// by default. Thread-local, like grad mode.
//
// Where an op was created is a backtrace taken when the op runs, turned into function names
// only if an error is reported. Names come from the executable's dynamic symbol table, so a
// program must be linked with -rdynamic (CMake: ENABLE_EXPORTS) for its own functions to be
// named; static functions and functions in anonymous namespaces never are (they show as an
// offset into the executable, which `addr2line -e <exe> <offset>` resolves).
#include <string>
#include <vector>

#include <minigrad/autograd/node.h>

namespace minigrad {
namespace autograd {

struct AnomalyMode {
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

// RAII, like NoGradGuard: anomaly mode on inside the scope.
class DetectAnomalyGuard {
 public:
  DetectAnomalyGuard();
  ~DetectAnomalyGuard();
  DetectAnomalyGuard(const DetectAnomalyGuard&) = delete;
  DetectAnomalyGuard& operator=(const DetectAnomalyGuard&) = delete;

 private:
  bool prev_;
};

// What a node recorded in anomaly mode knows about its forward call.
struct AnomalyMetadata {
  std::vector<TensorMeta> inputs;      // the forward's tensor inputs
  std::vector<void*> creation_frames;  // the call stack when the op ran, as return addresses
  // Where the forward op was called, formatted: the first few frames outside minigrad's own
  // machinery (Function<T>::apply, the public op functions), one per line.
  std::string creation_site() const;
};

// The engine calls this after a node's backward, in anomaly mode: an error if any of
// grad_inputs holds NaN or Inf.
void check_backward_anomaly(const Node& node, const tensor_list& grad_inputs);

}  // namespace autograd

using autograd::DetectAnomalyGuard;

}  // namespace minigrad
