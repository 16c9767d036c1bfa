// Anomaly mode: off by default and per thread; inside a DetectAnomalyGuard every recorded op
// keeps its inputs' metadata and its creation site, and the first NaN or Inf a backward
// returns is an error naming the op, its sequence number, its inputs and where it was made.
#include <cmath>
#include <limits>
#include <string>
#include <thread>

#include "tests/test_support.h"

using namespace minigrad;

// A Function whose backward plants a NaN: the forward is fine, the gradient is not.
struct PlantedNaN : Function<PlantedNaN> {
  static Tensor forward(Context&, const Tensor& x) { return x * 2.0; }
  static tensor_list backward(Context&, tensor_list g) { return {full_like(g[0], std::nan(""))}; }
};

// Two inputs; only the second one's gradient goes bad (an Inf).
struct PlantedInfInSecond : Function<PlantedInfInSecond> {
  static Tensor forward(Context&, const Tensor& a, const Tensor& b) { return a + b; }
  static tensor_list backward(Context&, tensor_list g) {
    return {g[0], full_like(g[0], std::numeric_limits<double>::infinity())};
  }
};

// The creation sites the reports must name. Global, with external linkage, so the symbol
// table of an executable linked with -rdynamic knows their names, and never inlined. The
// empty asm after the call keeps it from being a tail call, which would replace this
// function's frame by the callee's.
__attribute__((noinline)) Tensor make_planted_nan_op(const Tensor& x) {
  Tensor y = PlantedNaN::apply(x);
  asm volatile("" ::: "memory");
  return y;
}

__attribute__((noinline)) Tensor take_sqrt_in_user_code(const Tensor& x) {
  Tensor y = sqrt(x);
  asm volatile("" ::: "memory");
  return y;
}

