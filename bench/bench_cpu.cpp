// Benchmark: minigrad's CPU kernels at fixed shapes, float32.
//
//   gelu 2048x4096       forward (exact, erf), and forward + backward
//   softmax 2048x4096    over the last dim
//   sum 4096x1024        over dim 0, and over dim 1
//   matmul               1024x1024 @ 1024x1024
//   fused ops 2048x4096  layer_norm_gelu, layer_norm, rms_norm (over 4096) and
//                        softmax_dropout (p = 0.1), forward + backward, each beside its
//                        composite twin (the same math as primitive ops on the tape): the
//                        fused op should take at most half the twin's time
//   the overhead chain   2000 ops on 8-element tensors (bench/overhead_chain.h), us per op,
//                        without and with autograd
//
// Each op gets fresh random inputs (randn, so no kernel can take a shortcut on zeros), is
// checked once against a few values computed here, then timed: warm-up calls, then the
// median and the fastest of the timed calls. Memory-bound ops report GB/s over the bytes
// they must move, matmul GFLOP/s over 2*M*N*K; bench/cpu_bench_common.h says how bytes are
// counted. bench/compare_libtorch/ times the same ops in LibTorch with the same header, and
// bench/run-cpu-compare runs both side by side.
//
//   bench_cpu [--json PATH] [--reps N] [--only NAME]
//
// The thread count in the rows is MINIGRAD_NUM_THREADS (every core when unset): the size of
// the library's thread pool, where it has one.
#include <cmath>
#include <functional>
#include <optional>
#include <string>

#include <fmt/core.h>

#include "bench/cpu_bench_common.h"
#include "bench/overhead_chain.h"
#include <minigrad/minigrad.h>

using namespace minigrad;
namespace cb = cpu_bench;

static_assert(cb::kChainLength == bench::kChainLength, "the LibTorch chain must be as long as ours");

