// parallel_for (core/parallel.h) and the kernels that use it: every index runs once,
// exceptions reach the caller, nested calls run inline, and the reductions and softmax give
// bitwise the same results with one thread as with two (their blocks and orders are fixed
// by the shape, never by the thread count).
#include <cmath>
#include <atomic>
#include <functional>
#include <cstring>
#include <stdexcept>
#include <vector>

#include <minigrad/core/parallel.h>
#include "test_support.h"

using namespace minigrad;

namespace {

// Restores the thread count a test changed.
struct ThreadCountGuard {
  int saved = get_num_threads();
  ~ThreadCountGuard() { set_num_threads(saved); }
};

template <typename T>
bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.sizes() != b.sizes()) return false;
  const std::vector<T> va = a.contiguous().to_vector<T>();
  const std::vector<T> vb = b.contiguous().to_vector<T>();
  return va.empty() || std::memcmp(va.data(), vb.data(), va.size() * sizeof(T)) == 0;
}

// fn() with n threads, the result detached from any graph.
template <typename F>
Tensor with_threads(int n, const F& fn) {
  set_num_threads(n);
  NoGradGuard no_grad;
  return fn();
}

}  // namespace

TEST_CASE("parallel_for runs every index exactly once, across the pool's threads") {
  ThreadCountGuard guard;
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    std::vector<std::atomic<int>> hits(10007);
    parallel_for(0, 10007, 100, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)]++;
    });
    for (const auto& h : hits) REQUIRE(h.load() == 1);
  }
}

TEST_CASE("parallel_for: small ranges and nested calls run inline, on the calling thread") {
  ThreadCountGuard guard;
  set_num_threads(2);
  int chunks = 0;
  parallel_for(0, 50, 100, [&](int64_t begin, int64_t end) {
    ++chunks;
    CHECK(begin == 0);
    CHECK(end == 50);
  });
  CHECK(chunks == 1);
  std::atomic<int> inner_chunks{0};
  parallel_for(0, 1000, 10, [&](int64_t, int64_t) {
    parallel_for(0, 1000, 10, [&](int64_t begin, int64_t end) {
      inner_chunks++;
      CHECK(begin == 0);
      CHECK(end == 1000);
    });
  });
  CHECK(inner_chunks.load() == 2);  // one inline inner call per outer chunk
}

TEST_CASE("parallel_for rethrows a worker's exception in the caller") {
  ThreadCountGuard guard;
  set_num_threads(2);
  // The last index is in the last chunk, which a pool thread runs.
  CHECK_THROWS_AS(parallel_for(0, 1000, 10,
                               [&](int64_t, int64_t end) {
                                 if (end == 1000) throw std::runtime_error("from the last chunk");
                               }),
                  std::runtime_error);
  // The pool still works afterwards.
  std::atomic<int64_t> total{0};
  parallel_for(0, 1000, 10, [&](int64_t begin, int64_t end) { total += end - begin; });
  CHECK(total.load() == 1000);
}

TEST_CASE("set_num_threads refuses a count below 1") {
  CHECK_THROWS_CONTAINING(set_num_threads(0), "at least 1");
}

TEST_CASE("sum, mean and softmax are bitwise the same with one thread and with two") {
  ThreadCountGuard guard;
  manual_seed(1234);
  // Shapes that cross the block and grain sizes, with remainders, in float32 and float64.
  for (DType dtype : {kFloat32, kFloat64}) {
    for (const Shape& shape : {Shape{4096, 1024}, Shape{3, 70001}, Shape{257, 3, 515}, Shape{100003}}) {
      const Tensor x = randn(shape, TensorOptions(dtype)) * 3.0 + 0.5;
      const int64_t last = static_cast<int64_t>(shape.size()) - 1;
      std::vector<std::pair<const char*, std::function<Tensor()>>> cases = {
          {"sum all", [&] { return x.sum(); }},
          {"sum last", [&] { return x.sum({last}); }},
          {"sum first", [&] { return x.sum({0}); }},
          {"mean last", [&] { return x.mean({last}); }},
          {"mean first", [&] { return x.mean({0}, true); }},
          {"softmax last", [&] { return softmax(x, last); }},
          {"log_softmax last", [&] { return log_softmax(x, last); }},
          {"softmax first", [&] { return softmax(x, 0); }},
      };
      for (const auto& [name, fn] : cases) {
        INFO(name << " of shape " << shape_str(shape) << " in " << dtype_name(dtype));
        const Tensor one = with_threads(1, fn);
        const Tensor two = with_threads(2, fn);
        if (dtype == kFloat32)
          CHECK(same_bits<float>(one, two));
        else
          CHECK(same_bits<double>(one, two));
      }
    }
  }
}

TEST_CASE("the softmax backward is bitwise the same with one thread and with two") {
  ThreadCountGuard guard;
  manual_seed(99);
  const Tensor x = randn({513, 2049});
  const Tensor g = randn({513, 2049});
  auto grad_of = [&](int threads, bool log) {
    set_num_threads(threads);
    Tensor leaf = x.detach().requires_grad_(true);
    Tensor y = log ? log_softmax(leaf, 1) : softmax(leaf, 1);
    y.backward(g);
    return leaf.grad();
  };
  for (bool log : {false, true}) CHECK(same_bits<float>(grad_of(1, log), grad_of(2, log)));
}

TEST_CASE("the fast sums agree with a sum in double, within their error bound") {
  // Each run of 8 terms adds in float (at most 7 roundings of its magnitudes), then double:
  // the bound is 8 float roundings of the sum of magnitudes, whatever the length.
  manual_seed(7);
  const Tensor x = randn({37, 5000});
  const std::vector<float> v = x.to_vector<float>();
  std::vector<double> rows(37, 0.0), cols(5000, 0.0), row_magnitude(37, 0.0), col_magnitude(5000, 0.0);
  for (size_t r = 0; r < 37; ++r)
    for (size_t c = 0; c < 5000; ++c) {
      rows[r] += v[r * 5000 + c];
      cols[c] += v[r * 5000 + c];
      row_magnitude[r] += std::fabs(v[r * 5000 + c]);
      col_magnitude[c] += std::fabs(v[r * 5000 + c]);
    }
  const double u = std::ldexp(1.0, -24);
  const std::vector<float> by_row = x.sum({1}).to_vector<float>();
  const std::vector<float> by_col = x.sum({0}).to_vector<float>();
  for (size_t r = 0; r < 37; ++r) CHECK(std::fabs(by_row[r] - rows[r]) <= 8 * u * row_magnitude[r]);
  for (size_t c = 0; c < 5000; ++c) CHECK(std::fabs(by_col[c] - cols[c]) <= 8 * u * col_magnitude[c]);
}
