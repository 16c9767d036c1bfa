// gradcheck and allclose: the library checking itself.
#include "autograd/gradcheck.h"

#include <cmath>
#include <random>

#include "autograd/grad_mode.h"
#include "core/shape.h"

namespace minigrad {
namespace {

// Row-major multi-index of flat element `flat` in `sizes`, e.g. "[1, 2]".
std::string index_str(int64_t flat, const Shape& sizes) {
  Shape idx(sizes.size());
  for (size_t d = sizes.size(); d-- > 0;) {
    idx[d] = sizes[d] ? flat % sizes[d] : 0;
    flat = sizes[d] ? flat / sizes[d] : 0;
  }
  return shape_str(idx);
}

struct Checker {
  const GradcheckOptions& opt;
  GradcheckReport report;
  double worst_ratio = -1.0;  // error / tolerance of the worst entry so far

  void compare(double analytical, double numerical, int64_t input, int64_t element, int64_t output) {
    const double err = std::fabs(analytical - numerical);
    const double tol = opt.atol + opt.rtol * std::fabs(numerical);
    const bool ok = err <= tol;  // false for NaN: a NaN gradient never passes
    ++report.elements_checked;
    report.max_abs_error = std::max(report.max_abs_error, err);
    report.max_rel_error = std::max(report.max_rel_error, err / std::max(std::fabs(numerical), opt.atol));
    const double ratio = std::isnan(err) ? INFINITY : err / tol;  // > 1 means this entry failed
    if (!ok) report.passed = false;
    if (ratio > worst_ratio) {
      worst_ratio = ratio;
      report.worst_input = input;
      report.worst_element = element;
      report.worst_output = output;
      report.worst_analytical = analytical;
      report.worst_numerical = numerical;
    }
  }
};

}  // namespace

std::string GradcheckReport::summary() const {
  std::string where;
  if (worst_input >= 0)
    where = worst_element >= 0
                ? fmt::format("input {}, element {}, output element {}", worst_input, worst_element, worst_output)
                : fmt::format("input {} (random projection)", worst_input);
  return fmt::format(
      "gradcheck {}: {} entries compared, max abs error {:.3e}, max rel error {:.3e}; worst at {}: analytical "
      "{:.10g} vs numerical {:.10g}",
      passed ? "passed" : "FAILED", elements_checked, max_abs_error, max_rel_error, where.empty() ? "-" : where,
      worst_analytical, worst_numerical);
}

GradcheckReport gradcheck(const GradcheckFn& fn, const tensor_list& inputs, const GradcheckOptions& opt) {
  bool any = false;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& x = inputs[k];
    MG_CHECK(x.defined(), "gradcheck: input {} is undefined", k);
    if (!x.requires_grad()) continue;
    any = true;
    MG_CHECK(!opt.require_float64 || x.dtype() == kFloat64,
             "gradcheck: input {} is {}; finite differences need float64 (or set require_float64 = false)", k,
             x.dtype());
  }
  MG_CHECK(any, "gradcheck: no input requires grad, so there is nothing to check");

  // The inputs as the function sees them in the analytical pass: fresh leaves over the same
  // data (and the same strides), so the user's tensors get no .grad from the check.
  auto fresh_leaves = [&] {
    tensor_list xs;
    for (const Tensor& x : inputs) {
      Tensor leaf = x.detach();
      if (x.requires_grad()) leaf.requires_grad_(true);
      xs.push_back(leaf);
    }
    return xs;
  };
  std::vector<std::vector<double>> base;
  for (const Tensor& x : inputs) base.push_back(x.to_vector<double>());
  // f with input k replaced by base[k] + delta, flattened to doubles.
  auto eval_shifted = [&](size_t k, const std::vector<double>& shifted) {
    NoGradGuard no_grad;
    tensor_list xs = inputs;
    xs[k] = from_vector(shifted, inputs[k].sizes(), TensorOptions(inputs[k].dtype()).device(inputs[k].device()));
    return fn(xs).to_vector<double>();
  };

  Tensor out0 = [&] {
    NoGradGuard no_grad;
    return fn(inputs);
  }();
  MG_CHECK(out0.defined() && is_floating(out0.dtype()), "gradcheck: the function must return a floating-point tensor");
  const int64_t n_out = out0.numel();
  const TensorOptions out_options = TensorOptions(out0.dtype()).device(out0.device());

