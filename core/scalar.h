#pragma once
// Scalar: one number of any of minigrad's kinds, what Tensor::item() returns (as
// at::Scalar is in LibTorch). It keeps the kind of the tensor it came from, so an int64
// item beyond 2^53 stays exact, and the caller says which C++ type it wants:
//   int64_t n = counts.sum().item().toLong();
//   double loss = loss_tensor.item().toDouble();
// A conversion that would change the value (toLong of 2.5 or of NaN, toLong of a double
// beyond int64's range) is refused with an error instead of rounding silently.
#include <cstdint>
#include <type_traits>

#include <fmt/format.h>

#include <minigrad/core/dtype.h>
#include <minigrad/core/error.h>

namespace minigrad {

class Scalar {
 public:
  enum class Kind { Floating, Integral, Boolean };

  Scalar() : Scalar(int64_t{0}) {}
  Scalar(double v) : kind_(Kind::Floating), d_(v) {}  // NOLINT: implicit, as in LibTorch
  Scalar(float v) : Scalar(static_cast<double>(v)) {}  // NOLINT
  Scalar(bool v) : kind_(Kind::Boolean), i_(v ? 1 : 0) {}  // NOLINT
  template <typename Int, IfInteger<Int> = 0>
  Scalar(Int v) : kind_(Kind::Integral), i_(static_cast<int64_t>(v)) {}  // NOLINT

  Kind kind() const { return kind_; }
  bool isFloatingPoint() const { return kind_ == Kind::Floating; }
  bool isIntegral(bool include_bool = false) const {
    return kind_ == Kind::Integral || (include_bool && kind_ == Kind::Boolean);
  }
  bool isBoolean() const { return kind_ == Kind::Boolean; }

  double toDouble() const { return kind_ == Kind::Floating ? d_ : static_cast<double>(i_); }
  float toFloat() const { return static_cast<float>(toDouble()); }
  int64_t toLong() const {
    if (kind_ != Kind::Floating) return i_;
    MG_CHECK(fits_int64(d_), "Scalar::toLong: {} has no int64 value (not a whole number in int64's range)", d_);
    return static_cast<int64_t>(d_);
  }
  bool toBool() const { return kind_ == Kind::Floating ? d_ != 0.0 : i_ != 0; }
  // to<double>(), to<int64_t>(), to<bool>(), to<float>().
  template <typename T>
  T to() const {
    if constexpr (std::is_same_v<T, bool>) return toBool();
    else if constexpr (std::is_integral_v<T>) return static_cast<T>(toLong());
    else return static_cast<T>(toDouble());
  }

  bool operator==(const Scalar& o) const {
    if (kind_ == Kind::Floating || o.kind_ == Kind::Floating) return toDouble() == o.toDouble();
    return i_ == o.i_;
  }
  bool operator!=(const Scalar& o) const { return !(*this == o); }

 private:
  Kind kind_;
  union {
    double d_;
    int64_t i_;
  };
};

}  // namespace minigrad

// fmt::format("{}", x.item()): the value as its kind prints it (2.5, 7, true).
template <>
struct fmt::formatter<minigrad::Scalar> : fmt::formatter<double> {
  template <typename Ctx>
  auto format(const minigrad::Scalar& s, Ctx& ctx) const {
    if (s.isFloatingPoint()) return fmt::formatter<double>::format(s.toDouble(), ctx);
    if (s.isBoolean()) return fmt::format_to(ctx.out(), "{}", s.toBool());
    return fmt::format_to(ctx.out(), "{}", s.toLong());
  }
};
