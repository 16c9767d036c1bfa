#pragma once
// The properties checked on every row of the op table (tests/op_table.h), shared by the
// CPU suite (tests/test_op_table.cpp) and the GPU suite (tests/test_cuda_op_table.cpp).
// Each check runs one row and returns what went wrong, or an empty string; check_rows runs
// one check over the rows it applies to and reports each failure with the row's name.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tests/op_table.h"

namespace minigrad {
namespace test {

// A seed of the row's own, from its name (FNV-1a): the same inputs whatever the row's place
// in the table, on every device and in every dtype.
inline uint64_t row_seed(const OpInfo& row) {
  uint64_t h = 1469598103934665603ull;
  for (const char c : row.name) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h;
}

inline tensor_list row_inputs(const OpInfo& row, Device device, DType dtype) {
  manual_seed(row_seed(row));
  return row.sample(Samples(device, dtype));
}

// The empty inputs: the row's own, or its sample inputs with the highest-rank ones emptied.
inline tensor_list row_empty_inputs(const OpInfo& row, Device device) {
  if (row.empty_sample) {
    manual_seed(row_seed(row));
    return row.empty_sample(Samples(device, kFloat64));
  }
  int64_t rank = 0;
  for (const Tensor& x : row_inputs(row, kCPU, kFloat64)) rank = std::max(rank, x.dim());
  manual_seed(row_seed(row));
  return row.sample(Samples(device, kFloat64, rank));
}

// Copies with the same values, requires_grad and device, whose storage is laid out
// differently: the last dim of size > 1 is doubled and every other element taken, so the
// kernels must read through the strides. Tensors of fewer than two elements are kept.
inline Tensor strided_copy(const Tensor& x) {
  int64_t dim = x.dim() - 1;
  while (dim >= 0 && x.size(dim) < 2) --dim;
  if (dim < 0) return x;
  Shape wide = x.sizes();
  wide[static_cast<size_t>(dim)] *= 2;
  NoGradGuard no_grad;
  const Tensor buffer = zeros(wide, x.options());
  Tensor strided = buffer.slice(dim, 0, wide[static_cast<size_t>(dim)], 2).detach();
  copy_into(strided, x.detach());
  if (x.requires_grad()) strided.requires_grad_();
  return strided;
}

// The inputs a gradient is taken for.
inline tensor_list grad_inputs(const tensor_list& xs) {
  tensor_list wanted;
  for (const Tensor& x : xs)
    if (x.requires_grad()) wanted.push_back(x);
  return wanted;
}

// One run of a row: its output, and for a differentiable row the gradients of
// sum(output * weights) in the inputs that require grad. The weights are normal values of
// the output's shape, drawn from the row's seed in float64 and rounded to `weights_dtype`
// (the dtype under test, so a float64 reference run sees the same weights).
struct RowRun {
  Tensor output;
  tensor_list grads;
};

inline RowRun run_row(const OpInfo& row, const tensor_list& inputs, DType weights_dtype) {
  RowRun r;
  r.output = row.fn(inputs);
  if (!row.has_grad()) return r;
  manual_seed(row_seed(row) + 1);
  const Tensor weights =
      randn(r.output.sizes(), kFloat64).to(weights_dtype).to(r.output.dtype()).to(r.output.device());
  r.grads = autograd::grad({r.output}, grad_inputs(inputs), {weights}, std::nullopt, false, /*allow_unused=*/true);
  return r;
}

// "" when actual matches expected within tol, else what differs, labelled with `what`.
inline std::string compare(const std::string& what, const Tensor& actual, const Tensor& expected, Tolerance tol) {
  if (actual.defined() != expected.defined())
    return what + (actual.defined() ? " is defined, the reference's is not" : " is undefined, the reference's is not");
  if (!actual.defined()) return {};
  const AllcloseReport r = allclose_report(actual, expected, tol.rtol, tol.atol);
  return r.passed ? std::string() : what + ": " + r.message;
}

inline std::string compare_runs(const RowRun& actual, const RowRun& expected, Tolerance tol) {
  std::string problem = compare("the output", actual.output, expected.output, tol);
  if (actual.grads.size() != expected.grads.size()) return problem + "; a different number of gradients";
  for (size_t i = 0; i < actual.grads.size() && problem.empty(); ++i)
    problem = compare("the gradient of input " + std::to_string(i), actual.grads[i], expected.grads[i], tol);
  return problem;
}

// Runs `check` on every row `applies` to; each failure is a failed CHECK that starts with
// the row's name, and the failing rows are listed at the end. A property that applies to
// no row fails, unless `some_row_applies` is false.
inline void check_rows(const std::function<bool(const OpInfo&)>& applies,
                       const std::function<std::string(const OpInfo&)>& check, bool some_row_applies = true) {
  std::string failed;
  size_t ran = 0;
  for (const OpInfo& row : op_table()) {
    if (!applies(row)) continue;
    ++ran;
    INFO("op: " << row.name);
    std::string problem;
    try {
      problem = check(row);
    } catch (const Error& e) {
      problem = std::string("error: ") + e.what();
    }
    if (problem.empty()) continue;
    failed += (failed.empty() ? "" : ", ") + row.name;
    FAIL_CHECK(row.name << ": " << problem);
  }
  if (some_row_applies) CHECK_MESSAGE(ran > 0, "no row of the table applies");
  if (!failed.empty()) MESSAGE("failing rows: " << failed);
}

inline bool every_row(const OpInfo&) { return true; }
inline bool twice_row(const OpInfo& row) { return row.differentiable == Differentiable::Twice; }
inline bool once_row(const OpInfo& row) { return row.differentiable == Differentiable::Once; }

// ---- the properties ----

// gradcheck in float64 on `device`; a row without a gradient must record none.
inline std::string check_gradcheck(const OpInfo& row, Device device) {
  const tensor_list xs = row_inputs(row, device, kFloat64);
  if (!row.has_grad()) return row.fn(xs).requires_grad() ? "the output of an op without a gradient requires grad" : "";
  const GradcheckReport r = gradcheck(row.fn, xs, row.gradcheck);
  return r.passed ? std::string() : r.summary();
}

inline std::string check_gradgradcheck(const OpInfo& row, Device device) {
  const GradcheckReport r = gradgradcheck(row.fn, row_inputs(row, device, kFloat64), {}, row.gradcheck);
  return r.passed ? std::string() : r.summary();
}

// A create_graph backward followed by a second backward, which must fail naming the
// row's Function.
inline std::string check_once_differentiable(const OpInfo& row, Device device) {
  const tensor_list xs = row_inputs(row, device, kFloat64);
  const tensor_list wanted = grad_inputs(xs);
  const Tensor out = row.fn(xs);
  const tensor_list first = autograd::grad({out}, wanted, {ones_like(out)}, std::nullopt, /*create_graph=*/true);
  Tensor total = first[0].sum();
  for (size_t i = 1; i < first.size(); ++i) total = total + first[i].sum();
  try {
    autograd::grad({total}, wanted, {}, std::nullopt, false, /*allow_unused=*/true);
  } catch (const Error& e) {
    const std::string expected = row.once_function + ".backward is once differentiable";
    const std::string what = e.what();
    return what.find(expected) != std::string::npos
               ? std::string()
               : "the second backward failed, but without naming " + row.once_function + ": " + what;
  }
  return "a second backward through this once-differentiable op did not fail";
}

// float64 on the CPU: the same values and gradients with every input strided at once, and
// with each input strided alone (the others contiguous).
inline std::string check_noncontiguous(const OpInfo& row) {
  const tensor_list xs = row_inputs(row, kCPU, kFloat64);
  const RowRun contiguous = run_row(row, xs, kFloat64);
  const Tolerance tol = row.tolerance_for(kFloat64);
  std::vector<std::pair<std::string, tensor_list>> layouts;
  tensor_list all;
  for (const Tensor& x : xs) all.push_back(strided_copy(x));
  for (size_t i = 0; i < xs.size(); ++i)
    if (xs[i].numel() > 1 && all[i].is_contiguous())
      return "the strided copy of input " + std::to_string(i) + " is contiguous";
  layouts.push_back({"every input strided", all});
  for (size_t i = 0; xs.size() > 1 && i < xs.size(); ++i) {
    tensor_list one = xs;
    one[i] = all[i];
    layouts.push_back({"input " + std::to_string(i) + " strided", one});
  }
  for (const auto& [label, inputs] : layouts) {
    const std::string problem = compare_runs(run_row(row, inputs, kFloat64), contiguous, tol);
    if (!problem.empty()) return label + ": " + problem;
  }
  return {};
}

// A size-0 dim: an empty output of the expected shape (and empty gradients of the inputs'
// shapes), or the expected error.
inline std::string check_empty(const OpInfo& row, Device device) {
  const tensor_list xs = row_empty_inputs(row, device);
  if (!row.empty_message.empty()) {
    try {
      row.fn(xs);
    } catch (const Error& e) {
      const std::string what = e.what();
      if (what.find(row.empty_message) != std::string::npos) return {};
      return "the error does not say '" + row.empty_message + "': " + what;
    }
    return "the empty inputs were accepted; the row says they are an error";
  }
  Shape expected;
  if (row.empty_output) {
    expected = *row.empty_output;
  } else {
    expected = row.fn(row_inputs(row, kCPU, kFloat64)).sizes();
    if (expected.empty()) return "the output is 0-d: the row must say its empty output's shape (empty_shape)";
    expected[0] = 0;
  }
  const RowRun r = run_row(row, xs, kFloat64);
  if (r.output.sizes() != expected)
    return "the output has shape " + shape_str(r.output.sizes()) + ", expected " + shape_str(expected);
  const tensor_list wanted = grad_inputs(xs);
  for (size_t i = 0; i < r.grads.size(); ++i)
    if (r.grads[i].defined() && r.grads[i].sizes() != wanted[i].sizes())
      return "gradient " + std::to_string(i) + " has shape " + shape_str(r.grads[i].sizes()) + ", its input " +
             shape_str(wanted[i].sizes());
  return {};
}

// The same inputs in float64 on the CPU, for a reference run: the values the op should
// give on inputs already rounded to a narrower dtype.
inline tensor_list float64_copies(const tensor_list& xs) {
  tensor_list copies;
  for (const Tensor& x : xs) {
    const Tensor on_cpu = x.detach().to(kCPU);
    copies.push_back(is_floating(x.dtype()) ? on_cpu.to(kFloat64).requires_grad_(x.requires_grad()) : on_cpu);
  }
  return copies;
}

// Gradients in their inputs' dtype and on their device.
inline std::string check_grad_placement(const RowRun& run, const tensor_list& inputs) {
  const tensor_list wanted = grad_inputs(inputs);
  for (size_t i = 0; i < run.grads.size(); ++i) {
    const Tensor& g = run.grads[i];
    if (!g.defined()) continue;
    if (g.dtype() != wanted[i].dtype() || g.device() != wanted[i].device())
      return fmt::format("gradient {} is {} on {}, its input {} on {}", i, g.dtype(), g.device(), wanted[i].dtype(),
                         wanted[i].device());
  }
  return {};
}

// On the CPU, in `dtype`: the values and gradients of the float64 run on the same
// (already rounded) inputs, within the row's tolerance for `dtype`.
inline std::string check_dtype(const OpInfo& row, DType dtype) {
  const tensor_list xs = row_inputs(row, kCPU, dtype);
  const RowRun run = run_row(row, xs, dtype);
  const std::string placement = check_grad_placement(run, xs);
  if (!placement.empty()) return placement;
  return compare_runs(run, run_row(row, float64_copies(xs), dtype), row.tolerance_for(dtype));
}

// The same row on `device` and on the CPU, in `dtype`: outputs of one dtype, gradients in
// their inputs' dtype and on their device, and values and gradients within the row's
// tolerance for `dtype`, against the CPU in float64 and, for float32 and the half types,
// the CPU's float64 run on the same rounded inputs (the check the CPU passes in
// check_dtype: each device's own rounding is measured, not the sum of both).
inline std::string check_device_vs_cpu(const OpInfo& row, Device device, DType dtype) {
  const tensor_list xs = row_inputs(row, device, dtype);
  const RowRun on_device = run_row(row, xs, dtype);
  const RowRun on_cpu = run_row(row, row_inputs(row, kCPU, dtype), dtype);
  if (on_device.output.dtype() != on_cpu.output.dtype())
    return fmt::format("the output is {} on {}, {} on the CPU", on_device.output.dtype(), device,
                       on_cpu.output.dtype());
  const std::string placement = check_grad_placement(on_device, xs);
  if (!placement.empty()) return placement;
  const RowRun reference = dtype == kFloat64 ? on_cpu : run_row(row, float64_copies(xs), dtype);
  return compare_runs(on_device, reference, row.tolerance_for(dtype));
}

}  // namespace test
}  // namespace minigrad