namespace {

// The checks: a handful of elements recomputed in double precision from the inputs. A
// kernel that is fast because it is wrong must not make it into the table.
bool close(double got, double want, double tol = 1e-4) { return std::abs(got - want) <= tol * (1 + std::abs(want)); }

double gelu_ref(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double gelu_grad_ref(double x) {
  const double phi = std::exp(-0.5 * x * x) / std::sqrt(2 * std::acos(-1.0));
  return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) + x * phi;
}

// Elements to check: spread over the tensor, first and last included.
std::vector<int64_t> sample_indices(int64_t n) { return {0, n / 7, n / 3, n / 2, n - 1}; }

bool check_failed(const char* op) {
  fmt::print(stderr, "{}: the result is wrong; not timed\n", op);
  return false;
}

bool bench_gelu(const cb::Options& o, cb::Reporter& report) {
  const Tensor x = randn({cb::kGeluRows, cb::kGeluCols});
  const Tensor grad = randn({cb::kGeluRows, cb::kGeluCols});
  const int64_t n = x.numel();
  const std::string shape = cb::shape_2d(cb::kGeluRows, cb::kGeluCols);

  // The forward and backward, both checked, on a leaf that records.
  Tensor leaf = x.detach().clone().requires_grad_();
  gelu(leaf).backward(grad);
  const float* xs = x.data_ptr<float>();
  const float* gs = grad.data_ptr<float>();
  const Tensor y = gelu(x);
  for (int64_t i : sample_indices(n)) {
    if (!close(y.data_ptr<float>()[i], gelu_ref(xs[i])) ||
        !close(leaf.grad().data_ptr<float>()[i], gs[i] * gelu_grad_ref(xs[i])))
      return check_failed("gelu");
  }

  if (cb::selected(o, "gelu_fwd"))
    report.add(cb::bandwidth_row("gelu_fwd", shape, cb::time_op([&] { gelu(x); }, o.reps), cb::bytes_unary(n)));
  if (cb::selected(o, "gelu_fwd_bwd")) {
    const cb::Timing t = cb::time_op(
        [&] {
          // Each call starts from no gradient, so none is accumulated into an old one.
          leaf.mutable_grad() = Tensor();
          gelu(leaf).backward(grad);
        },
        o.reps);
    report.add(cb::bandwidth_row("gelu_fwd_bwd", shape, t, cb::bytes_gelu_forward_backward(n)));
  }
  return true;
}

bool bench_softmax(const cb::Options& o, cb::Reporter& report) {
  const Tensor x = randn({cb::kSoftmaxRows, cb::kSoftmaxCols});
  const int64_t cols = cb::kSoftmaxCols;
  const Tensor y = softmax(x, -1);
  for (int64_t row : {int64_t{0}, cb::kSoftmaxRows / 2, cb::kSoftmaxRows - 1}) {
    const float* xr = x.data_ptr<float>() + row * cols;
    double max = xr[0], denominator = 0;
    for (int64_t j = 0; j < cols; ++j) max = std::max(max, double(xr[j]));
    for (int64_t j = 0; j < cols; ++j) denominator += std::exp(xr[j] - max);
    for (int64_t j : {int64_t{0}, cols / 3, cols - 1})
      if (!close(y.data_ptr<float>()[row * cols + j], std::exp(xr[j] - max) / denominator, 1e-3))
        return check_failed("softmax");
  }
  const cb::Timing t = cb::time_op([&] { softmax(x, -1); }, o.reps);
  report.add(cb::bandwidth_row("softmax", cb::shape_2d(cb::kSoftmaxRows, cols), t, cb::bytes_unary(x.numel())));
  return true;
}

bool bench_sum(const cb::Options& o, cb::Reporter& report) {
  const int64_t rows = cb::kSumRows, cols = cb::kSumCols;
  const Tensor x = randn({rows, cols});
  const float* xs = x.data_ptr<float>();
  const Tensor over_rows = sum(x, {0});  // one value per column
  const Tensor over_cols = sum(x, {1});  // one value per row
  for (int64_t k : {int64_t{0}, int64_t{cols / 2}, cols - 1}) {
    double column = 0, row = 0;
    for (int64_t i = 0; i < rows; ++i) column += xs[i * cols + k];
    for (int64_t j = 0; j < cols; ++j) row += xs[k * cols + j];
    // Sums of thousands of N(0, 1) values are of size ~sqrt(n): an absolute tolerance.
    if (std::abs(over_rows.data_ptr<float>()[k] - column) > 1e-2 || std::abs(over_cols.data_ptr<float>()[k] - row) > 1e-2)
      return check_failed("sum");
  }
  const std::string shape = cb::shape_2d(rows, cols);
  for (int dim : {0, 1}) {
    const std::string op = "sum_dim" + std::to_string(dim);
    if (!cb::selected(o, op)) continue;
    const cb::Timing t = cb::time_op([&] { sum(x, {dim}); }, o.reps);
    report.add(cb::bandwidth_row(op, shape, t, cb::bytes_sum(rows, cols, dim)));
  }
  return true;
}

bool bench_matmul(const cb::Options& o, cb::Reporter& report) {
  const int64_t m = cb::kMatmulM, k = cb::kMatmulK, n = cb::kMatmulN;
  const Tensor a = randn({m, k});
  const Tensor b = randn({k, n});
  const Tensor c = matmul(a, b);
  const float* as = a.data_ptr<float>();
  const float* bs = b.data_ptr<float>();
  for (int64_t i : {int64_t{0}, m / 2, m - 1}) {
    for (int64_t j : {int64_t{0}, n / 3, n - 1}) {
      double want = 0;
      for (int64_t p = 0; p < k; ++p) want += double(as[i * k + p]) * bs[p * n + j];
      if (std::abs(c.data_ptr<float>()[i * n + j] - want) > 1e-2) return check_failed("matmul");
    }
  }
  const cb::Timing t = cb::time_op([&] { matmul(a, b); }, o.reps);
  const std::string shape = cb::shape_2d(m, k) + "@" + cb::shape_2d(k, n);
  report.add(cb::matmul_row("matmul", shape, t, cb::matmul_flops(m, k, n)));
  return true;
}

bool bench_chain(const cb::Options& o, cb::Reporter& report) {
  const Tensor offset = randn({cb::kChainElements});
  const Tensor twice_offset = offset * 2.0;
  const Tensor input = randn({cb::kChainElements});
  Tensor x = input.detach().clone().requires_grad_();
  bench::run_chain(x, offset, twice_offset).sum().backward();
  if (!allclose(bench::run_chain(input, offset, twice_offset), input, 1e-5, 1e-5) || !allclose(x.grad(), ones_like(x)))
    return check_failed("chain");

  const std::string shape = std::to_string(cb::kChainElements) + " x" + std::to_string(cb::kChainLength) + " ops";
  if (cb::selected(o, "chain_nograd")) {
    const cb::Timing t = cb::time_op(
        [&] {
          NoGradGuard no_grad;
          bench::run_chain(input, offset, twice_offset);
        },
        o.reps);
    report.add(cb::chain_row("chain_nograd", shape, t, cb::kChainLength));
  }
  if (cb::selected(o, "chain_autograd")) {
    // The graph is built, replayed and destroyed inside the timed call, as in bench_overhead.
    const cb::Timing t = cb::time_op(
        [&] {
          x.mutable_grad() = Tensor();
          bench::run_chain(x, offset, twice_offset).sum().backward();
        },
        o.reps);
    report.add(cb::chain_row("chain_autograd", shape, t, cb::kChainLength));
  }
  return true;
}

// The fused ops and their twins, forward + backward. Each pair is checked against each
// other first (values and the input's gradient), then timed one after the other. Bytes:
// the fused floor, 5 tensor-sized transfers (bench/cpu_bench_common.h), for both rows, so
// the two rates compare as the times do.
bool bench_fused(const cb::Options& o, cb::Reporter& report) {
  const int64_t rows = cb::kFusedRows, hidden = cb::kFusedCols;
  const Tensor x = randn({rows, hidden});
  const Tensor grad = randn({rows, hidden});
  const Tensor weight = 1.0 + 0.1 * randn({hidden}), bias = 0.1 * randn({hidden});
  const Shape normalized = {hidden};
  // Two generators in one state: the fused op and its twin draw the same dropout mask.
  Generator fused_generator(7), twin_generator(7);
  using Fn = std::function<Tensor(const Tensor& x, const Tensor& w, const Tensor& b)>;
  struct Pair {
    const char* op;
    Fn fused, twin;
  };
  const Pair pairs[] = {
      {"fused_layer_norm_gelu",
       [&](const Tensor& t, const Tensor& w, const Tensor& b) { return layer_norm_gelu(t, normalized, w, b); },
       [&](const Tensor& t, const Tensor& w, const Tensor& b) {
         return composite::layer_norm_gelu(t, normalized, w, b);
       }},
      {"fused_layer_norm",
       [&](const Tensor& t, const Tensor& w, const Tensor& b) { return layer_norm(t, normalized, w, b); },
       [&](const Tensor& t, const Tensor& w, const Tensor& b) { return composite::layer_norm(t, normalized, w, b); }},
      {"fused_rms_norm", [&](const Tensor& t, const Tensor& w, const Tensor&) { return rms_norm(t, normalized, w); },
       [&](const Tensor& t, const Tensor& w, const Tensor&) { return composite::rms_norm(t, normalized, w); }},
      {"fused_softmax_dropout",
       [&](const Tensor& t, const Tensor&, const Tensor&) {
         return softmax_dropout(t, -1, 0.1, true, std::nullopt, false, std::nullopt, &fused_generator);
       },
       [&](const Tensor& t, const Tensor&, const Tensor&) {
         return composite::softmax_dropout(t, -1, 0.1, true, std::nullopt, false, std::nullopt, &twin_generator);
       }},
  };
  const std::string shape = cb::shape_2d(rows, hidden);
  bool correct = true;
  for (const Pair& pair : pairs) {
    if (!cb::selected(o, pair.op) && !cb::selected(o, std::string(pair.op) + "_composite")) continue;
    Tensor leaf = x.detach().clone().requires_grad_();
    Tensor w = weight.detach().clone().requires_grad_(), b = bias.detach().clone().requires_grad_();
    auto forward_backward = [&](const Fn& f) {
      for (Tensor* t : {&leaf, &w, &b}) t->mutable_grad() = Tensor();  // gradients written fresh
      const Tensor y = f(leaf, w, b);
      y.backward(grad);
      return y;
    };
    const Tensor fused_y = forward_backward(pair.fused);
    const Tensor fused_grad = leaf.grad();
    const Tensor twin_y = forward_backward(pair.twin);
    if (!allclose(fused_y, twin_y, 1e-4, 1e-5) || !allclose(fused_grad, leaf.grad(), 1e-3, 1e-4)) {
      correct = check_failed(pair.op);
      continue;
    }
    const double bytes = cb::bytes_gelu_forward_backward(x.numel());
    const cb::Timing fused_t = cb::time_op([&] { forward_backward(pair.fused); }, o.reps);
    report.add(cb::bandwidth_row(pair.op, shape, fused_t, bytes));
    const cb::Timing twin_t = cb::time_op([&] { forward_backward(pair.twin); }, o.reps);
    report.add(cb::bandwidth_row(std::string(pair.op) + "_composite", shape, twin_t, bytes));
    fmt::print("  {}: the twin takes {:.2f}x the fused op's time (median)\n", pair.op,
               twin_t.median_ms / fused_t.median_ms);
  }
  return correct;
}

}  // namespace

int main(int argc, char** argv) {
  cb::Options options;
  if (!cb::parse_args(argc, argv, /*with_threads=*/false, options)) return 2;
  cb::Reporter report("minigrad", options.threads, options.json_path);
  if (!report.ok()) return 2;

  manual_seed(0);
  struct Family {
    const char* name;
    bool (*run)(const cb::Options&, cb::Reporter&);
  };
  const Family families[] = {{"gelu", bench_gelu}, {"softmax", bench_softmax}, {"sum", bench_sum},
                             {"matmul", bench_matmul}, {"chain", bench_chain}, {"fused", bench_fused}};
  bool all_correct = true;
  bool any_selected = false;
  for (const Family& f : families) {
    // A family runs when --only names it, one of its rows, or nothing.
    if (!options.only.empty() && cb::family_of(options.only) != f.name) continue;
    any_selected = true;
    all_correct = f.run(options, report) && all_correct;
  }
  if (!any_selected) {
    cb::print_usage(argv[0], false);
    return 2;
  }
  if (!options.json_path.empty()) fmt::print("JSON lines written to {}\n", options.json_path);
  return all_correct ? 0 : 1;
}
