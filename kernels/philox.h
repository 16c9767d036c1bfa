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

// The 64-bit product a * b as its low word (returned) and high word (*hi). On the GPU the
// high word comes from __umulhi: through a 64-bit product and a shift, ptxas added a move
// of the high word after each multiply (two instructions a round, for nothing).
MG_HOST_DEVICE uint32_t mulhilo(uint32_t a, uint32_t b, uint32_t* hi) {
#ifdef __CUDA_ARCH__
  *hi = __umulhi(a, b);
  return a * b;
#else
  uint64_t p = static_cast<uint64_t>(a) * b;
  *hi = static_cast<uint32_t>(p >> 32);
  return static_cast<uint32_t>(p);
#endif
}

constexpr int kRounds = 10;

// The key of each round: the seed's two words, each advanced by its Weyl constant every
// round. They depend on the seed alone, so a kernel that draws many blocks takes them
// computed once on the host, as a parameter: ptxas loads them once a thread, where a kernel
// given the seed computed them again in every call, two additions a round.
struct RoundKeys {
  uint32_t key0[kRounds];
  uint32_t key1[kRounds];
  MG_HOST_DEVICE explicit RoundKeys(uint64_t seed) {
    constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
    uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
    for (int round = 0; round < kRounds; ++round) {
      key0[round] = k0;
      key1[round] = k1;
      k0 += kWeyl0;
      k1 += kWeyl1;
    }
  }
};

// Ten rounds of the Philox4x32 bijection on `ctr` with the round keys of a seed.
MG_HOST_DEVICE Uint4 philox4x32_10(Uint4 ctr, const RoundKeys& keys) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  for (int round = 0; round < kRounds; ++round) {
    uint32_t hi0, hi1;
    uint32_t lo0 = mulhilo(kMul0, ctr.x, &hi0);
    uint32_t lo1 = mulhilo(kMul1, ctr.z, &hi1);
    ctr = Uint4{hi1 ^ ctr.y ^ keys.key0[round], lo1, hi0 ^ ctr.w ^ keys.key1[round], lo0};
  }
  return ctr;
}

// The same with the key as two words, the form of Random123's known-answer vectors.
MG_HOST_DEVICE Uint4 philox4x32_10(Uint4 ctr, uint32_t key0, uint32_t key1) {
  return philox4x32_10(ctr, RoundKeys(static_cast<uint64_t>(key1) << 32 | key0));
}

// The four 32-bit words for block `block` (element indices 4*block .. 4*block+3) of the
// stream (seed, offset), the seed given as itself or as its round keys. Each call of a
// random op takes a fresh offset from its Generator.
MG_HOST_DEVICE Uint4 random_block(const RoundKeys& keys, uint64_t offset, uint64_t block) {
  Uint4 ctr{static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
            static_cast<uint32_t>(offset), static_cast<uint32_t>(offset >> 32)};
  return philox4x32_10(ctr, keys);
}
MG_HOST_DEVICE Uint4 random_block(uint64_t seed, uint64_t offset, uint64_t block) {
  return random_block(RoundKeys(seed), offset, block);
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
