#pragma once
// gradcheck: compares the engine's gradients with central finite differences.
//
// For every input that requires grad, every element is perturbed by +-eps and the change
// of every output element is measured: (f(x + eps) - f(x - eps)) / (2 eps). The engine's
// side is the full Jacobian, one backward pass per output element (a one-hot gradient).
// Inputs should be float64: in float32 the rounding error of f swamps eps.
// For large inputs, `random_projections` compares v^T J u for random v and u instead:
// one backward and two forwards per projection and input, instead of one per element.
#include <cstdint>
#include <functional>
#include <string>

#include <minigrad/core/tensor.h>

namespace minigrad {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
  // 0: the full Jacobian. N > 0: N random projections per input (for large inputs).
  int random_projections = 0;
  uint64_t seed = 0;
  // Refuse inputs that are not float64 (set false to check a float32 op loosely).
  bool require_float64 = true;
  // An input that requires grad but that no backward reaches (the output does not depend on
  // it) is an error: the check would compare zero with zero and say nothing. true takes its
  // gradient as zero instead, as autograd::grad's allow_unused does.
  bool allow_unused = false;
};

struct GradcheckReport {
  bool passed = true;
  double max_abs_error = 0.0;   // max |analytical - numerical|
  double max_rel_error = 0.0;   // max |analytical - numerical| / max(|numerical|, tiny)
  int64_t worst_input = -1;     // which input holds the worst element
  int64_t worst_element = -1;   // flat (row-major) index in that input; -1 in projection mode
  int64_t worst_output = -1;    // flat index in the output; -1 in projection mode
  double worst_analytical = 0.0;
  double worst_numerical = 0.0;
  int64_t elements_checked = 0;
  std::string check = "gradcheck";  // which check made the report: gradcheck or gradgradcheck
  std::string summary() const;      // one paragraph, for printing
};

using GradcheckFn = std::function<Tensor(const tensor_list&)>;

GradcheckReport gradcheck(const GradcheckFn& fn, const tensor_list& inputs, const GradcheckOptions& options = {});

// gradgradcheck: finite differences of the gradient, which checks second derivatives (the
// backward of the backward, as create_graph records it). The function checked is
//   G(inputs, grad_outputs) = autograd::grad(fn(inputs), inputs, grad_outputs, create_graph)
// one gradient per input that requires grad, and gradcheck compares G's analytical Jacobian
// (a second backward through the recorded first one) with central differences of G, with
// respect to the inputs and to the grad_outputs that require grad. Empty grad_outputs: random
// normal ones of the output's shape, from options.seed, requiring grad.
// In the report, worst_input counts the inputs first, then the grad_outputs; worst_output is
// a flat index into G's outputs laid end to end. An input whose first gradient does not depend
// on it (a linear op) is fine: its second derivative is zero. An input the output does not
// depend on at all is an error, as in gradcheck, unless options.allow_unused.
GradcheckReport gradgradcheck(const GradcheckFn& fn, const tensor_list& inputs, const tensor_list& grad_outputs = {},
                              const GradcheckOptions& options = {});

// The elementwise comparison behind CHECK_ALLCLOSE: |a - b| <= atol + rtol * |b|,
// NaN equal to NaN, shapes equal. `worst` lists the worst elements, formatted.
struct AllcloseReport {
  bool passed = true;
  double max_abs_error = 0.0;
  int64_t mismatches = 0;
  std::string message;
};
// (The public allclose(a, b, rtol, atol, equal_nan), LibTorch's, is an op: ops/ops.h.)
AllcloseReport allclose_report(const Tensor& actual, const Tensor& expected, double rtol = 1e-5, double atol = 1e-8);

}  // namespace minigrad
