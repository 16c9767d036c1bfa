// Benchmark: minigrad's CPU kernels at fixed shapes, float32.
//
//   gelu 2048x4096       forward (exact, erf), and forward + backward
//   softmax 2048x4096    over the last dim
//   sum 4096x1024        over dim 0, and over dim 1
//   matmul               1024x1024 @ 1024x1024
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
                             {"matmul", bench_matmul}, {"chain", bench_chain}};
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
