#pragma once
// Shared by the doctest suites: minigrad, the gradcheck/allclose macros, and a check
// that an expression throws minigrad::Error whose message contains a substring.
#include <doctest/doctest.h>

#include <string>

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
