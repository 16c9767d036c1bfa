// The LibTorch side of the CPU comparison: the ops of bench/bench_cpu.cpp at the same
// shapes, timed and reported the same way (bench/cpu_bench_common.h), with impl "libtorch".
// A measuring tool, built by its own CMake project (this folder), never by minigrad's.
//
//   compare_libtorch [--json PATH] [--reps N] [--only NAME] [--threads N]
//
// The threads: --threads, else MINIGRAD_NUM_THREADS, else every core; given to
// at::set_num_threads, which sizes LibTorch's intra-op pool (OpenMP) for every op here.
#include <string>

#include <ATen/Parallel.h>
#include <torch/types.h>
#include <torch/utils.h>

#include "../cpu_bench_common.h"

namespace cb = cpu_bench;

namespace {

void bench_gelu(const cb::Options& o, cb::Reporter& report) {
  const torch::Tensor x = torch::randn({cb::kGeluRows, cb::kGeluCols});
  const torch::Tensor grad = torch::randn({cb::kGeluRows, cb::kGeluCols});
  const std::string shape = cb::shape_2d(cb::kGeluRows, cb::kGeluCols);
  if (cb::selected(o, "gelu_fwd")) {
    // approximate "none", LibTorch's default: the exact form with erf, as minigrad's default.
    const cb::Timing t = cb::time_op([&] { at::gelu(x); }, o.reps);
    report.add(cb::bandwidth_row("gelu_fwd", shape, t, cb::bytes_unary(x.numel())));
  }
  if (cb::selected(o, "gelu_fwd_bwd")) {
    torch::Tensor leaf = x.detach().clone().requires_grad_();
    const cb::Timing t = cb::time_op(
        [&] {
          leaf.mutable_grad().reset();  // no accumulation into an old gradient
          at::gelu(leaf).backward(grad);
        },
        o.reps);
    report.add(cb::bandwidth_row("gelu_fwd_bwd", shape, t, cb::bytes_gelu_forward_backward(x.numel())));
  }
}

void bench_softmax(const cb::Options& o, cb::Reporter& report) {
  const torch::Tensor x = torch::randn({cb::kSoftmaxRows, cb::kSoftmaxCols});
  const cb::Timing t = cb::time_op([&] { at::softmax(x, -1); }, o.reps);
  report.add(cb::bandwidth_row("softmax", cb::shape_2d(cb::kSoftmaxRows, cb::kSoftmaxCols), t, cb::bytes_unary(x.numel())));
}

void bench_sum(const cb::Options& o, cb::Reporter& report) {
  const torch::Tensor x = torch::randn({cb::kSumRows, cb::kSumCols});
  for (int dim : {0, 1}) {
    const std::string op = "sum_dim" + std::to_string(dim);
    if (!cb::selected(o, op)) continue;
    const cb::Timing t = cb::time_op([&] { x.sum(dim); }, o.reps);
    report.add(cb::bandwidth_row(op, cb::shape_2d(cb::kSumRows, cb::kSumCols), t, cb::bytes_sum(cb::kSumRows, cb::kSumCols, dim)));
  }
}

void bench_matmul(const cb::Options& o, cb::Reporter& report) {
  const torch::Tensor a = torch::randn({cb::kMatmulM, cb::kMatmulK});
  const torch::Tensor b = torch::randn({cb::kMatmulK, cb::kMatmulN});
  const cb::Timing t = cb::time_op([&] { at::matmul(a, b); }, o.reps);
  const std::string shape = cb::shape_2d(cb::kMatmulM, cb::kMatmulK) + "@" + cb::shape_2d(cb::kMatmulK, cb::kMatmulN);
  report.add(cb::matmul_row("matmul", shape, t, cb::matmul_flops(cb::kMatmulM, cb::kMatmulK, cb::kMatmulN)));
}

// bench/overhead_chain.h in LibTorch ops: four at a time, y * 0.5 + offset, * 2 - 2 * offset.
torch::Tensor run_chain(const torch::Tensor& x, const torch::Tensor& offset, const torch::Tensor& twice_offset) {
  torch::Tensor y = x;
  for (int i = 0; i < cb::kChainLength; i += 4) {
    y = y * 0.5;
    y = y + offset;
    y = y * 2.0;
    y = y - twice_offset;
  }
  return y;
}

bool bench_chain(const cb::Options& o, cb::Reporter& report) {
  const torch::Tensor offset = torch::randn({cb::kChainElements});
  const torch::Tensor twice_offset = offset * 2.0;
  const torch::Tensor input = torch::randn({cb::kChainElements});
  torch::Tensor x = input.detach().clone().requires_grad_();
  run_chain(x, offset, twice_offset).sum().backward();
  if (!torch::allclose(run_chain(input, offset, twice_offset), input, 1e-5, 1e-5) ||
      !torch::allclose(x.grad(), torch::ones_like(x))) {
    std::fprintf(stderr, "chain: the result is wrong; not timed\n");
    return false;
  }
  const std::string shape = std::to_string(cb::kChainElements) + " x" + std::to_string(cb::kChainLength) + " ops";
  if (cb::selected(o, "chain_nograd")) {
    const cb::Timing t = cb::time_op(
        [&] {
          torch::NoGradGuard no_grad;
          run_chain(input, offset, twice_offset);
        },
        o.reps);
    report.add(cb::chain_row("chain_nograd", shape, t, cb::kChainLength));
  }
  if (cb::selected(o, "chain_autograd")) {
    const cb::Timing t = cb::time_op(
        [&] {
          x.mutable_grad().reset();
          run_chain(x, offset, twice_offset).sum().backward();
        },
        o.reps);
    report.add(cb::chain_row("chain_autograd", shape, t, cb::kChainLength));
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  cb::Options options;
  if (!cb::parse_args(argc, argv, /*with_threads=*/true, options)) return 2;
  at::set_num_threads(options.threads);
  cb::Reporter report("libtorch", at::get_num_threads(), options.json_path);
  if (!report.ok()) return 2;

  torch::manual_seed(0);
  const std::string family = cb::family_of(options.only);
  const auto wanted = [&](const char* name) { return options.only.empty() || family == name; };
  bool ok = true;
  if (wanted("gelu")) bench_gelu(options, report);
  if (wanted("softmax")) bench_softmax(options, report);
  if (wanted("sum")) bench_sum(options, report);
  if (wanted("matmul")) bench_matmul(options, report);
  if (wanted("chain")) ok = bench_chain(options, report);
  if (!options.json_path.empty()) std::printf("JSON lines written to %s\n", options.json_path.c_str());
  return ok ? 0 : 1;
}
