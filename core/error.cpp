#include <minigrad/core/error.h>

namespace minigrad {
namespace detail {
void throw_error(std::string message) { throw Error(std::move(message)); }
}  // namespace detail
}  // namespace minigrad
