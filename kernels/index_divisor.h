#pragma once
// Integer division by a size known before a kernel starts: a tensor's dim, by which a kernel
// turns a linear index into coordinates.
//
// The GPU has no integer divider. `n / d` in device code is a software routine: about 20
// instructions for 32-bit operands (a reciprocal in floating point, then corrections), a call
// of several dozen for 64-bit ones. A divisor that is the same for every thread can instead be
// turned, once, on the host, into a multiplier m and a shift s such that for every dividend
// n < 2^31
//
//     n / d == (umulhi(n, m) + n) >> s        umulhi(a, b) = the high 32 bits of a * b
//
// three instructions (a multiply-high, an add, a shift). The method is Granlund and
// Montgomery's ("Division by invariant integers using multiplication", PLDI 1994): with
// s = ceil(log2(d)), m = floor(2^32 * (2^s - d) / d) + 1, which fits 32 bits for d < 2^31.
// The sum stays below 2^32 because umulhi(n, m) < n < 2^31. A divisor of 2^31 or more
// takes m = 0 and s = 31: a dividend below 2^31 then gives 0, as it must.
//
// Dividends of 2^31 or more (tensors of more than 2^31 elements) take the 64-bit division:
// a test, which a warp passes the same way, in front of every division.
#include <cstdint>

#include <minigrad/core/macros.h>

namespace minigrad {

class IndexDivisor {
 public:
  // Division by 1 (the identity).
  IndexDivisor() = default;

  // Division by d > 0; computed on the host, where the kernel's parameters are built.
  explicit IndexDivisor(int64_t d) : value_(d) {
    if (d >= (int64_t{1} << 31)) {
      multiplier_ = 0;
      shift_ = 31;
      return;
    }
    uint32_t s = 0;
    while ((int64_t{1} << s) < d) ++s;
    const uint64_t d64 = static_cast<uint64_t>(d);
    // 2^32 * (2^s - d) < 2^63: 2^s - d < d < 2^31.
    multiplier_ = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << s) - d64)) / d64 + 1);
    shift_ = s;
  }

  MG_HOST_DEVICE int64_t value() const { return value_; }

  // n / d for an index n >= 0.
  MG_HOST_DEVICE int64_t divide(int64_t n) const {
    if ((static_cast<uint64_t>(n) >> 31) == 0) {
      const uint32_t n32 = static_cast<uint32_t>(n);
      return static_cast<int64_t>((high_product(n32, multiplier_) + n32) >> shift_);
    }
    return n / value_;
  }

  // n / d and n % d for an index n >= 0: the remainder from the quotient by a multiply and a
  // subtraction (turning an index into coordinates wants both).
  struct QuotientRemainder {
    int64_t quotient, remainder;
  };
  MG_HOST_DEVICE QuotientRemainder divide_with_remainder(int64_t n) const {
    const int64_t q = divide(n);
    return {q, n - q * value_};
  }

 private:
  MG_HOST_DEVICE static uint32_t high_product(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__)
    return __umulhi(a, b);
#else
    return static_cast<uint32_t>((static_cast<uint64_t>(a) * b) >> 32);
#endif
  }

  int64_t value_ = 1;
  uint32_t multiplier_ = 1;  // with shift 0: (umulhi(n, 1) + n) >> 0 == n
  uint32_t shift_ = 0;
};

}  // namespace minigrad
