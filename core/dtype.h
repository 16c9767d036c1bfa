#pragma once
// DType: the element types a Tensor can hold, and the host-side half types.
//
// float16 and bfloat16 are stored as 16-bit patterns and converted to float on the host
// (the CPU kernels compute them by upcasting to float32; the CUDA kernels use the native
// types). The conversions are written once, as host/device inline functions.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include <fmt/format.h>

#include <minigrad/core/macros.h>

namespace minigrad {

enum class DType : uint8_t { Float32, Float64, Float16, BFloat16, Int64, Bool };

constexpr DType kFloat32 = DType::Float32;
constexpr DType kFloat64 = DType::Float64;
constexpr DType kFloat16 = DType::Float16;
constexpr DType kBFloat16 = DType::BFloat16;
constexpr DType kInt64 = DType::Int64;
constexpr DType kBool = DType::Bool;

// IEEE 754 binary16, stored as bits. Round-to-nearest-even on the way in.
struct Half {
  uint16_t bits = 0;
  Half() = default;
  MG_HOST_DEVICE Half(float f) : bits(float_to_half_bits(f)) {}
  MG_HOST_DEVICE operator float() const { return half_bits_to_float(bits); }

  MG_HOST_DEVICE static uint16_t float_to_half_bits(float f) {
    uint32_t x = float_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t exp = (x >> 23) & 0xffu;
    uint32_t mant = x & 0x7fffffu;
    if (exp == 0xffu) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0u));  // inf/nan
    int32_t e = static_cast<int32_t>(exp) - 127 + 15;
    if (e >= 0x1f) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
    if (e <= 0) {                                                  // subnormal or zero
      if (e < -10) return static_cast<uint16_t>(sign);
      mant |= 0x800000u;
      uint32_t shift = static_cast<uint32_t>(14 - e);
      uint32_t half_mant = mant >> shift;
      uint32_t rem = mant & ((1u << shift) - 1u);
      uint32_t halfway = 1u << (shift - 1);
      if (rem > halfway || (rem == halfway && (half_mant & 1u))) ++half_mant;
      return static_cast<uint16_t>(sign | half_mant);
    }
    uint32_t h = sign | (static_cast<uint32_t>(e) << 10) | (mant >> 13);
    uint32_t rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // carry may roll into the exponent: correct
    return static_cast<uint16_t>(h);
  }
  MG_HOST_DEVICE static float half_bits_to_float(uint16_t h) {
    uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    uint32_t x;
    if (exp == 0x1fu) {
      x = sign | 0x7f800000u | (mant << 13);
    } else if (exp == 0) {
      if (mant == 0) {
        x = sign;
      } else {  // subnormal: normalize
        int32_t e = -1;
        do { mant <<= 1; ++e; } while ((mant & 0x400u) == 0);
        x = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
      }
    } else {
      x = sign | ((exp + 127 - 15) << 23) | (mant << 13);
    }
    return bits_float(x);
  }
  MG_HOST_DEVICE static uint32_t float_bits(float f) { uint32_t x; memcpy(&x, &f, 4); return x; }
  MG_HOST_DEVICE static float bits_float(uint32_t x) { float f; memcpy(&f, &x, 4); return f; }
};

// bfloat16: the top 16 bits of a float32. Round-to-nearest-even on the way in.
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  MG_HOST_DEVICE BFloat16(float f) {
    uint32_t x = Half::float_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) { bits = static_cast<uint16_t>((x >> 16) | 0x40u); return; }  // quiet NaN
    x += 0x7fffu + ((x >> 16) & 1u);
    bits = static_cast<uint16_t>(x >> 16);
  }
  MG_HOST_DEVICE operator float() const { return Half::bits_float(static_cast<uint32_t>(bits) << 16); }
};

inline size_t element_size(DType t) {
  switch (t) {
    case DType::Float32: return 4;
    case DType::Float64: return 8;
    case DType::Float16: return 2;
    case DType::BFloat16: return 2;
    case DType::Int64: return 8;
    case DType::Bool: return 1;
  }
  return 0;
}

inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Float16: return "float16";
    case DType::BFloat16: return "bfloat16";
    case DType::Int64: return "int64";
    case DType::Bool: return "bool";
  }
  return "?";
}

inline bool is_floating(DType t) {
  return t == DType::Float32 || t == DType::Float64 || t == DType::Float16 || t == DType::BFloat16;
}
inline bool is_half(DType t) { return t == DType::Float16 || t == DType::BFloat16; }

// A float or double as an int64, defined for every input: truncation toward zero, NaN to 0,
// and values beyond int64's range saturate to its ends. A plain static_cast is undefined
// behaviour for NaN, infinities and out-of-range values (compilers then return anything);
// this is what the CUDA conversion instruction (cvt.rzi.s64) does in hardware, so both
// devices give the same int64 (cuda/convert.cuh).
template <typename F>
inline int64_t float_to_int64(F v) {
  // -2^63 and 2^63 are exact in float and double; int64's range is [-2^63, 2^63).
  constexpr F kTwoPow63 = static_cast<F>(9223372036854775808.0);
  if (std::isnan(v)) return 0;
  if (v >= kTwoPow63) return std::numeric_limits<int64_t>::max();
  if (v < -kTwoPow63) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

// Whether a double is a value an int64 tensor can hold: a whole number in [-2^63, 2^63).
// Scalars written into int64 tensors (fill_, full, ...) are checked with it: 2.5 has no
// int64 value, and truncating it silently would hide a bug.
inline bool fits_int64(double v) {
  const double two_pow_63 = 9223372036854775808.0;  // exact in double
  return std::trunc(v) == v && v >= -two_pow_63 && v < two_pow_63;  // false for NaN and infinities
}

// The C++ type behind each DType, and back.
template <typename T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = kFloat32; };
template <> struct dtype_of<double> { static constexpr DType value = kFloat64; };
template <> struct dtype_of<Half> { static constexpr DType value = kFloat16; };
template <> struct dtype_of<BFloat16> { static constexpr DType value = kBFloat16; };
template <> struct dtype_of<int64_t> { static constexpr DType value = kInt64; };
template <> struct dtype_of<bool> { static constexpr DType value = kBool; };

// For overloads that take any integer type but bool: x.sum(1), Scalar(7), split(2). A
// template parameter `IfInteger<Int> = 0` keeps a braced list ({1}) and a bool from picking
// the overload.
template <typename Int>
using IfInteger = std::enable_if_t<std::is_integral_v<Int> && !std::is_same_v<Int, bool>, int>;

// Calls f(T{}) with T the C++ type of `t`, for any dtype. Kernels write
//   dispatch_all(x.dtype(), [&](auto tag) { using scalar_t = decltype(tag); ... });
template <typename F>
decltype(auto) dispatch_all(DType t, F&& f) {
  switch (t) {
    case DType::Float32: return f(float{});
    case DType::Float64: return f(double{});
    case DType::Float16: return f(Half{});
    case DType::BFloat16: return f(BFloat16{});
    case DType::Int64: return f(int64_t{});
    case DType::Bool: return f(bool{});
  }
  return f(float{});
}

}  // namespace minigrad

template <>
struct fmt::formatter<minigrad::DType> : fmt::formatter<fmt::string_view> {
  template <typename Ctx>
  auto format(minigrad::DType t, Ctx& ctx) const {
    return fmt::formatter<fmt::string_view>::format(minigrad::dtype_name(t), ctx);
  }
};
