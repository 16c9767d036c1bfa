// gradcheck and allclose: the library checking itself.
#include <minigrad/autograd/gradcheck.h>

#include <cmath>
#include <random>

#include <minigrad/autograd/engine.h>
#include <minigrad/autograd/grad_mode.h>
#include <minigrad/core/shape.h>

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
      "{} {}: {} entries compared, max abs error {:.3e}, max rel error {:.3e}; worst at {}: analytical "
      "{:.10g} vs numerical {:.10g}",
      check, passed ? "passed" : "FAILED", elements_checked, max_abs_error, max_rel_error, where.empty() ? "-" : where,
      worst_analytical, worst_numerical);
}

namespace {

// Grad mode on inside the scope: the checks need recorded forwards, even when the caller
// runs them under NoGradGuard.
class EnableGradScope {
 public:
  EnableGradScope() : prev_(GradMode::is_enabled()) { GradMode::set_enabled(true); }
  ~EnableGradScope() { GradMode::set_enabled(prev_); }
  EnableGradScope(const EnableGradScope&) = delete;
  EnableGradScope& operator=(const EnableGradScope&) = delete;

 private:
  bool prev_;
};

using MultiOutputFn = std::function<tensor_list(const tensor_list&)>;

// The check behind gradcheck and gradgradcheck, for a function of several outputs. The
// outputs count as one vector, laid end to end: output element j is element j - offset[o]
// of output o.
GradcheckReport check_jacobian(const char* check_name, const MultiOutputFn& fn, const tensor_list& inputs,
                               const GradcheckOptions& opt) {
  // The analytical pass needs a recorded forward: a check run under NoGradGuard works too.
  EnableGradScope grad_on;
  bool any = false;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& x = inputs[k];
    MG_CHECK(x.defined(), "{}: input {} is undefined", check_name, k);
    if (!x.requires_grad()) continue;
    any = true;
    MG_CHECK(!opt.require_float64 || x.dtype() == kFloat64,
             "{}: input {} is {}; finite differences need float64 (or set require_float64 = false)", check_name, k,
             x.dtype());
  }
  MG_CHECK(any, "{}: no input requires grad, so there is nothing to check", check_name);

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
  // The function's plain evaluations (the outputs' shapes, the finite differences) see the
  // inputs detached: nothing is recorded for them. Grad mode stays on, not off: a function
  // may take gradients inside (a gradient penalty, gradgradcheck's own function).
  auto detached = [&] {
    tensor_list xs;
    for (const Tensor& x : inputs) xs.push_back(x.detach());
    return xs;
  };
  // f with input k replaced by `shifted`, its outputs flattened to doubles end to end.
  auto eval_shifted = [&](size_t k, const std::vector<double>& shifted) {
    tensor_list xs = detached();
    xs[k] = from_vector(shifted, inputs[k].sizes(), TensorOptions(inputs[k].dtype()).device(inputs[k].device()));
    std::vector<double> flat;
    for (const Tensor& out : fn(xs)) {
      const std::vector<double> v = out.to_vector<double>();
      flat.insert(flat.end(), v.begin(), v.end());
    }
    return flat;
  };

  const tensor_list outs0 = fn(detached());
  MG_CHECK(!outs0.empty(), "{}: the function returned no outputs", check_name);
  std::vector<int64_t> offset;  // where each output starts in the flattened vector
  int64_t n_out = 0;
  for (const Tensor& out : outs0) {
    MG_CHECK(out.defined() && is_floating(out.dtype()), "{}: the function must return a floating-point tensor",
             check_name);
    offset.push_back(n_out);
    n_out += out.numel();
  }

