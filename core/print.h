#pragma once
// Printing tensors with fmt: fmt::print("{}\n", x) or std::cout << x. Large tensors are
// summarized (the first and last three entries of each dimension).
#include <ostream>
#include <string>

#include <fmt/format.h>

#include <minigrad/core/tensor.h>

namespace minigrad {
std::string to_string(const Tensor& t);
std::ostream& operator<<(std::ostream& os, const Tensor& t);
}  // namespace minigrad

template <>
struct fmt::formatter<minigrad::Tensor> : fmt::formatter<std::string> {
  template <typename Ctx>
  auto format(const minigrad::Tensor& t, Ctx& ctx) const {
    return fmt::formatter<std::string>::format(minigrad::to_string(t), ctx);
  }
};
