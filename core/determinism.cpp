#include <minigrad/core/determinism.h>

#include <atomic>

namespace minigrad {
namespace {
std::atomic<bool> deterministic_algorithms{false};
}

void use_deterministic_algorithms(bool on) { deterministic_algorithms.store(on, std::memory_order_relaxed); }
bool are_deterministic_algorithms_enabled() { return deterministic_algorithms.load(std::memory_order_relaxed); }

}  // namespace minigrad