namespace {

std::string backward_error(const Tensor& loss) {
  try {
    loss.backward();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("anomaly mode is off by default, and a guard turns it on for its scope only") {
  CHECK(!autograd::AnomalyMode::is_enabled());
  {
    DetectAnomalyGuard outer;
    CHECK(autograd::AnomalyMode::is_enabled());
    {
      DetectAnomalyGuard inner;
      CHECK(autograd::AnomalyMode::is_enabled());
    }
    CHECK(autograd::AnomalyMode::is_enabled());  // the inner guard restores, not clears
  }
  CHECK(!autograd::AnomalyMode::is_enabled());
}

TEST_CASE("anomaly mode is per thread, like grad mode") {
  DetectAnomalyGuard guard;
  bool seen_in_other_thread = true;
  std::thread t([&] { seen_in_other_thread = autograd::AnomalyMode::is_enabled(); });
  t.join();
  CHECK(!seen_in_other_thread);
  CHECK(autograd::AnomalyMode::is_enabled());
}

TEST_CASE("ops record anomaly metadata only in anomaly mode") {
  Tensor x = randn({2, 3}, kFloat64).requires_grad_();
  Tensor w = randn({3}, kFloat64);
  Tensor off = x * w;
  CHECK(off.grad_fn()->anomaly_metadata() == nullptr);  // the off path records nothing

  DetectAnomalyGuard guard;
  Tensor on = x * w;
  const auto& meta = on.grad_fn()->anomaly_metadata();
  REQUIRE(meta != nullptr);
  REQUIRE(meta->inputs.size() == 2);  // both tensor inputs, the one without grad too
  CHECK(meta->inputs[0].sizes == Shape{2, 3});
  CHECK(meta->inputs[1].sizes == Shape{3});
  CHECK(meta->inputs[1].dtype == kFloat64);
  CHECK(!meta->creation_frames.empty());
  CHECK(!meta->creation_site().empty());
}

TEST_CASE("a NaN planted in a backward is reported with the op, its sequence number, its inputs and its creator") {
  manual_seed(11);
  Tensor x = randn({2, 3}, kFloat64).requires_grad_();
  DetectAnomalyGuard guard;
  Tensor y = make_planted_nan_op(x);
  const uint64_t seq = y.grad_fn()->sequence_nr();
  const std::string message = backward_error(y.sum());
  INFO(message);
  CHECK(message.find(fmt::format("the backward of PlantedNaN (sequence number {})", seq)) != std::string::npos);
  CHECK(message.find("returned NaN in the gradient for its input 0") != std::string::npos);
  CHECK(message.find("6 NaN and 0 Inf among 6 elements") != std::string::npos);
  CHECK(message.find("tensor inputs [2, 3] float64") != std::string::npos);
  CHECK(message.find("make_planted_nan_op") != std::string::npos);
  // The report starts at the caller: minigrad's own frames (Function<T>::apply, the
  // recording) are skipped.
  const std::string site = message.substr(message.find("created at:"));
  CHECK(site.find("record_anomaly_metadata") == std::string::npos);
  CHECK(site.find("Function<") == std::string::npos);
}

TEST_CASE("the gradient that goes bad is named by its input index, Inf as well as NaN") {
  Tensor a = randn({4}, kFloat64).requires_grad_();
  Tensor b = randn({4}, kFloat64).requires_grad_();
  DetectAnomalyGuard guard;
  Tensor y = PlantedInfInSecond::apply(a, b);
  const std::string message = backward_error(y.sum());
  INFO(message);
  CHECK(message.find("PlantedInfInSecond") != std::string::npos);
  CHECK(message.find("returned Inf in the gradient for its input 1") != std::string::npos);
  CHECK(message.find("tensor inputs [4] float64, [4] float64") != std::string::npos);
}

TEST_CASE("a built-in op's bad gradient names the op and the user's function that called it") {
  // sqrt'(0) = 1 / (2 sqrt(0)) = Inf: the classic way a norm of a zero vector breaks training.
  Tensor x = zeros({3}, kFloat64).requires_grad_();
  DetectAnomalyGuard guard;
  Tensor y = take_sqrt_in_user_code(x);
  const std::string op = y.grad_fn()->name();
  const std::string message = backward_error(y.sum());
  INFO(message);
  CHECK(message.find(fmt::format("the backward of {} (sequence number {})", op, y.grad_fn()->sequence_nr())) !=
        std::string::npos);
  CHECK(message.find("Inf") != std::string::npos);
  // The public op (minigrad::sqrt) is skipped too: the first frame shown is the caller's.
  const std::string site = message.substr(message.find("created at:\n"));
  CHECK(site.rfind("created at:\n  take_sqrt_in_user_code", 0) == 0);
}

TEST_CASE("without anomaly mode the same NaN passes silently into .grad") {
  Tensor x = randn({2, 3}, kFloat64).requires_grad_();
  make_planted_nan_op(x).sum().backward();
  CHECK(std::isnan(x.grad().to_vector<double>()[0]));
}

TEST_CASE("a node recorded before anomaly mode was turned on is still checked, without a creation site") {
  Tensor x = randn({2}, kFloat64).requires_grad_();
  Tensor y = make_planted_nan_op(x);
  DetectAnomalyGuard guard;
  const std::string message = backward_error(y.sum());
  INFO(message);
  CHECK(message.find("the backward of PlantedNaN") != std::string::npos);
  CHECK(message.find("not recorded: the op ran while anomaly mode was off") != std::string::npos);
}

TEST_CASE("anomaly mode passes a healthy backward, with create_graph too") {
  Tensor x = from_vector<double>({0.5, 1.5, 2.5}, {3}).requires_grad_();
  DetectAnomalyGuard guard;
  Tensor y = (x * x * x).sum();
  const tensor_list g = autograd::grad({y}, {x}, {}, std::nullopt, /*create_graph=*/true);
  g[0].sum().backward();
  CHECK_ALLCLOSE(x.grad(), x.detach() * 6.0, 1e-12, 1e-12);  // d/dx of sum(3 x^2) = 6 x
}