  // The inputs a backward should reach, and whether one did: an input no backward reaches
  // is one the outputs do not depend on.
  std::vector<size_t> wanted;
  for (size_t k = 0; k < inputs.size(); ++k)
    if (inputs[k].requires_grad()) wanted.push_back(k);
  std::vector<bool> reached(inputs.size(), false);
  // Gradients of output o (weighted by `grad_out`) with respect to the wanted inputs: one
  // vector per input, empty where unreached (a zero gradient).
  // retain_graph: the outputs share one graph, and a projection backpropagates through each
  // of them in turn (gradgradcheck's G has one output per input that requires grad).
  auto backward_of = [&](const tensor_list& xs, const Tensor& out, const Tensor& grad_out, bool retain_graph) {
    std::vector<std::vector<double>> g(inputs.size());
    if (!out.requires_grad()) return g;  // depends on no input that requires grad
    tensor_list targets;
    for (size_t k : wanted) targets.push_back(xs[k]);
    const tensor_list grads = autograd::grad({out}, targets, {grad_out}, retain_graph, false, /*allow_unused=*/true);
    for (size_t w = 0; w < wanted.size(); ++w) {
      if (!grads[w].defined()) continue;
      reached[wanted[w]] = true;
      g[wanted[w]] = grads[w].to_vector<double>();
    }
    return g;
  };
  auto check_all_reached = [&] {
    if (opt.allow_unused) return;
    for (size_t k : wanted)
      MG_CHECK(reached[k],
               "{}: the output does not depend on input {}: it requires grad, but no backward from the output "
               "reaches it, so there is no gradient to check. Pass it without requires_grad, or set "
               "allow_unused = true to check its gradient as zero.",
               check_name, k);
  };

