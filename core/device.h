#pragma once
#include <cstdint>
#include <string>

#include <fmt/format.h>

namespace minigrad {

enum class DeviceType : uint8_t { CPU, CUDA };

// A device: the CPU, or one GPU addressed by index (cuda:0, cuda:1, ...).
struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  constexpr Device() = default;
  constexpr Device(DeviceType t, int i = 0) : type(t), index(i) {}
  static constexpr Device cpu() { return Device(DeviceType::CPU, 0); }
  static constexpr Device cuda(int i = 0) { return Device(DeviceType::CUDA, i); }

  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  std::string str() const { return is_cpu() ? "cpu" : fmt::format("cuda:{}", index); }
};

constexpr Device kCPU = Device::cpu();

}  // namespace minigrad

template <>
struct fmt::formatter<minigrad::Device> : fmt::formatter<std::string> {
  template <typename Ctx>
  auto format(const minigrad::Device& d, Ctx& ctx) const {
    return fmt::formatter<std::string>::format(d.str(), ctx);
  }
};
