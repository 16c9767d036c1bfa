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
  CHECK(allclose(a, a));
  CHECK(!allclose(a, from_vector<double>({1, 2, 3, 4}, {2, 2})));  // NaN vs a number fails
  CHECK(!allclose_report(a, from_vector<double>({1, 2, 3}, {3})).passed);
  CHECK_THROWS_CONTAINING(allclose(Tensor(), a), "allclose: argument 'actual' is an undefined tensor");
}
