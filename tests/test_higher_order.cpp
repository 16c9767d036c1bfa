// Higher-order gradients of every public differentiable op, on the CPU: the table in
// tests/higher_order_table.h says which ops are twice differentiable (gradgradcheck in
// float64 must pass) and which are once differentiable (a second backward must be an error
// naming the op). The last cases check the harness itself: it must fail a wrong entry.
#include "tests/higher_order_table.h"

using namespace minigrad;
using namespace minigrad::test;

namespace {

// Its backward is a kernel the tape cannot see through.
struct SquareOnce : Function<SquareOnce> {
  static constexpr bool is_once_differentiable = true;
  static Tensor forward(Context& ctx, const Tensor& x) {
    ctx.save_for_backward({x});
    return x * x;
  }
  static tensor_list backward(Context& ctx, tensor_list g) { return {g[0] * ctx.saved_tensors()[0] * 2.0}; }
};

// Right first derivative (2 x g), wrong second: the backward takes 2 x through a detached
// copy, so differentiating it again misses the x-dependence.
struct SquareDetachedBackward : Function<SquareDetachedBackward> {
  static Tensor forward(Context& ctx, const Tensor& x) {
    ctx.save_for_backward({x});
    return x * x;
  }
  static tensor_list backward(Context& ctx, tensor_list g) { return {g[0] * ctx.saved_tensors()[0].detach() * 2.0}; }
};

HigherOrderCase local_case(const char* name, Order order, GradcheckFn fn, std::string once_function = {}) {
  return {name, order, [] { return tensor_list{normal({3})}; }, std::move(fn), std::move(once_function)};
}

}  // namespace

TEST_CASE("every twice-differentiable op passes gradgradcheck in float64") {
  run_higher_order_table(Order::Twice, kCPU);
}

TEST_CASE("every once-differentiable op refuses a second backward, naming the op") {
  run_higher_order_table(Order::Once, kCPU);
}

TEST_CASE("the table's names are unique, so a failure names one entry") {
  const auto& cases = higher_order_cases();
  for (size_t i = 0; i < cases.size(); ++i)
    for (size_t j = i + 1; j < cases.size(); ++j) CHECK_MESSAGE(cases[i].name != cases[j].name, cases[i].name);
}

TEST_CASE("the harness passes a once-differentiable Function, and fails one flagged wrongly") {
  const auto once = [](const tensor_list& x) { return SquareOnce::apply(x[0]); };
  CHECK(run_higher_order_case(local_case("once", Order::Once, once, "SquareOnce"), 0, kCPU).empty());
  // Flagged twice differentiable, it fails (the second backward is an error)...
  const std::string as_twice = run_higher_order_case(local_case("once as twice", Order::Twice, once), 0, kCPU);
  CHECK(as_twice.find("SquareOnce.backward is once differentiable") != std::string::npos);
  // ... and the error must name the right Function.
  CHECK(!run_higher_order_case(local_case("wrong name", Order::Once, once, "Other"), 0, kCPU).empty());
  // A twice-differentiable op flagged once differentiable: the second backward succeeds.
  const auto twice = [](const tensor_list& x) { return x[0] * x[0]; };
  CHECK(run_higher_order_case(local_case("twice as once", Order::Once, twice, "Mul"), 0, kCPU) ==
        "a second backward through this once-differentiable op did not fail");
}

TEST_CASE("the harness fails an op whose second derivative is wrong") {
  const auto fn = [](const tensor_list& x) { return SquareDetachedBackward::apply(x[0]); };
  const std::string problem = run_higher_order_case(local_case("detached", Order::Twice, fn), 0, kCPU);
  CHECK(problem.find("gradgradcheck FAILED") != std::string::npos);
}
