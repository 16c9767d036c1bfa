#pragma once
// One table of every public differentiable op, for the higher-order suites (CPU:
// tests/test_higher_order.cpp, CUDA: tests/test_cuda_higher_order.cpp). Each entry says
// whether the op is twice differentiable (its backward is built from recorded ops, so
// gradgradcheck must pass in float64) or once differentiable (its backward is a kernel: a
// second backward through it must be an error naming its Function).
//
// Inputs are small and kept away from the points where an op has a kink (relu and abs at 0,
// clamp at its limits, max at ties) or is undefined (log, sqrt, pow and division near 0):
// finite differences across a kink measure a jump, not a derivative.
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "tests/test_support.h"

namespace minigrad {
namespace test {

enum class Order { Twice, Once };

struct HigherOrderCase {
  std::string name;
  Order order;
  std::function<tensor_list()> make_inputs;  // float64 on the CPU; those to check require grad
  GradcheckFn fn;
  std::string once_function = {};  // Order::Once: the Function the error must name
  GradcheckOptions options = {};
};

// ---- inputs ----
inline Tensor normal(const Shape& s) { return randn(s, kFloat64).requires_grad_(); }
// Uniform in [0.5, 1.5): for log, sqrt, pow's base and denominators.
inline Tensor positive(const Shape& s) { return (rand(s, kFloat64) + 0.5).requires_grad_(); }
// Normal values pushed at least `margin` away from `point` on either side.
inline Tensor away_from(const Shape& s, double point, double margin) {
  std::vector<double> v = randn(s, kFloat64).to_vector<double>();
  for (double& x : v) x = point + (x < 0 ? -1.0 : 1.0) * (margin + std::fabs(x));
  return from_vector(v, s).requires_grad_();
}
inline Tensor values(const std::vector<double>& v, const Shape& s) { return from_vector(v, s).requires_grad_(); }
// A fixed bool condition for where (1: take the first tensor).
inline Tensor mask(const std::vector<double>& v, const Shape& s, Device device) {
  return from_vector(v, s).to(device) > 0.5;
}

// float32 round trips measure float32 rounding: loose finite differences.
inline GradcheckOptions loose_options() {
  GradcheckOptions o;
  o.eps = 1e-3;
  o.atol = 1e-3;
  o.rtol = 1e-2;
  return o;
}

inline const std::vector<HigherOrderCase>& higher_order_cases() {
  using T = const tensor_list&;
  const Order twice = Order::Twice;
  static const std::vector<HigherOrderCase> cases = {
      // ---- arithmetic ----
      {"add", twice, [] { return tensor_list{normal({2, 3}), normal({2, 3})}; }, [](T x) { return add(x[0], x[1]); }},
      {"add, broadcast", twice, [] { return tensor_list{normal({2, 3}), normal({3})}; },
       [](T x) { return x[0] + x[1]; }},
      {"sub", twice, [] { return tensor_list{normal({2, 3}), normal({2, 1})}; }, [](T x) { return sub(x[0], x[1]); }},
      {"mul", twice, [] { return tensor_list{normal({2, 3}), normal({2, 3})}; }, [](T x) { return mul(x[0], x[1]); }},
      {"mul, broadcast", twice, [] { return tensor_list{normal({2, 1, 3}), normal({4, 1})}; },
       [](T x) { return x[0] * x[1]; }},
      {"div", twice, [] { return tensor_list{normal({2, 3}), away_from({2, 3}, 0.0, 0.5)}; },
       [](T x) { return div(x[0], x[1]); }},
      {"div, broadcast", twice, [] { return tensor_list{normal({2, 3}), away_from({3}, 0.0, 0.5)}; },
       [](T x) { return x[0] / x[1]; }},
      {"add scalar", twice, [] { return tensor_list{normal({2, 3})}; }, [](T x) { return add(x[0], 1.5); }},
      {"sub scalar", twice, [] { return tensor_list{normal({2, 3})}; }, [](T x) { return sub(x[0], 1.5); }},
      {"mul scalar", twice, [] { return tensor_list{normal({2, 3})}; }, [](T x) { return mul(x[0], -2.5); }},
      {"div scalar", twice, [] { return tensor_list{normal({2, 3})}; }, [](T x) { return div(x[0], 4.0); }},
      {"rsub", twice, [] { return tensor_list{normal({2, 3})}; }, [](T x) { return rsub(2.0, x[0]); }},
      {"rdiv", twice, [] { return tensor_list{away_from({2, 3}, 0.0, 0.5)}; }, [](T x) { return rdiv(2.0, x[0]); }},
      // ---- elementwise math ----
      {"neg", twice, [] { return tensor_list{normal({2, 3})}; }, [](T x) { return neg(x[0]); }},
      {"exp", twice, [] { return tensor_list{normal({2, 3})}; }, [](T x) { return exp(x[0]); }},
      {"log", twice, [] { return tensor_list{positive({2, 3})}; }, [](T x) { return log(x[0]); }},
      {"sqrt", twice, [] { return tensor_list{positive({2, 3})}; }, [](T x) { return sqrt(x[0]); }},
      {"erf", twice, [] { return tensor_list{normal({2, 3})}; }, [](T x) { return erf(x[0]); }},
      {"tanh", twice, [] { return tensor_list{normal({2, 3})}; }, [](T x) { return tanh(x[0]); }},
      {"sigmoid", twice, [] { return tensor_list{normal({2, 3})}; }, [](T x) { return sigmoid(x[0]); }},
      {"abs", twice, [] { return tensor_list{away_from({2, 3}, 0.0, 0.1)}; }, [](T x) { return abs(x[0]); }},
      {"pow, scalar exponent", twice, [] { return tensor_list{positive({2, 3})}; },
       [](T x) { return pow(x[0], 2.5); }},
      {"pow, integer exponent of a negative base", twice, [] { return tensor_list{normal({2, 3})}; },
       [](T x) { return pow(x[0], 3.0); }},
      {"pow, tensor exponent", twice, [] { return tensor_list{positive({2, 3}), normal({2, 3})}; },
       [](T x) { return pow(x[0], x[1]); }},
      {"pow, tensor exponent, broadcast", twice, [] { return tensor_list{positive({2, 3}), normal({3})}; },
       [](T x) { return pow(x[0], x[1]); }},
      {"clamp", twice,
       [] { return tensor_list{values({-1.3, -0.7, -0.2, 0.1, 0.3, 0.8, 1.4, -0.4}, {2, 4})}; },
       [](T x) { return clamp(x[0], -0.5, 0.5); }},
      {"clamp_min", twice, [] { return tensor_list{away_from({2, 3}, 0.25, 0.1)}; },
       [](T x) { return clamp_min(x[0], 0.25); }},
      {"clamp_max", twice, [] { return tensor_list{away_from({2, 3}, -0.25, 0.1)}; },
       [](T x) { return clamp_max(x[0], -0.25); }},
      {"where", twice, [] { return tensor_list{normal({2, 3}), normal({2, 3})}; },
       [](T x) { return where(mask({1, 0, 1, 0, 0, 1}, {2, 3}, x[0].device()), x[0], x[1]); }},
      {"where, broadcast", twice, [] { return tensor_list{normal({2, 3}), normal({3})}; },
       [](T x) { return where(mask({1, 0}, {2, 1}, x[0].device()), x[0], x[1]); }},
      // ---- reductions ----
      {"sum", twice, [] { return tensor_list{normal({2, 3})}; }, [](T x) { return x[0].sum(); }},
      {"sum over dims", twice, [] { return tensor_list{normal({2, 3, 2})}; }, [](T x) { return sum(x[0], {0, 2}); }},
      {"sum over a dim, keepdim", twice, [] { return tensor_list{normal({2, 3})}; },
       [](T x) { return x[0].sum({1}, true); }},
      {"mean", twice, [] { return tensor_list{normal({2, 3})}; }, [](T x) { return mean(x[0]); }},
      {"mean over dims, keepdim", twice, [] { return tensor_list{normal({2, 3, 2})}; },
       [](T x) { return x[0].mean({-1}, true); }},
      {"max", twice, [] { return tensor_list{normal({2, 3})}; }, [](T x) { return max(x[0]); }},
      {"max over a dim", twice, [] { return tensor_list{normal({3, 4})}; },
       [](T x) { return std::get<0>(x[0].max(1)); }},
      {"max over a dim, keepdim", twice, [] { return tensor_list{normal({3, 4})}; },
       [](T x) { return std::get<0>(max(x[0], 0, true)); }},
      // ---- matmul ----
      {"matmul 1-D x 1-D", twice, [] { return tensor_list{normal({4}), normal({4})}; },
       [](T x) { return matmul(x[0], x[1]); }},
      {"matmul 2-D x 1-D", twice, [] { return tensor_list{normal({3, 4}), normal({4})}; },
       [](T x) { return matmul(x[0], x[1]); }},
      {"matmul 1-D x 2-D", twice, [] { return tensor_list{normal({3}), normal({3, 2})}; },
       [](T x) { return matmul(x[0], x[1]); }},
      {"matmul 2-D x 2-D", twice, [] { return tensor_list{normal({2, 3}), normal({3, 2})}; },
       [](T x) { return matmul(x[0], x[1]); }},
      {"matmul batched", twice, [] { return tensor_list{normal({2, 2, 3}), normal({2, 3, 2})}; },
       [](T x) { return matmul(x[0], x[1]); }},
      {"matmul batched x 2-D", twice, [] { return tensor_list{normal({2, 2, 3}), normal({3, 2})}; },
       [](T x) { return matmul(x[0], x[1]); }},
      {"matmul, broadcast batch dims", twice, [] { return tensor_list{normal({2, 1, 2, 3}), normal({2, 3, 2})}; },
       [](T x) { return matmul(x[0], x[1]); }},
      // ---- softmax family ----
      {"softmax", twice, [] { return tensor_list{normal({2, 4})}; }, [](T x) { return softmax(x[0], 1); }},
      {"softmax over dim 0", twice, [] { return tensor_list{normal({3, 2})}; }, [](T x) { return softmax(x[0], 0); }},
      {"log_softmax", twice, [] { return tensor_list{normal({2, 4})}; }, [](T x) { return log_softmax(x[0], -1); }},
      // ---- activations ----
      {"relu", twice, [] { return tensor_list{away_from({2, 4}, 0.0, 0.1)}; }, [](T x) { return relu(x[0]); }},
      {"gelu", twice, [] { return tensor_list{normal({2, 4})}; }, [](T x) { return gelu(x[0]); }},
      {"gelu, tanh approximation", twice, [] { return tensor_list{normal({2, 4})}; },
       [](T x) { return gelu(x[0], GeluApproximation::Tanh); }},
      {"softplus", twice, [] { return tensor_list{normal({2, 4})}; }, [](T x) { return softplus(x[0], 2.0); }},
      // ---- views ----
      {"view", twice, [] { return tensor_list{normal({2, 3, 2})}; }, [](T x) { return x[0].view({3, -1}); }},
      {"reshape (a view)", twice, [] { return tensor_list{normal({2, 3, 2})}; },
       [](T x) { return x[0].reshape({6, 2}); }},
      {"reshape of a transpose (a copy)", twice, [] { return tensor_list{normal({2, 3})}; },
       [](T x) { return x[0].t().reshape({-1}); }},
      {"flatten", twice, [] { return tensor_list{normal({2, 3})}; }, [](T x) { return x[0].flatten(); }},
      {"transpose", twice, [] { return tensor_list{normal({2, 3, 2})}; }, [](T x) { return x[0].transpose(0, 2); }},
      {"t", twice, [] { return tensor_list{normal({2, 3})}; }, [](T x) { return x[0].t(); }},
      {"permute", twice, [] { return tensor_list{normal({2, 3, 2})}; }, [](T x) { return x[0].permute({2, 0, 1}); }},
      {"slice", twice, [] { return tensor_list{normal({3, 5})}; }, [](T x) { return x[0].slice(1, 1, 5, 2); }},
      {"slice, negative bounds", twice, [] { return tensor_list{normal({3, 5})}; },
       [](T x) { return x[0].slice(-1, -4, -1); }},
      {"select", twice, [] { return tensor_list{normal({3, 4})}; }, [](T x) { return x[0].select(0, 1); }},
      {"select, negative index", twice, [] { return tensor_list{normal({3, 4})}; },
       [](T x) { return x[0].select(-1, -1); }},
      {"expand", twice, [] { return tensor_list{normal({3, 1})}; }, [](T x) { return x[0].expand({2, 3, 4}); }},
      {"squeeze", twice, [] { return tensor_list{normal({3, 1, 2, 1})}; }, [](T x) { return x[0].squeeze(); }},
      {"squeeze a dim", twice, [] { return tensor_list{normal({3, 1, 2})}; }, [](T x) { return x[0].squeeze(1); }},
      {"unsqueeze", twice, [] { return tensor_list{normal({3, 2})}; }, [](T x) { return x[0].unsqueeze(-1); }},
      // ---- copies ----
      {"to(float32) and back", twice, [] { return tensor_list{normal({2, 3})}; },
       [](T x) { return x[0].to(kFloat32).to(kFloat64); }, {}, loose_options()},
      {"clone", twice, [] { return tensor_list{normal({2, 3})}; }, [](T x) { return x[0].clone(); }},
      {"contiguous of a transpose", twice, [] { return tensor_list{normal({2, 3})}; },
       [](T x) { return x[0].t().contiguous(); }},
  };
  return cases;
}

// The inputs of a case on `device`, made on the CPU from a seed of the case's own, so every
// case sees the same values on every device and in any order.
inline tensor_list case_inputs(const HigherOrderCase& c, size_t index, Device device) {
  manual_seed(1000 + index);
  tensor_list xs = c.make_inputs();
  for (Tensor& x : xs) {
    const bool wants_grad = x.requires_grad();
    x = x.detach().to(device);
    if (wants_grad) x.requires_grad_();
  }
  return xs;
}

// Runs one case: gradgradcheck for a twice-differentiable op, and for a once-differentiable
// one, a create_graph backward followed by a second backward, which must fail naming the
// op. Returns an empty string on success, else what went wrong.
inline std::string run_higher_order_case(const HigherOrderCase& c, size_t index, Device device) {
  const tensor_list xs = case_inputs(c, index, device);
  try {
    if (c.order == Order::Twice) {
      const GradcheckReport r = gradgradcheck(c.fn, xs, {}, c.options);
      return r.passed ? std::string() : r.summary();
    }
    tensor_list wanted;
    for (const Tensor& x : xs)
      if (x.requires_grad()) wanted.push_back(x);
    const Tensor out = c.fn(xs);
    const tensor_list first = autograd::grad({out}, wanted, {ones_like(out)}, std::nullopt, /*create_graph=*/true);
    Tensor total = first[0].sum();
    for (size_t i = 1; i < first.size(); ++i) total = total + first[i].sum();
    try {
      autograd::grad({total}, wanted, {}, std::nullopt, false, /*allow_unused=*/true);
    } catch (const Error& e) {
      const std::string expected = c.once_function + ".backward is once differentiable";
      const std::string what = e.what();
      return what.find(expected) != std::string::npos
                 ? std::string()
                 : "the second backward failed, but without naming " + c.once_function + ": " + what;
    }
    return "a second backward through this once-differentiable op did not fail";
  } catch (const Error& e) {
    return std::string("error: ") + e.what();
  }
}

// Every case of one order on `device`; each failure is reported with the case's name, and
// the names of all failing cases are listed at the end.
inline void run_higher_order_table(Order order, Device device) {
  const std::vector<HigherOrderCase>& cases = higher_order_cases();
  std::vector<std::string> failed;
  size_t ran = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    if (cases[i].order != order) continue;
    ++ran;
    const std::string problem = run_higher_order_case(cases[i], i, device);
    if (problem.empty()) continue;
    failed.push_back(cases[i].name);
    FAIL_CHECK(fmt::format("{} on {}: {}", cases[i].name, device, problem));
  }
  std::string names;
  for (const std::string& n : failed) names += (names.empty() ? "" : ", ") + n;
  if (!failed.empty()) MESSAGE(fmt::format("{} of {} cases failed on {}: {}", failed.size(), ran, device, names));
}

}  // namespace test
}  // namespace minigrad
