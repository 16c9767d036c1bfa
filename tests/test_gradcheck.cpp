// gradcheck and allclose themselves: they must pass right gradients and catch wrong ones.
#include "tests/test_support.h"

using namespace minigrad;

namespace {

// f(a, b) = a * b^2 with a deliberately wrong gradient for b (b instead of 2ab).
template <bool kCorrect>
struct MulSquare : Function<MulSquare<kCorrect>> {
  static Tensor forward(Context& ctx, const Tensor& a, const Tensor& b) {
    ctx.save_for_backward({a, b});
    return a * b * b;
  }
  static tensor_list backward(Context& ctx, tensor_list g) {
    tensor_list s = ctx.saved_tensors();
    const Tensor& a = s[0];
    const Tensor& b = s[1];
    Tensor grad_b = kCorrect ? g[0] * a * b * 2.0 : g[0] * b;
    return {g[0] * b * b, grad_b};
  }
};

tensor_list two_inputs() {
  manual_seed(7);
  return {randn({2, 3}, kFloat64).requires_grad_(), randn({2, 3}, kFloat64).requires_grad_()};
}

}  // namespace

TEST_CASE("gradcheck passes a correct backward over the full Jacobian") {
  auto fn = [](const tensor_list& x) { return MulSquare<true>::apply(x[0], x[1]); };
  GradcheckReport r = gradcheck(fn, two_inputs());
  INFO(r.summary());
  CHECK(r.passed);
  CHECK(r.elements_checked == 2 * 6 * 6);  // two inputs x 6 elements x 6 outputs
  CHECK(r.max_abs_error < 1e-7);
}

TEST_CASE("gradcheck catches a wrong backward and reports where") {
  auto fn = [](const tensor_list& x) { return MulSquare<false>::apply(x[0], x[1]); };
  GradcheckReport r = gradcheck(fn, two_inputs());
  CHECK(!r.passed);
  CHECK(r.worst_input == 1);                   // only b's gradient is wrong
  CHECK(r.worst_element == r.worst_output);    // elementwise op: the Jacobian is diagonal
  CHECK(r.summary().find("FAILED") != std::string::npos);
  CHECK(r.max_abs_error > 1e-2);
}

TEST_CASE("gradcheck by random projections: passes the right backward, catches the wrong one") {
  GradcheckOptions opt;
  opt.random_projections = 4;
  auto good = [](const tensor_list& x) { return MulSquare<true>::apply(x[0], x[1]); };
  auto bad = [](const tensor_list& x) { return MulSquare<false>::apply(x[0], x[1]); };
  GradcheckReport r = gradcheck(good, two_inputs(), opt);
  INFO(r.summary());
  CHECK(r.passed);
  CHECK(r.elements_checked == 8);
  GradcheckReport w = gradcheck(bad, two_inputs(), opt);
  CHECK(!w.passed);
  CHECK(w.worst_input == 1);
  CHECK(w.worst_element == -1);
}

TEST_CASE("gradcheck reports the entry furthest over its tolerance, not the first failure") {
  // Two outputs, both wrong: output 1 much more so. f(a) = [a0^2, a1^2]; backward says [a0, a1 - 10].
  struct TwoWrong : Function<TwoWrong> {
    static Tensor forward(Context& ctx, const Tensor& a) {
      ctx.save_for_backward({a});
      return a * a;
    }
    static tensor_list backward(Context& ctx, tensor_list g) {
      Tensor a = ctx.saved_tensors()[0];
      return {g[0] * (a + from_vector<double>({0, -10}, {2}))};
    }
  };
  Tensor a = from_vector<double>({1, 1}, {2}).requires_grad_();
  GradcheckReport r = gradcheck([](const tensor_list& x) { return TwoWrong::apply(x[0]); }, {a});
  CHECK(!r.passed);
  CHECK(r.worst_element == 1);
  CHECK(r.worst_analytical == doctest::Approx(-9.0));
  CHECK(r.worst_numerical == doctest::Approx(2.0));
}

TEST_CASE("gradcheck refuses float32 inputs and inputs that need no gradient") {
  auto fn = [](const tensor_list& x) { return x[0] * 2.0; };
  CHECK_THROWS_CONTAINING(gradcheck(fn, {randn({2}).requires_grad_()}), "gradcheck: input 0 is float32");
  CHECK_THROWS_CONTAINING(gradcheck(fn, {randn({2}, kFloat64)}), "no input requires grad");
  GradcheckOptions loose;
  loose.require_float64 = false;
  loose.eps = 1e-2;
  loose.atol = 1e-2;
  CHECK(gradcheck(fn, {randn({2}).requires_grad_()}, loose).passed);
}

TEST_CASE("gradcheck leaves the caller's tensors without .grad") {
  tensor_list xs = two_inputs();
  CHECK_GRADCHECK([](const tensor_list& x) { return MulSquare<true>::apply(x[0], x[1]); }, xs);
  CHECK(!xs[0].grad().defined());
}

