#pragma once
// Generator: a seed and a running offset into the Philox stream. Each random op reserves
// a fresh offset, so two calls never reuse numbers and a seeded program is reproducible.
#include <cstdint>

namespace minigrad {

class Generator {
 public:
  explicit Generator(uint64_t seed = 0x5eed) : seed_(seed) {}
  void manual_seed(uint64_t seed) { seed_ = seed; offset_ = 0; }
  uint64_t seed() const { return seed_; }
  uint64_t offset() const { return offset_; }
  // Reserves one stream (2^64 blocks of four words) for one op and returns its offset.
  uint64_t next_offset() { return offset_++; }

 private:
  uint64_t seed_;
  uint64_t offset_ = 0;
};

Generator& default_generator();
inline void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

}  // namespace minigrad
