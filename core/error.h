#pragma once
// One error type and one check macro. Every message names the op and the argument:
//   MG_CHECK(a.dim() == 2, "matmul: expected argument 'self' to be 2-D, got {}-D", a.dim());
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace minigrad {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
[[noreturn]] void throw_error(std::string message);
}  // namespace detail

}  // namespace minigrad

// The message is formatted only when the check fails: the hot path pays one branch.
#define MG_CHECK(cond, ...)                                              \
  do {                                                                   \
    if (!(cond)) ::minigrad::detail::throw_error(fmt::format(__VA_ARGS__)); \
  } while (0)