TEST_CASE("allclose reports the worst elements, treats NaN as equal to NaN") {
  Tensor a = from_vector<double>({1, 2, 3, NAN}, {2, 2});
  Tensor b = from_vector<double>({1, 2.5, 3, NAN}, {2, 2});
  AllcloseReport r = allclose_report(a, b, 1e-5, 1e-8);
  CHECK(!r.passed);
  CHECK(r.mismatches == 1);
  CHECK(r.message.find("at [0, 1]: actual 2, expected 2.5") != std::string::npos);
  CHECK(allclose_report(a, a).passed);
  CHECK(!allclose_report(a, from_vector<double>({1, 2, 3, 4}, {2, 2})).passed);  // NaN vs a number fails
  CHECK(!allclose_report(a, from_vector<double>({1, 2, 3}, {3})).passed);
  CHECK_THROWS_CONTAINING(allclose_report(Tensor(), a), "allclose: argument 'actual' is an undefined tensor");
}

namespace {

// x -> x^2 with a wrong backward (g * x instead of 2 g x). Used only inside the backward of
// Cube below: Cube's first derivative is right, its second is not.
struct SquareWrongBackward : Function<SquareWrongBackward> {
  static Tensor forward(Context& ctx, const Tensor& x) {
    ctx.save_for_backward({x});
    return x * x;
  }
  static tensor_list backward(Context& ctx, tensor_list g) { return {g[0] * ctx.saved_tensors()[0]}; }
};

// x -> x^3, backward 3 x^2 g: right values, but x^2 is taken through SquareWrongBackward, so
// differentiating the backward again gives 3 x g (instead of 6 x g).
template <bool kCorrect>
struct Cube : Function<Cube<kCorrect>> {
  static Tensor forward(Context& ctx, const Tensor& x) {
    ctx.save_for_backward({x});
    return x * x * x;
  }
  static tensor_list backward(Context& ctx, tensor_list g) {
    const Tensor x = ctx.saved_tensors()[0];
    const Tensor x2 = kCorrect ? x * x : SquareWrongBackward::apply(x);
    return {g[0] * x2 * 3.0};
  }
};

// A backward that is a "kernel" the tape cannot see through.
struct OnceOnly : Function<OnceOnly> {
  static constexpr bool is_once_differentiable = true;
  static Tensor forward(Context& ctx, const Tensor& x) {
    ctx.save_for_backward({x});
    return x * x;
  }
  static tensor_list backward(Context& ctx, tensor_list g) { return {g[0] * ctx.saved_tensors()[0] * 2.0}; }
};

}  // namespace

TEST_CASE("gradgradcheck passes right second derivatives, over the inputs and the grad_outputs") {
  auto fn = [](const tensor_list& x) { return MulSquare<true>::apply(x[0], x[1]); };
  GradcheckReport r = gradgradcheck(fn, two_inputs());
  INFO(r.summary());
  CHECK(r.passed);
  CHECK(r.check == "gradgradcheck");
  CHECK(r.summary().rfind("gradgradcheck passed", 0) == 0);
  // G(a, b, g) has 2 x 6 outputs (the gradients of a and b); 3 inputs of 6 elements each.
  CHECK(r.elements_checked == 12 * 18);
  CHECK_GRADGRADCHECK([](const tensor_list& x) { return Cube<true>::apply(x[0]); },
                      tensor_list{randn({5}, kFloat64).requires_grad_()});
}

TEST_CASE("gradgradcheck catches a backward whose values are right but whose derivative is wrong") {
  manual_seed(3);
  const tensor_list x = {randn({4}, kFloat64).requires_grad_()};
  auto fn = [](const tensor_list& in) { return Cube<false>::apply(in[0]); };
  GradcheckReport first = gradcheck(fn, x);
  INFO(first.summary());
  CHECK(first.passed);  // first derivatives cannot see it
  GradcheckReport second = gradgradcheck(fn, x);
  INFO(second.summary());
  CHECK(!second.passed);
  CHECK(second.worst_input == 0);  // d/dx of the gradient is wrong; d/dg is right
}

TEST_CASE("gradgradcheck takes given grad_outputs; one that does not require grad is not checked") {
  auto fn = [](const tensor_list& x) { return MulSquare<true>::apply(x[0], x[1]); };
  const Tensor g = randn({2, 3}, kFloat64);  // no requires_grad: only the inputs are perturbed
  GradcheckReport r = gradgradcheck(fn, two_inputs(), {g});
  INFO(r.summary());
  CHECK(r.passed);
  CHECK(r.elements_checked == 12 * 12);
  GradcheckOptions projections;
  projections.random_projections = 3;
  CHECK_GRADGRADCHECK_OPTS(fn, two_inputs(), tensor_list{}, projections);
}

