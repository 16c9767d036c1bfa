#pragma once
// Shared by the doctest suites: minigrad, the gradcheck/allclose macros, a check that an
// expression throws minigrad::Error whose message contains a substring, a comparison of two
// tensors bit for bit, and a function's value with its inputs' gradients.
#include <doctest/doctest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <minigrad/autograd/doctest_helpers.h>
#include <minigrad/minigrad.h>

#define CHECK_THROWS_CONTAINING(expr, substring)                                   \
  do {                                                                             \
    bool mg_thrown_ = false;                                                       \
    std::string mg_what_;                                                          \
    try {                                                                          \
      (void)(expr);                                                                \
    } catch (const ::minigrad::Error& e) {                                         \
      mg_thrown_ = true;                                                           \
      mg_what_ = e.what();                                                         \
    }                                                                              \
    INFO("expression: " #expr);                                                    \
    INFO("message: " << mg_what_);                                                 \
    CHECK(mg_thrown_);                                                             \
    CHECK(mg_what_.find(substring) != std::string::npos);                          \
  } while (0)

namespace minigrad {
namespace test {

// The same sizes, dtype and values bit for bit, on any devices: NaN equals NaN (of the same
// bits) and -0 differs from 0, where == would say the opposite. Every dtype holds exactly in
// double, so comparing the doubles compares the elements.
inline bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.sizes() != b.sizes() || a.dtype() != b.dtype()) return false;
  const std::vector<double> va = a.to_vector<double>();
  const std::vector<double> vb = b.to_vector<double>();
  // An empty vector's data() may be null, which memcmp must not see even for 0 bytes.
  return va.empty() || std::memcmp(va.data(), vb.data(), va.size() * sizeof(double)) == 0;
}

// f's value on fresh leaves holding `inputs` (undefined entries stay undefined: an absent
// bias), then each defined input's gradient after backpropagating dy into it: {value, grads...}.
inline tensor_list value_and_grads(const tensor_list& inputs, const Tensor& dy,
                                   const std::function<Tensor(const tensor_list&)>& f) {
  tensor_list leaves;
  for (const Tensor& t : inputs) leaves.push_back(t.defined() ? t.detach().requires_grad_() : Tensor());
  const Tensor y = f(leaves);
  y.backward(dy);
  tensor_list out{y.detach()};
  for (const Tensor& leaf : leaves)
    if (leaf.defined()) out.push_back(leaf.grad());
  return out;
}

}  // namespace test
}  // namespace minigrad