  Checker check{opt, {}};
  check.report.check = check_name;
  if (opt.random_projections == 0) {
    // Analytical Jacobian, row by row: backward of a one-hot gradient per output element.
    std::vector<std::vector<double>> analytical(inputs.size());
    for (size_t k = 0; k < inputs.size(); ++k) analytical[k].assign(base[k].size() * static_cast<size_t>(n_out), 0.0);
    for (size_t o = 0; o < outs0.size(); ++o) {
      const TensorOptions out_options = TensorOptions(outs0[o].dtype()).device(outs0[o].device());
      for (int64_t e = 0; e < outs0[o].numel(); ++e) {
        tensor_list xs = fresh_leaves();
        const tensor_list outs = fn(xs);
        std::vector<double> one_hot(static_cast<size_t>(outs0[o].numel()), 0.0);
        one_hot[static_cast<size_t>(e)] = 1.0;
        const auto g = backward_of(xs, outs[o], from_vector(one_hot, outs[o].sizes(), out_options), false);
        const size_t j = static_cast<size_t>(offset[o] + e);
        for (size_t k = 0; k < inputs.size(); ++k)
          for (size_t i = 0; i < g[k].size(); ++i) analytical[k][j * g[k].size() + i] = g[k][i];
      }
    }
    check_all_reached();
    // Numerical Jacobian, column by column: perturb one input element at a time.
    for (size_t k : wanted) {
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
    // v^T J u for random v (all outputs) and u (one input at a time).
    std::mt19937_64 rng(opt.seed);
    std::normal_distribution<double> normal;
    for (int p = 0; p < opt.random_projections; ++p) {
      std::vector<double> v(static_cast<size_t>(n_out));
      for (double& x : v) x = normal(rng);
      tensor_list xs = fresh_leaves();
      const tensor_list outs = fn(xs);
      std::vector<std::vector<double>> g(inputs.size());  // sum over outputs of v_o^T J_o
      for (size_t o = 0; o < outs.size(); ++o) {
        const std::vector<double> v_o(v.begin() + offset[o], v.begin() + offset[o] + outs[o].numel());
        const auto g_o = backward_of(
            xs, outs[o], from_vector(v_o, outs[o].sizes(), TensorOptions(outs[o].dtype()).device(outs[o].device())),
            /*retain_graph=*/o + 1 < outs.size());
        for (size_t k = 0; k < inputs.size(); ++k) {
          if (g_o[k].empty()) continue;
          if (g[k].empty()) g[k].assign(g_o[k].size(), 0.0);
          for (size_t i = 0; i < g_o[k].size(); ++i) g[k][i] += g_o[k][i];
        }
      }
      check_all_reached();
      for (size_t k : wanted) {
        std::vector<double> u(base[k].size());
        for (double& x : u) x = normal(rng);
        double analytical = 0.0;
        for (size_t i = 0; i < g[k].size(); ++i) analytical += g[k][i] * u[i];
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

}  // namespace

GradcheckReport gradcheck(const GradcheckFn& fn, const tensor_list& inputs, const GradcheckOptions& opt) {
  return check_jacobian("gradcheck", [&](const tensor_list& xs) { return tensor_list{fn(xs)}; }, inputs, opt);
}

GradcheckReport gradgradcheck(const GradcheckFn& fn, const tensor_list& inputs, const tensor_list& grad_outputs,
                              const GradcheckOptions& opt) {
  const size_t n = inputs.size();
  std::vector<size_t> wanted;  // the inputs that get a first gradient
  for (size_t k = 0; k < n; ++k) {
    MG_CHECK(inputs[k].defined(), "gradgradcheck: input {} is undefined", k);
    if (inputs[k].requires_grad()) wanted.push_back(k);
  }
  MG_CHECK(!wanted.empty(), "gradgradcheck: no input requires grad, so there is nothing to check");

  tensor_list plain_inputs;
  for (const Tensor& x : inputs) plain_inputs.push_back(x.detach());
  const Tensor out0 = [&] {
    EnableGradScope grad_on;  // as in check_jacobian: fn may take gradients inside
    return fn(plain_inputs);
  }();
  MG_CHECK(out0.defined() && is_floating(out0.dtype()),
           "gradgradcheck: the function must return a floating-point tensor");
  tensor_list gs = grad_outputs;
  if (gs.empty()) {
    // Random, not ones: a constant grad_output would leave parts of the second derivative
    // unexercised (a sum hides an error that is antisymmetric across elements).
    std::mt19937_64 rng(opt.seed + 0x9e3779b97f4a7c15ULL);
    std::normal_distribution<double> normal;
    std::vector<double> v(static_cast<size_t>(out0.numel()));
    for (double& x : v) x = normal(rng);
    gs.push_back(from_vector(v, out0.sizes(), out0.options()).requires_grad_());
  }
  MG_CHECK(gs.size() == 1, "gradgradcheck: got {} grad_outputs for the function's one output", gs.size());
  const Tensor& g = gs[0];
  MG_CHECK(g.defined() && g.sizes() == out0.sizes() && g.dtype() == out0.dtype() && g.device() == out0.device(),
           "gradgradcheck: grad_outputs[0] must match the output ({} {} on {}), got {}",
           shape_str(out0.sizes()), out0.dtype(), out0.device(),
           g.defined() ? fmt::format("{} {} on {}", shape_str(g.sizes()), g.dtype(), g.device()) : "undefined");
  MG_CHECK(!opt.require_float64 || !g.requires_grad() || g.dtype() == kFloat64,
           "gradgradcheck: grad_outputs[0] is {}; finite differences need float64 (or set require_float64 = false)",
           g.dtype());

  // G(inputs, grad_output): the first gradients, recorded (create_graph) so that the outer
  // check can differentiate them. Its plain evaluations get detached inputs: G makes the
  // wanted ones leaves again, to have something to differentiate.
  auto first_gradients = [&, wanted](const tensor_list& all) {
    // Recorded only where the outer check differentiates the result (its analytical pass,
    // whose inputs require grad).
    bool create_graph = false;
    for (const Tensor& t : all) create_graph = create_graph || t.requires_grad();
    tensor_list xs(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n));
    tensor_list targets;
    for (size_t k : wanted) {
      if (!xs[k].requires_grad()) xs[k] = xs[k].detach().requires_grad_();
      targets.push_back(xs[k]);
    }
    const Tensor out = fn(xs);
    MG_CHECK(out.requires_grad(),
             "gradgradcheck: the output does not depend on input {} (nor on any input that requires grad), so there "
             "is no gradient to check",
             wanted[0]);
    tensor_list grads = autograd::grad({out}, targets, {all[n]}, std::nullopt, create_graph, /*allow_unused=*/true);
    for (size_t w = 0; w < grads.size(); ++w) {
      if (grads[w].defined()) continue;
      MG_CHECK(opt.allow_unused,
               "gradgradcheck: the output does not depend on input {}: it requires grad, but no backward from the "
               "output reaches it. Pass it without requires_grad, or set allow_unused = true to take its gradient "
               "as zero.",
               wanted[w]);
      grads[w] = zeros_like(targets[w]);
    }
    return grads;
  };

  tensor_list all = inputs;
  all.push_back(g);
  // Second derivatives that are structurally zero (the gradient of a linear op does not
  // depend on its input) are expected here: the outer check takes them as zero.
  GradcheckOptions outer = opt;
  outer.allow_unused = true;
  return check_jacobian("gradgradcheck", first_gradients, all, outer);
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

}  // namespace minigrad
