#pragma once
// Philox4x32-10 (Salmon et al., "Parallel Random Numbers: As Easy as 1, 2, 3", SC'11):
// a counter-based generator. Element i of a random tensor is a pure function of
// (seed, offset, i), so the CPU and a CUDA kernel with any launch shape draw the same
// numbers, and dropout masks agree bit for bit. Written once, for host and device.
#include <cstdint>

#include <minigrad/core/macros.h>

namespace minigrad {
namespace philox {

struct Uint4 {
  uint32_t x, y, z, w;
};

MG_HOST_DEVICE uint32_t mulhilo(uint32_t a, uint32_t b, uint32_t* hi) {
  uint64_t p = static_cast<uint64_t>(a) * b;
  *hi = static_cast<uint32_t>(p >> 32);
  return static_cast<uint32_t>(p);
}

// Ten rounds of the Philox4x32 bijection on `ctr` keyed by `key`.
MG_HOST_DEVICE Uint4 philox4x32_10(Uint4 ctr, uint32_t key0, uint32_t key1) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, hi1;
    uint32_t lo0 = mulhilo(kMul0, ctr.x, &hi0);
    uint32_t lo1 = mulhilo(kMul1, ctr.z, &hi1);
    ctr = Uint4{hi1 ^ ctr.y ^ key0, lo1, hi0 ^ ctr.w ^ key1, lo0};
    key0 += kWeyl0;
    key1 += kWeyl1;
  }
  return ctr;
}

// The four 32-bit words for block `block` (element indices 4*block .. 4*block+3) of the
// stream (seed, offset). Each call of a random op takes a fresh offset from its Generator.
MG_HOST_DEVICE Uint4 random_block(uint64_t seed, uint64_t offset, uint64_t block) {
  Uint4 ctr{static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
            static_cast<uint32_t>(offset), static_cast<uint32_t>(offset >> 32)};
  return philox4x32_10(ctr, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

MG_HOST_DEVICE uint32_t word(const Uint4& v, int lane) {
  return lane == 0 ? v.x : lane == 1 ? v.y : lane == 2 ? v.z : v.w;
}

// Uniform float in [0, 1) from the top 24 bits: every value is exactly representable.
MG_HOST_DEVICE float uniform_float(uint32_t r) { return static_cast<float>(r >> 8) * (1.0f / 16777216.0f); }
// Uniform double in [0, 1) from 53 bits of two words.
MG_HOST_DEVICE double uniform_double(uint32_t a, uint32_t b) {
  uint64_t bits = (static_cast<uint64_t>(a) << 21) ^ (b >> 11);
  return static_cast<double>(bits & ((1ull << 53) - 1)) * (1.0 / 9007199254740992.0);
}

}  // namespace philox
}  // namespace minigrad