TEST_CASE("gradgradcheck of a linear op passes: its second derivative is zero, not missing") {
  CHECK_GRADGRADCHECK([](const tensor_list& x) { return x[0] * 3.0 - x[1]; }, two_inputs());
}

TEST_CASE("gradgradcheck of a once-differentiable Function is an error naming it") {
  CHECK_THROWS_CONTAINING(gradgradcheck([](const tensor_list& x) { return OnceOnly::apply(x[0]); },
                                        {randn({3}, kFloat64).requires_grad_()}),
                          "OnceOnly.backward is once differentiable");
}

TEST_CASE("gradgradcheck checks its grad_outputs") {
  auto fn = [](const tensor_list& x) { return x[0] * x[0]; };
  const tensor_list x = {randn({3}, kFloat64).requires_grad_()};
  CHECK_THROWS_CONTAINING(gradgradcheck(fn, x, {randn({4}, kFloat64)}), "gradgradcheck: grad_outputs[0] must match");
  CHECK_THROWS_CONTAINING(gradgradcheck(fn, x, {randn({3}, kFloat64), randn({3}, kFloat64)}),
                          "gradgradcheck: got 2 grad_outputs");
  CHECK_THROWS_CONTAINING(gradgradcheck(fn, x, {randn({3}, kFloat64).to(kFloat32)}),
                          "gradgradcheck: grad_outputs[0] must match");
  CHECK_THROWS_CONTAINING(gradgradcheck(fn, {randn({3}, kFloat64)}), "gradgradcheck: no input requires grad");
}

TEST_CASE("gradcheck of a function that ignores an input says so, in its own words") {
  auto ignores_b = [](const tensor_list& x) { return x[0] * 2.0; };
  CHECK_THROWS_CONTAINING(gradcheck(ignores_b, two_inputs()), "gradcheck: the output does not depend on input 1");
  GradcheckOptions projections;
  projections.random_projections = 2;
  CHECK_THROWS_CONTAINING(gradcheck(ignores_b, two_inputs(), projections),
                          "gradcheck: the output does not depend on input 1");
  // Ignoring every input: the output has no history at all.
  auto constant = [](const tensor_list& x) { return zeros_like(x[0]); };
  CHECK_THROWS_CONTAINING(gradcheck(constant, two_inputs()), "gradcheck: the output does not depend on input 0");
  CHECK_THROWS_CONTAINING(gradgradcheck(ignores_b, two_inputs()),
                          "gradgradcheck: the output does not depend on input 1");
  CHECK_THROWS_CONTAINING(gradgradcheck(constant, two_inputs()),
                          "gradgradcheck: the output does not depend on input 0");
  // Asked for: the ignored input's gradient is checked as zero.
  GradcheckOptions allow;
  allow.allow_unused = true;
  CHECK_GRADCHECK_OPTS(ignores_b, two_inputs(), allow);
  CHECK_GRADGRADCHECK_OPTS(ignores_b, two_inputs(), tensor_list{}, allow);
}

TEST_CASE("gradcheck of a function that takes a gradient inside it (a gradient penalty)") {
  // The finite differences evaluate the function with grad mode on (only the inputs are
  // detached), so a function that calls autograd::grad works in both passes.
  const Tensor points = from_vector<double>({0.5, -1.0, 2.0, 0.3, -0.7, 1.1}, {2, 3});
  auto penalty = [&](const tensor_list& in) {
    Tensor x = points.detach().requires_grad_();
    Tensor scores = tanh(matmul(x, in[0]));
    Tensor grad_x = autograd::grad({scores.sum()}, {x}, {}, std::nullopt, /*create_graph=*/true)[0];
    return (grad_x * grad_x).sum();
  };
  CHECK_GRADCHECK(penalty, tensor_list{from_vector<double>({0.3, -0.2, 0.5}, {3}).requires_grad_()});
}

TEST_CASE("gradcheck and gradgradcheck work under NoGradGuard, and leave grad mode as it was") {
  NoGradGuard no_grad;
  auto fn = [](const tensor_list& x) { return MulSquare<true>::apply(x[0], x[1]); };
  CHECK_GRADCHECK(fn, two_inputs());
  CHECK_GRADGRADCHECK(fn, two_inputs());
  CHECK(!GradMode::is_enabled());
}

TEST_CASE("gradgradcheck with random projections, two inputs: the first gradients share one graph") {
  // G(a, b, g) has one output per input (dG/da and dG/db), recorded in one graph: the
  // projection backpropagates through each in turn, so the graph must outlive the first.
  auto product_of_squares = [](const tensor_list& x) {
    const Tensor p = x[0] * x[1];  // used twice: both first gradients go through its node
    return p * p;
  };
  GradcheckOptions projections;
  projections.random_projections = 3;
  const GradcheckReport report = gradgradcheck(product_of_squares, two_inputs(), {}, projections);
  INFO(report.summary());
  CHECK(report.passed);
  CHECK(report.elements_checked > 0);
}
