// IndexDivisor (kernels/index_divisor.h): division by a multiply, an add and a shift, as the
// CUDA kernels turn linear indices into coordinates. The host runs the same formula as the
// device (only the multiply-high differs: __umulhi there, a 64-bit product here), so every
// divisor and dividend below is checked against the hardware's `/` here.
#include <cstdint>
#include <random>
#include <vector>

#include <minigrad/kernels/index_divisor.h>
#include "test_support.h"

using namespace minigrad;

namespace {

constexpr int64_t k2to31 = int64_t{1} << 31;

// The dividends that test a divisor hardest: around each multiple of d near 0, near the end
// of the fast range (2^31) and past it, and a spread of random ones.
std::vector<int64_t> dividends_for(int64_t d, std::mt19937_64& rng) {
  std::vector<int64_t> n = {0, 1, d - 1, d, d + 1, 2 * d - 1, 2 * d, k2to31 - 2, k2to31 - 1, k2to31, k2to31 + 1,
                            (int64_t{1} << 32) - 1, int64_t{1} << 32, (int64_t{1} << 62) + 12345};
  const int64_t last_multiple = (k2to31 - 1) / d * d;  // the largest multiple of d below 2^31
  for (int64_t m : {last_multiple, last_multiple - d})
    for (int64_t delta = -2; delta <= 2; ++delta) n.push_back(m + delta);
  std::uniform_int_distribution<int64_t> fast(0, k2to31 - 1), any(0, (int64_t{1} << 62));
  for (int i = 0; i < 200; ++i) n.push_back(fast(rng));
  for (int i = 0; i < 20; ++i) n.push_back(any(rng));
  return n;
}

void check_divisor(int64_t d, std::mt19937_64& rng) {
  const IndexDivisor divisor(d);
  REQUIRE(divisor.value() == d);
  for (int64_t n : dividends_for(d, rng)) {
    if (n < 0) continue;
    const int64_t got = divisor.divide(n);
    if (got != n / d) FAIL_CHECK(n << " / " << d << ": got " << got << ", expected " << n / d);
    const IndexDivisor::QuotientRemainder qr = divisor.divide_with_remainder(n);
    if (qr.quotient != n / d || qr.remainder != n % d)
      FAIL_CHECK(n << " divmod " << d << ": got " << qr.quotient << ", " << qr.remainder);
  }
}

}  // namespace

TEST_CASE("IndexDivisor divides every index as / does") {
  std::mt19937_64 rng(20261207);
  SUBCASE("every divisor up to 4096") {
    for (int64_t d = 1; d <= 4096; ++d) check_divisor(d, rng);
  }
  SUBCASE("powers of two and their neighbours, up to past 2^31") {
    for (int s = 1; s <= 40; ++s)
      for (int64_t delta = -1; delta <= 1; ++delta) check_divisor((int64_t{1} << s) + delta, rng);
  }
  SUBCASE("random divisors") {
    std::uniform_int_distribution<int64_t> small(1, k2to31 - 1), large(k2to31, int64_t{1} << 45);
    for (int i = 0; i < 2000; ++i) check_divisor(small(rng), rng);
    for (int i = 0; i < 50; ++i) check_divisor(large(rng), rng);
  }
  SUBCASE("every dividend below 2^20 for a few divisors") {
    for (int64_t d : {3, 7, 641, 1000, 1023, 1025}) {
      const IndexDivisor divisor(d);
      for (int64_t n = 0; n < (int64_t{1} << 20); ++n)
        if (divisor.divide(n) != n / d) FAIL_CHECK(n << " / " << d);
    }
  }
}

TEST_CASE("IndexDivisor by default divides by 1") {
  const IndexDivisor one;
  CHECK(one.value() == 1);
  for (int64_t n : {int64_t{0}, int64_t{1}, k2to31 - 1, k2to31, int64_t{1} << 50}) CHECK(one.divide(n) == n);
}