  Checker check{opt, {}};
  if (opt.random_projections == 0) {
    // Analytical Jacobian, row by row: backward of a one-hot gradient per output element.
    std::vector<std::vector<double>> analytical(inputs.size());
    for (size_t k = 0; k < inputs.size(); ++k) analytical[k].assign(base[k].size() * static_cast<size_t>(n_out), 0.0);
    for (int64_t j = 0; j < n_out; ++j) {
      tensor_list xs = fresh_leaves();
      Tensor out = fn(xs);
      std::vector<double> one_hot(static_cast<size_t>(n_out), 0.0);
      one_hot[static_cast<size_t>(j)] = 1.0;
      out.backward(from_vector(one_hot, out.sizes(), out_options));
      for (size_t k = 0; k < inputs.size(); ++k) {
        if (!inputs[k].requires_grad() || !xs[k].grad().defined()) continue;  // unreached: gradient 0
        const std::vector<double> g = xs[k].grad().to_vector<double>();
        for (size_t i = 0; i < g.size(); ++i) analytical[k][static_cast<size_t>(j) * g.size() + i] = g[i];
      }
    }
    // Numerical Jacobian, column by column: perturb one input element at a time.
    for (size_t k = 0; k < inputs.size(); ++k) {
      if (!inputs[k].requires_grad()) continue;
      const size_t n_in = base[k].size();
      for (size_t i = 0; i < n_in; ++i) {
        std::vector<double> shifted = base[k];
        shifted[i] = base[k][i] + opt.eps;
        const std::vector<double> plus = eval_shifted(k, shifted);
        shifted[i] = base[k][i] - opt.eps;
        const std::vector<double> minus = eval_shifted(k, shifted);
        for (int64_t j = 0; j < n_out; ++j) {
          const double numerical = (plus[static_cast<size_t>(j)] - minus[static_cast<size_t>(j)]) / (2.0 * opt.eps);
          check.compare(analytical[k][static_cast<size_t>(j) * n_in + i], numerical, static_cast<int64_t>(k),
                        static_cast<int64_t>(i), j);
        }
      }
    }
  } else {
    // v^T J u for random v (output) and u (one input at a time).
    std::mt19937_64 rng(opt.seed);
    std::normal_distribution<double> normal;
    for (int p = 0; p < opt.random_projections; ++p) {
      std::vector<double> v(static_cast<size_t>(n_out));
      for (double& x : v) x = normal(rng);
      tensor_list xs = fresh_leaves();
      Tensor out = fn(xs);
      out.backward(from_vector(v, out.sizes(), out_options));
      for (size_t k = 0; k < inputs.size(); ++k) {
        if (!inputs[k].requires_grad()) continue;
        std::vector<double> u(base[k].size());
        for (double& x : u) x = normal(rng);
        double analytical = 0.0;
        if (xs[k].grad().defined()) {
          const std::vector<double> g = xs[k].grad().to_vector<double>();
          for (size_t i = 0; i < g.size(); ++i) analytical += g[i] * u[i];
        }
        std::vector<double> shifted(base[k].size());
        for (size_t i = 0; i < u.size(); ++i) shifted[i] = base[k][i] + opt.eps * u[i];
        const std::vector<double> plus = eval_shifted(k, shifted);
        for (size_t i = 0; i < u.size(); ++i) shifted[i] = base[k][i] - opt.eps * u[i];
        const std::vector<double> minus = eval_shifted(k, shifted);
        double numerical = 0.0;
        for (size_t j = 0; j < v.size(); ++j) numerical += (plus[j] - minus[j]) / (2.0 * opt.eps) * v[j];
        check.compare(analytical, numerical, static_cast<int64_t>(k), -1, -1);
      }
    }
  }
  return check.report;
}

AllcloseReport allclose_report(const Tensor& actual, const Tensor& expected, double rtol, double atol) {
  MG_CHECK(actual.defined(), "allclose: argument 'actual' is an undefined tensor");
  MG_CHECK(expected.defined(), "allclose: argument 'expected' is an undefined tensor");
  AllcloseReport r;
  if (actual.sizes() != expected.sizes()) {
    r.passed = false;
    r.message = fmt::format("allclose: shapes differ, actual {} vs expected {}", shape_str(actual.sizes()),
                            shape_str(expected.sizes()));
    return r;
  }
  const std::vector<double> a = actual.to_vector<double>();
  const std::vector<double> e = expected.to_vector<double>();
  struct Bad {
    size_t i;
    double excess;
  };
  std::vector<Bad> bad;
  for (size_t i = 0; i < a.size(); ++i) {
    const bool both_nan = std::isnan(a[i]) && std::isnan(e[i]);
    const bool same_inf = std::isinf(a[i]) && a[i] == e[i];
    if (both_nan || same_inf) continue;
    const double err = std::fabs(a[i] - e[i]);
    if (!std::isnan(err)) r.max_abs_error = std::max(r.max_abs_error, err);
    const double tol = atol + rtol * std::fabs(e[i]);
    if (!(err <= tol)) bad.push_back({i, std::isnan(err) ? INFINITY : err - tol});
  }
  r.mismatches = static_cast<int64_t>(bad.size());
  r.passed = bad.empty();
  if (r.passed) {
    r.message = fmt::format("allclose: {} elements within rtol {} atol {} (max abs error {:.3e})", a.size(), rtol,
                            atol, r.max_abs_error);
    return r;
  }
  std::sort(bad.begin(), bad.end(), [](const Bad& x, const Bad& y) { return x.excess > y.excess; });
  r.message = fmt::format("allclose: {} of {} elements differ (rtol {}, atol {}); the worst:", bad.size(), a.size(),
                          rtol, atol);
  for (size_t n = 0; n < std::min<size_t>(bad.size(), 5); ++n) {
    const size_t i = bad[n].i;
    r.message += fmt::format("\n  at {}: actual {:.10g}, expected {:.10g}, abs error {:.3e}",
                             index_str(static_cast<int64_t>(i), actual.sizes()), a[i], e[i], std::fabs(a[i] - e[i]));
  }
  return r;
}

bool allclose(const Tensor& actual, const Tensor& expected, double rtol, double atol) {
  return allclose_report(actual, expected, rtol, atol).passed;
}

}  // namespace minigrad
