#pragma once
// doctest helpers for op authors. Include after <doctest/doctest.h>.
//   CHECK_GRADCHECK(fn, inputs)           gradcheck with default options
//   CHECK_GRADCHECK_OPTS(fn, inputs, o)   ... with GradcheckOptions o
//   CHECK_GRADGRADCHECK(fn, inputs)       gradgradcheck (second derivatives), random grad_outputs
//   CHECK_GRADGRADCHECK_OPTS(fn, inputs, grad_outputs, o)
//   CHECK_ALLCLOSE(actual, expected, rtol, atol)
// On failure they print the report: the worst elements, the input and the index.
#include <minigrad/autograd/gradcheck.h>

#define CHECK_GRADCHECK_OPTS(fn, inputs, options)                          \
  do {                                                                     \
    auto mg_report_ = ::minigrad::gradcheck((fn), (inputs), (options));    \
    INFO(mg_report_.summary());                                            \
    CHECK(mg_report_.passed);                                              \
  } while (0)

#define CHECK_GRADCHECK(fn, inputs) CHECK_GRADCHECK_OPTS(fn, inputs, ::minigrad::GradcheckOptions{})

#define CHECK_GRADGRADCHECK_OPTS(fn, inputs, grad_outputs, options)                     \
  do {                                                                                  \
    auto mg_report_ = ::minigrad::gradgradcheck((fn), (inputs), (grad_outputs), (options)); \
    INFO(mg_report_.summary());                                                         \
    CHECK(mg_report_.passed);                                                           \
  } while (0)

#define CHECK_GRADGRADCHECK(fn, inputs) \
  CHECK_GRADGRADCHECK_OPTS(fn, inputs, ::minigrad::tensor_list{}, ::minigrad::GradcheckOptions{})

#define CHECK_ALLCLOSE(actual, expected, rtol, atol)                                        \
  do {                                                                                      \
    auto mg_close_ = ::minigrad::allclose_report((actual), (expected), (rtol), (atol));     \
    INFO(mg_close_.message);                                                                \
    CHECK(mg_close_.passed);                                                                \
  } while (0)
