#pragma once
// The dropout mask, written once for every user: the CPU loops of ops/dropout.cpp, the
// elementwise engine on both devices (DropoutScale below), the CUDA softmax_dropout kernels,
// the composite twins' keep-mask tensor, and attention kernels that drop scores the same way.
//
// Element i (its index in the tensor's row-major order) is kept or dropped by Philox4x32-10
// (kernels/philox.h) keyed by one stream (seed, offset) of a Generator, with 16 bits per
// element: one Philox block (four 32-bit words, 128 bits) decides the 8 consecutive
// elements 8g .. 8g + 7 of group g = i / 8. Element 8g + k reads the 16-bit half k % 2 of
// word k / 2 (the low half for even k), and is kept iff those bits >= threshold.
//
// Why 16 bits: Philox is ten rounds of two 32x32-bit multiplies, too many to spend on one
// element when the kernel should run at the memory's bandwidth. 16 bits give 8 decisions per
// call (one 16-byte vector of bfloat16 per call), and a drop probability resolved to 2^-16:
// threshold = round(p * 65536), the probability applied is p_q = threshold / 65536, and a
// kept value is multiplied by 1 / (1 - p_q), so the expectation is preserved exactly for the
// probability actually used. p in [1 - 2^-17, 1) would round to 1: threshold stops at 65535.
#include <cstdint>

#include <minigrad/core/macros.h>
#include <minigrad/kernels/philox.h>

namespace minigrad {
namespace dropout_bits {

constexpr uint32_t kElementsPerBlock = 8;  // 16-bit decisions in one 128-bit Philox block
constexpr double kResolution = 65536.0;    // 2^16: p is rounded to a multiple of 2^-16

// round(p * 65536) for p in [0, 1), at most 65535.
MG_HOST_DEVICE uint32_t threshold_of(double p) {
  const double scaled = p * kResolution + 0.5;
  const uint32_t t = static_cast<uint32_t>(scaled);
  return t > 65535u ? 65535u : t;
}

// The factor of a kept element: 1 / (1 - p_q), p_q = threshold / 65536.
MG_HOST_DEVICE double keep_scale(uint32_t threshold) { return kResolution / (kResolution - threshold); }

// Whether the element whose 16 bits are half `half` (0: low, 1: high) of a Philox word is kept:
// those bits >= threshold, compared with both moved to the top of a 32-bit word (threshold is
// below 2^16), so the high half is compared as the word stands, with no shift or mask.
MG_HOST_DEVICE bool keeps(uint32_t word, uint32_t half, uint32_t threshold) {
  return (half ? word : word << 16) >= (threshold << 16);
}

// The keep decisions of group g (elements 8g .. 8g + 7) from its Philox block: bit k set iff
// element 8g + k is kept.
MG_HOST_DEVICE uint32_t keep_bits(const philox::Uint4& block, uint32_t threshold) {
  const uint32_t words[4] = {block.x, block.y, block.z, block.w};
  uint32_t bits = 0;
  for (uint32_t k = 0; k < kElementsPerBlock; ++k)
    bits |= static_cast<uint32_t>(keeps(words[k / 2], k % 2, threshold)) << k;
  return bits;
}
// The same from the stream.
MG_HOST_DEVICE uint32_t keep_bits(uint64_t seed, uint64_t offset, uint64_t group, uint32_t threshold) {
  return keep_bits(philox::random_block(seed, offset, group), threshold);
}

// Whether element i is kept (one Philox call: for a run of elements call keep_bits once per 8).
MG_HOST_DEVICE bool keep(uint64_t seed, uint64_t offset, uint64_t i, uint32_t threshold) {
  return (keep_bits(seed, offset, i / kElementsPerBlock, threshold) >> (i % kElementsPerBlock)) & 1u;
}

// One dropout draw: the stream and the rounded probability. It carries the seed's Philox
// round keys, derived once where the draw is made (on the host), so that a kernel's every
// Philox call starts from them instead of deriving them again: that is twenty additions a
// call, more than two an element.
struct Mask {
  uint64_t seed = 0;
  uint64_t offset = 0;
  uint32_t threshold = 0;
  philox::RoundKeys keys{0};  // of seed

  Mask() = default;
  MG_HOST_DEVICE Mask(uint64_t seed_, uint64_t offset_, uint32_t threshold_)
      : seed(seed_), offset(offset_), threshold(threshold_), keys(seed_) {}

  // The Philox block of group g (elements 8g .. 8g + 7).
  MG_HOST_DEVICE philox::Uint4 block(uint64_t group) const { return philox::random_block(keys, offset, group); }
  MG_HOST_DEVICE uint32_t keep_bits(uint64_t group) const { return dropout_bits::keep_bits(block(group), threshold); }
  MG_HOST_DEVICE bool keep(uint64_t i) const { return (keep_bits(i / kElementsPerBlock) >> (i % kElementsPerBlock)) & 1u; }
  MG_HOST_DEVICE double scale() const { return keep_scale(threshold); }
};

// Reads the decisions of a run of elements, one Philox call per group of 8 met: element
// indices that step by 1 (a row along the last dim) cost one call per 8 elements, any other
// order at most one per element.
class MaskCursor {
 public:
  MG_HOST_DEVICE explicit MaskCursor(const Mask& mask) : mask_(mask) {}
  MG_HOST_DEVICE bool keep(uint64_t i) {
    const uint64_t group = i / kElementsPerBlock;
    if (group != group_) {
      group_ = group;
      bits_ = mask_.keep_bits(group);
    }
    return (bits_ >> (i % kElementsPerBlock)) & 1u;
  }

 private:
  Mask mask_;
  uint64_t group_ = ~uint64_t{0};  // no group read yet (2^64 - 1 is no element's group)
  uint32_t bits_ = 0;
};

}  // namespace dropout_bits

namespace elementwise {

// v * mask(i) / (1 - p_q), with mask(i) in {0, 1}: dropout's forward (v = x) and backward
// (v = the gradient), the element's index from the engine. A dropped element is v * 0, as
// x * mask is in the composite twin (a NaN stays NaN).
struct DropoutScale {
  static constexpr bool kTakesIndex = true;
  dropout_bits::Mask mask;
  double scale = 1.0;  // mask.scale(), computed once by the op rather than per element
  template <typename T>
  MG_HOST_DEVICE T operator()(int64_t index, T v) const {
    return v * (mask.keep(static_cast<uint64_t>(index)) ? T(scale) : T(0));
  }
};

}  // namespace elementwise
}  // namespace minigrad
