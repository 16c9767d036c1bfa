#pragma once
// Generator: a seed and a running offset into the Philox stream. Each random op reserves
// a fresh offset, so two calls never reuse numbers and a seeded program is reproducible.
//
// Thread-safe: random ops may run on several threads at once (data loaders, a training
// loop next to an evaluation). A reservation reads the seed and takes the next offset as
// one step under a lock, so two threads never get the same stream, and no thread pairs
// the old seed with an offset counted after a concurrent manual_seed.
#include <cstdint>
#include <mutex>

namespace minigrad {

class Generator {
 public:
  // What one random op draws from: the Philox key and its own stream (2^64 blocks of four words).
  struct Stream {
    uint64_t seed;
    uint64_t offset;
  };

  explicit Generator(uint64_t seed = 0x5eed) : seed_(seed) {}
  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;

  void manual_seed(uint64_t seed);
  uint64_t seed() const;
  uint64_t offset() const;  // the offset the next reservation will get
  // Reserves one stream for one op.
  Stream reserve();

 private:
  mutable std::mutex mutex_;
  uint64_t seed_;
  uint64_t offset_ = 0;
};

Generator& default_generator();
inline void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

}  // namespace minigrad
