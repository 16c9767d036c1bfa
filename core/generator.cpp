#include <minigrad/core/generator.h>

namespace minigrad {

void Generator::manual_seed(uint64_t seed) {
  std::lock_guard<std::mutex> lock(mutex_);
  seed_ = seed;
  offset_ = 0;
}

uint64_t Generator::seed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return seed_;
}

uint64_t Generator::offset() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return offset_;
}

Generator::Stream Generator::reserve() {
  std::lock_guard<std::mutex> lock(mutex_);
  return Stream{seed_, offset_++};
}

Generator& default_generator() {
  static Generator g;
  return g;
}

}  // namespace minigrad
