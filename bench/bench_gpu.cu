// Benchmark: minigrad's ops on the GPU against the hardware's limits, measured in one run.
//
// Every memory-bound op has a floor: the fewest bytes it must move (each input read once,
// each output written once) divided by the copy bandwidth measured here, a few seconds
// earlier, on the same GPU. Every matmul has a floor: its FLOPs divided by the matmul rate
// measured here. `roofline` = floor time / measured time, so 1.0 is the hardware's limit
// and the number says how far an op is from it, whatever the GPU.
//
// How each row is timed:
//   - CUDA events around each run, on the current stream. The runs are enqueued back to
//     back and the host waits once at the end, so the GPU never idles waiting for the host
//     to launch the next kernel: the events time the GPU's work, not the host's.
//   - warm-up first (the caching allocator fills its pools, cuBLAS picks its kernels, the
//     clocks rise from idle), then the median of many runs: robust to the odd slow run.
//   - inputs of 256 MiB, four times the H200's 60 MB L2, so every run streams from HBM;
//     drawn with randn, never zeros (zeros flatter a GPU: less power, higher clocks).
//   - peak_mib: the caching allocator's peak of live bytes during the row, inputs included
//     (they are live), as PyTorch's max_memory_allocated reports it; base_mib: the bytes live
//     when the row began (the inputs and the harness's other tensors), so that peak_mib -
//     base_mib is what the op allocated at its peak, comparable across harnesses.
//
// This file is a .cu only because it is a CUDA-only program (built with MINIGRAD_CUDA);
// it launches no kernel of its own: everything it times goes through minigrad's ops.
//
//   bench_gpu --json PATH [--date YYYY-MM-DD] [--commit SHA] [--attention-accuracy PATH]
//
// Writes the results JSON (format in bench/results/README.md) to PATH (bench/compare_pytorch.py then appends
// PyTorch's rows to the same file) and prints a table; with --attention-accuracy, the inputs and
// outputs of compare_pytorch.py's accuracy check of attention (write_attention_accuracy). Exits 1 if any row failed (the
// others are still measured and written), 2 on bad arguments or when no GPU is present.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "bench/overhead_chain.h"
#include <minigrad/cuda/runtime.h>
#include <minigrad/minigrad.h>

using namespace minigrad;
using bench::kChainLength;
using bench::run_chain;

namespace {

// The reference shapes: the ones PyTorch's anchor numbers in docs/perf-notes.md were measured at.
constexpr int64_t kRows = 16384, kCols = 8192;  // 128 Mi elements: 256 MiB in bf16
constexpr int64_t kMatmulSize = 8192;           // 8192^3: long enough that cuBLAS runs at its peak
constexpr int64_t kChainElements = 1024;        // small: the op's fixed cost dominates
constexpr double kMiB = 1024.0 * 1024.0;

// Enough runs for a stable median without spending the GPU round's time: about 0.3 s of
// timed work per row, at least 20 runs, at most 300.
constexpr double kTimedBudgetMs = 300.0;
constexpr int kMinRuns = 20, kMaxRuns = 300;
constexpr int kWarmupRuns = 5;

struct Row {
  std::string op, impl;
  Shape shape;
  std::string dtype, pass;
  std::optional<double> ms, gbps, tflops, roofline, peak_mib;
  std::string error;  // non-empty: the row failed, and why
  // MiB live when the row began (its inputs and what else the harness holds): peak_mib minus it
  // is what the op itself allocated at its peak.
  std::optional<double> base_mib;
};

struct Ceilings {
  std::optional<double> copy_gbps, matmul_tflops;
};

// Median GPU times of `works` in milliseconds, their runs taking turns (w0, w1, ..., w0, w1,
// ...): rows compared by a ratio are timed together, so that both see the same clocks (a GEMM's
// time drifts by 5% and more over seconds as the chip's clock follows its power and heat, and
// rows timed one after the other showed the drift in their ratio). Each work enqueues its
// kernels on the current stream and must not wait for them.
std::vector<double> median_gpu_ms(const std::vector<std::function<void()>>& works) {
  const cudaStream_t stream = cuda::current_stream();
  cudaEvent_t probe_start, probe_stop;
  MG_CUDA_CHECK(cudaEventCreate(&probe_start), "bench_gpu");
  MG_CUDA_CHECK(cudaEventCreate(&probe_stop), "bench_gpu");
  // The warm-up doubles as the estimate that sizes the timed loop.
  MG_CUDA_CHECK(cudaEventRecord(probe_start, stream), "bench_gpu");
  for (int i = 0; i < kWarmupRuns; ++i)
    for (const auto& work : works) work();
  MG_CUDA_CHECK(cudaEventRecord(probe_stop, stream), "bench_gpu");
  MG_CUDA_CHECK(cudaEventSynchronize(probe_stop), "bench_gpu");
  float warmup_ms = 0.f;
  MG_CUDA_CHECK(cudaEventElapsedTime(&warmup_ms, probe_start, probe_stop), "bench_gpu");
  MG_CUDA_CHECK(cudaEventDestroy(probe_start), "bench_gpu");
  MG_CUDA_CHECK(cudaEventDestroy(probe_stop), "bench_gpu");
  const double estimate_ms = std::max(1e-3, static_cast<double>(warmup_ms) / kWarmupRuns);
  const int runs = std::clamp(static_cast<int>(kTimedBudgetMs * works.size() / estimate_ms), kMinRuns, kMaxRuns);

  const size_t timings = static_cast<size_t>(runs) * works.size();  // run i of work k: i * works + k
  std::vector<cudaEvent_t> start(timings), stop(timings);
  for (size_t t = 0; t < timings; ++t) {
    MG_CUDA_CHECK(cudaEventCreate(&start[t]), "bench_gpu");
    MG_CUDA_CHECK(cudaEventCreate(&stop[t]), "bench_gpu");
  }
  for (size_t t = 0; t < timings; ++t) {
    MG_CUDA_CHECK(cudaEventRecord(start[t], stream), "bench_gpu");
    works[t % works.size()]();
    MG_CUDA_CHECK(cudaEventRecord(stop[t], stream), "bench_gpu");
  }
  MG_CUDA_CHECK(cudaEventSynchronize(stop.back()), "bench_gpu");
  std::vector<std::vector<double>> ms(works.size());
  for (size_t t = 0; t < timings; ++t) {
    float elapsed = 0.f;
    MG_CUDA_CHECK(cudaEventElapsedTime(&elapsed, start[t], stop[t]), "bench_gpu");
    ms[t % works.size()].push_back(elapsed);
    MG_CUDA_CHECK(cudaEventDestroy(start[t]), "bench_gpu");
    MG_CUDA_CHECK(cudaEventDestroy(stop[t]), "bench_gpu");
  }
  std::vector<double> medians;
  for (std::vector<double>& times : ms) {
    std::sort(times.begin(), times.end());
    medians.push_back(times[times.size() / 2]);
  }
  return medians;
}

// Median GPU time of `work` alone.
double median_gpu_ms(const std::function<void()>& work) { return median_gpu_ms(std::vector{work}).front(); }

double peak_mib_since_reset() { return static_cast<double>(cuda::allocator_stats().peak_allocated_bytes) / kMiB; }

// Resets the allocator's peak to what is live now, and returns that (a row's base_mib).
double reset_peak_mib() {
  cuda::reset_peak_stats();
  return static_cast<double>(cuda::allocator_stats().allocated_bytes) / kMiB;
}

// A memory-bound row: `bytes` is the floor's traffic (each input read once, each output
// written once).
Row memory_row(const std::string& op, const std::string& impl, const Shape& shape, DType dtype,
               const std::string& pass, double bytes, const Ceilings& ceilings, const std::function<void()>& work) {
  Row r{op, impl, shape, dtype_name(dtype), pass, {}, {}, {}, {}, {}, {}, {}};
  try {
    r.base_mib = reset_peak_mib();
    const double ms = median_gpu_ms(work);
    r.ms = ms;
    r.gbps = bytes / (ms * 1e-3) / 1e9;
    if (ceilings.copy_gbps) r.roofline = (bytes / (*ceilings.copy_gbps * 1e9)) / (ms * 1e-3);
    r.peak_mib = peak_mib_since_reset();
  } catch (const std::exception& e) {
    r.error = e.what();
  }
  return r;
}

// The per-op fixed cost on the GPU: host wall time of a chain of small ops, the wait for
// the GPU included, per op. Here the GPU's work is a few microseconds per kernel at most;
// what is measured is the framework's launch path (checks, allocation, tape, launch),
// over the same chain as bench_overhead (bench/overhead_chain.h).
Row chain_row(const std::string& pass, const std::function<void()>& run_once) {
  Row r{"chain_small_ops", "minigrad", {kChainElements}, "float32", pass, {}, {}, {}, {}, {}, {}, {}};
  try {
    r.base_mib = reset_peak_mib();
    for (int i = 0; i < 3; ++i) run_once();
    cuda::synchronize();
    std::vector<double> ms_per_op;
    for (int i = 0; i < 30; ++i) {
      const auto start = std::chrono::steady_clock::now();
      run_once();
      cuda::synchronize();  // the chain is done when the GPU is, not when the last launch returns
      const auto stop = std::chrono::steady_clock::now();
      ms_per_op.push_back(std::chrono::duration<double, std::milli>(stop - start).count() / kChainLength);
    }
    std::sort(ms_per_op.begin(), ms_per_op.end());
    r.ms = ms_per_op[ms_per_op.size() / 2];  // per op: the row's "ms" is the time of one op
    r.peak_mib = peak_mib_since_reset();
  } catch (const std::exception& e) {
    r.error = e.what();
  }
  return r;
}

std::string json_number(const std::optional<double>& v, int decimals) {
  if (!v || !std::isfinite(*v)) return "null";
  return fmt::format("{:.{}f}", *v, decimals);
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<int>(c));
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string json_shape(const Shape& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

// One row per line: easy to diff, and compare_pytorch.py rewrites the file the same way.
bool write_json(const std::string& path, const std::string& device, const std::string& date,
                const std::string& commit, const Ceilings& ceilings, const std::vector<Row>& rows) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return false;
  fmt::print(f, "{{\"device\": {}, \"date\": {}, \"commit\": {},\n", json_string(device), json_string(date),
             json_string(commit));
  fmt::print(f, " \"ceilings\": {{\"copy_gbps\": {}, \"bf16_matmul_tflops\": {}}},\n", json_number(ceilings.copy_gbps, 1),
             json_number(ceilings.matmul_tflops, 1));
  fmt::print(f, " \"rows\": [");
  bool first = true;
  for (const Row& r : rows) {
    if (!r.error.empty()) continue;  // a failed row has no numbers; the table and exit code report it
    fmt::print(f,
               "{}\n  {{\"op\": {}, \"impl\": {}, \"shape\": {}, \"dtype\": {}, \"pass\": {}, \"ms\": {}, "
               "\"gbps\": {}, \"tflops\": {}, \"roofline\": {}, \"peak_mib\": {}, \"base_mib\": {}}}",
               first ? "" : ",", json_string(r.op), json_string(r.impl), json_shape(r.shape), json_string(r.dtype),
               json_string(r.pass), json_number(r.ms, 6), json_number(r.gbps, 1), json_number(r.tflops, 1),
               json_number(r.roofline, 3), json_number(r.peak_mib, 1), json_number(r.base_mib, 1));
    first = false;
  }
  fmt::print(f, "\n]}}\n");
  return std::fclose(f) == 0;
}

std::string today_utc() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
  return buf;
}

std::string format_opt(const std::optional<double>& v, const char* spec) {
  return v ? fmt::format(fmt::runtime(spec), *v) : std::string("-");
}

// ---- the fused ops: normalizations and softmax with dropout ----
// Each against its composite twin (the same math as primitive ops on the tape) at the
// reference shapes, then a sweep of row lengths at 64 Mi elements. Floors: the forward
// reads x and writes y (2 n elements); forward + backward adds the backward's reads of x
// (or of the saved softmax) and of grad, and its write of grad_x: 5 n. The weights, biases
// and per-row statistics are under 0.1% of that and left out, as in the anchors.

constexpr int64_t kFusedElements = int64_t{64} * 1024 * 1024;  // 128 MiB in bf16, twice the L2
constexpr int64_t kNormHidden = 4096;                          // [16384, 4096]
constexpr double kDropoutP = 0.1;
const Shape kAttentionScores = {4, 16, 1024, 1024};  // (batch, heads, queries, keys)
const int64_t kSweepHidden[] = {512, 1024, 2048, 4096, 8192, 16384, 32768};

// One AdamW step (optim::AdamW::step) in float32 over GPT-2 124M's 124,439,808 parameters:
//   op "adamw": one tensor of that many elements;
//   op "adamw_gpt2_tensors": GPT-2's own 148 tensors (wte, wpe, 12 layers of 12, ln_f's 2),
//     from 50257 x 768 down to 768 elements: the same bytes, cut as a model cuts them.
// Both rows record the shape [124439808]. Floor: read p, g, m, v and write p, m, v, seven
// float32 streams. The gradients are drawn once and reused; the first step, which creates
// m and v, is taken before the timed ones.
void adamw_rows(std::vector<Row>& rows, const Ceilings& ceilings, Device gpu) {
  const TensorOptions f32_gpu = TensorOptions(kFloat32).device(gpu);
  const int64_t kEmbed = 768;
  std::vector<Shape> gpt2 = {{50257, kEmbed}, {1024, kEmbed}};
  for (int layer = 0; layer < 12; ++layer) {
    const std::vector<Shape> block = {{kEmbed}, {kEmbed},                  // ln_1 weight, bias
                                      {kEmbed, 3 * kEmbed}, {3 * kEmbed},  // attn.c_attn
                                      {kEmbed, kEmbed}, {kEmbed},          // attn.c_proj
                                      {kEmbed}, {kEmbed},                  // ln_2
                                      {kEmbed, 4 * kEmbed}, {4 * kEmbed},  // mlp.c_fc
                                      {4 * kEmbed, kEmbed}, {kEmbed}};     // mlp.c_proj
    gpt2.insert(gpt2.end(), block.begin(), block.end());
  }
  gpt2.push_back({kEmbed});  // ln_f weight
  gpt2.push_back({kEmbed});  // ln_f bias
  int64_t total = 0;
  for (const Shape& shape : gpt2) total += shape_numel(shape);
  const double bytes = 7.0 * static_cast<double>(total) * 4.0;
  auto step_row = [&](const char* op, const std::vector<Shape>& shapes) {
    std::vector<Tensor> params;
    for (const Shape& shape : shapes) {
      params.push_back(randn(shape, f32_gpu).requires_grad_());
      params.back().mutable_grad() = randn(shape, f32_gpu);
    }
    optim::AdamW adamw(params, optim::AdamWOptions{1e-3, 0.9, 0.999, 1e-8, 0.1});
    adamw.step();
    rows.push_back(memory_row(op, "minigrad", {total}, kFloat32, "full", bytes, ceilings, [&] { adamw.step(); }));
  };  // the parameters, gradients and moments (2 GiB) die here
  step_row("adamw", {Shape{total}});
  step_row("adamw_gpt2_tensors", gpt2);
  cuda::empty_cache();  // hands the 2 GiB back to the driver before the next rows
}

// The first numel(shape) elements of the contiguous `t`, as a contiguous tensor of that shape.
Tensor leading_view(const Tensor& t, const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return t.view({-1}).slice(0, 0, n).view(shape);
}

// f(inputs): inputs[0] is x, the rest its parameters (a normalization's weight and bias).
using FusedFn = std::function<Tensor(const tensor_list& inputs)>;

// A forward row and a forward + backward row of one op. In the full pass every input
// requires grad, and each run starts with no gradients, so the backward writes them fresh.
void fused_op_rows(std::vector<Row>& rows, const std::string& op, const std::string& impl, const Ceilings& ceilings,
                   const tensor_list& inputs, const Tensor& grad, const FusedFn& f) {
  const Tensor& x = inputs[0];
  const double bytes = static_cast<double>(x.numel()) * static_cast<double>(x.element_size());
  rows.push_back(memory_row(op, impl, x.sizes(), x.dtype(), "fwd", 2.0 * bytes, ceilings, [&] { f(inputs); }));
  tensor_list leaves;
  for (const Tensor& t : inputs) leaves.push_back(t.detach().requires_grad_());
  rows.push_back(memory_row(op, impl, x.sizes(), x.dtype(), "full", 5.0 * bytes, ceilings, [&] {
    for (Tensor& leaf : leaves) leaf.mutable_grad() = Tensor();
    f(leaves).backward(grad);
  }));
  for (Tensor& leaf : leaves) leaf.mutable_grad() = Tensor();  // would count in the next row's peak
}

void fused_rows(std::vector<Row>& rows, const Ceilings& ceilings, const Tensor& x_all, const Tensor& grad_all) {
  const TensorOptions bf16_gpu = TensorOptions(kBFloat16).device(x_all.device());
  auto inputs_of = [&](const Shape& shape) { return leading_view(x_all, shape); };
  auto grad_of = [&](const Shape& shape) { return leading_view(grad_all, shape); };

  // ---- normalizations ----
  const Shape normalized = {kNormHidden};
  const Tensor weight = randn(normalized, bf16_gpu), bias = randn(normalized, bf16_gpu);
  auto norm_rows = [&](const Shape& shape, bool with_twins, bool only_layer_norm_gelu) {
    const Tensor x = inputs_of(shape), grad = grad_of(shape);
    const Shape hidden = {shape.back()};
    const Tensor w = shape.back() == kNormHidden ? weight : randn(hidden, bf16_gpu);
    const Tensor b = shape.back() == kNormHidden ? bias : randn(hidden, bf16_gpu);
    struct Case {
      const char* op;
      const char* impl;
      FusedFn f;
    };
    std::vector<Case> cases = {
        {"layer_norm_gelu", "minigrad",
         [&](const tensor_list& in) { return layer_norm_gelu(in[0], hidden, in[1], in[2]); }},
        {"layer_norm_gelu", "minigrad_composite",
         [&](const tensor_list& in) { return composite::layer_norm_gelu(in[0], hidden, in[1], in[2]); }},
    };
    if (!only_layer_norm_gelu) {
      cases.push_back(
          {"layer_norm", "minigrad", [&](const tensor_list& in) { return layer_norm(in[0], hidden, in[1], in[2]); }});
      cases.push_back({"layer_norm", "minigrad_composite",
                       [&](const tensor_list& in) { return composite::layer_norm(in[0], hidden, in[1], in[2]); }});
      cases.push_back({"rms_norm", "minigrad", [&](const tensor_list& in) { return rms_norm(in[0], hidden, in[1]); }});
      cases.push_back({"rms_norm", "minigrad_composite",
                       [&](const tensor_list& in) { return composite::rms_norm(in[0], hidden, in[1]); }});
    }
    for (const Case& c : cases) {
      if (!with_twins && std::string(c.impl) == "minigrad_composite") continue;
      const bool has_bias = std::string(c.op) != "rms_norm";
      fused_op_rows(rows, c.op, c.impl, ceilings, has_bias ? tensor_list{x, w, b} : tensor_list{x, w}, grad, c.f);
    }
  };
  norm_rows({kFusedElements / kNormHidden, kNormHidden}, /*with_twins=*/true, /*only_layer_norm_gelu=*/false);

  // ---- softmax with dropout over attention-shaped scores ----
  {
    const Tensor scores = inputs_of(kAttentionScores), grad = grad_of(kAttentionScores);
    // A padding mask of [4, 1, 1, 1024], broadcast over heads and queries: batch b attends to
    // its first 1024 - 128 b keys (true = attend).
    const TensorOptions on_gpu = TensorOptions(kInt64).device(x_all.device());
    const Tensor lengths = from_vector<int64_t>({1024, 896, 768, 640}, {4, 1, 1, 1}, on_gpu);
    const Tensor padding = lt(arange(kAttentionScores.back(), on_gpu).view({1, 1, 1, -1}), lengths);
    struct Case {
      const char* op;
      std::optional<Tensor> mask;
      bool is_causal;
    };
    const Case cases[] = {{"softmax_dropout", std::nullopt, false},
                          {"softmax_dropout_causal", std::nullopt, true},
                          {"softmax_dropout_mask", padding, false}};
    for (const Case& c : cases) {
      fused_op_rows(rows, c.op, "minigrad", ceilings, {scores}, grad, [&](const tensor_list& in) {
        return softmax_dropout(in[0], -1, kDropoutP, /*training=*/true, c.mask, c.is_causal);
      });
      fused_op_rows(rows, c.op, "minigrad_composite", ceilings, {scores}, grad, [&](const tensor_list& in) {
        return composite::softmax_dropout(in[0], -1, kDropoutP, /*training=*/true, c.mask, c.is_causal);
      });
    }
  }

  // ---- the sweep: rows x hidden = 64 Mi elements ----
  for (int64_t hidden : kSweepHidden) {
    const Shape shape = {kFusedElements / hidden, hidden};
    if (hidden != kNormHidden) norm_rows(shape, /*with_twins=*/false, /*only_layer_norm_gelu=*/true);
    const Tensor x = inputs_of(shape), grad = grad_of(shape);
    fused_op_rows(rows, "softmax_dropout", "minigrad", ceilings, {x}, grad,
                  [&](const tensor_list& in) { return softmax_dropout(in[0], -1, kDropoutP); });
  }
}

// A GEMM-bound row's time, and its rate against the matmul ceiling (`flops` over the ceiling
// is its floor).
void set_gemm_time(Row& r, double ms, double flops, const Ceilings& ceilings) {
  r.ms = ms;
  r.tflops = flops / (ms * 1e-3) / 1e12;
  if (ceilings.matmul_tflops) r.roofline = *r.tflops / *ceilings.matmul_tflops;
}

// A GEMM-bound row.
Row gemm_row(const std::string& op, const std::string& impl, const Shape& shape, const std::string& pass,
             double flops, const Ceilings& ceilings, const std::function<void()>& work) {
  Row r{op, impl, shape, "bfloat16", pass, {}, {}, {}, {}, {}, {}, {}};
  try {
    r.base_mib = reset_peak_mib();
    set_gemm_time(r, median_gpu_ms(work), flops, ceilings);
    r.peak_mib = peak_mib_since_reset();
  } catch (const std::exception& e) {
    r.error = e.what();
  }
  return r;
}

// GEMM-bound rows whose targets are ratios of one another, timed together (median_gpu_ms,
// their runs taking turns). Each row's peak memory comes from a run of its own after
// `reset` (which returns the harness to the state each run starts from).
struct GemmCase {
  std::string op, impl;
  Shape shape;
  std::string pass;
  double flops;
  std::function<void()> work;
};
std::vector<Row> gemm_rows_together(const std::vector<GemmCase>& cases, const Ceilings& ceilings,
                                    const std::function<void()>& reset) {
  std::vector<Row> rows;
  for (const GemmCase& c : cases)
    rows.push_back(Row{c.op, c.impl, c.shape, "bfloat16", c.pass, {}, {}, {}, {}, {}, {}, {}});
  try {
    std::vector<std::function<void()>> works;
    for (const GemmCase& c : cases) works.push_back(c.work);
    const std::vector<double> ms = median_gpu_ms(works);
    for (size_t i = 0; i < cases.size(); ++i) {
      Row& r = rows[i];
      set_gemm_time(r, ms[i], cases[i].flops, ceilings);
      reset();
      r.base_mib = reset_peak_mib();
      cases[i].work();
      MG_CUDA_CHECK(cudaStreamSynchronize(cuda::current_stream()), "bench_gpu");
      r.peak_mib = peak_mib_since_reset();
      reset();
    }
  } catch (const std::exception& e) {
    for (Row& r : rows) r.error = e.what();
  }
  return rows;
}

// The linear layers, bf16, GELU in its tanh form (the one cuBLASLt's epilogue computes):
//   linear_gelu [8192, 4096] -> 16384, against linear_no_bias, the same product with nothing
//     around it (the bare GEMMs: one forward, two backward), and against its twin;
//   mlp, GPT-2's feed-forward block: [8192, 768] -> 3072 -> 768, against its twin.
// The shape field is [rows, in, out] ([rows, in, hidden, out] for mlp). The full pass is
// forward + backward with every input requiring grad: three GEMMs per layer, 3x the FLOPs.
// The layers of one shape are timed together, a pass at a time (gemm_rows_together).
void linear_rows(std::vector<Row>& rows, const Ceilings& ceilings, Device gpu) {
  const TensorOptions bf16_gpu = TensorOptions(kBFloat16).device(gpu);
  using LayerFn = std::function<Tensor(const tensor_list&)>;
  struct Layer {
    const char* op;
    const char* impl;
    LayerFn f;
  };
  auto layer_rows = [&](const Shape& shape, double forward_flops, const tensor_list& inputs, const Tensor& dy,
                        const std::vector<Layer>& layers) {
    std::vector<tensor_list> leaves(layers.size());
    for (size_t i = 0; i < layers.size(); ++i)
      for (const Tensor& t : inputs) leaves[i].push_back(t.detach().requires_grad_());
    auto clear_grads = [&] {
      for (tensor_list& list : leaves)
        for (Tensor& leaf : list) leaf.mutable_grad() = Tensor();
    };
    std::vector<GemmCase> forward, full;
    for (size_t i = 0; i < layers.size(); ++i) {
      const Layer& layer = layers[i];
      forward.push_back({layer.op, layer.impl, shape, "fwd", forward_flops, [&, i] { layers[i].f(inputs); }});
      full.push_back({layer.op, layer.impl, shape, "full", 3.0 * forward_flops, [&, i] {
                        for (Tensor& leaf : leaves[i]) leaf.mutable_grad() = Tensor();
                        layers[i].f(leaves[i]).backward(dy);
                      }});
    }
    for (const std::vector<GemmCase>* pass : {&forward, &full})
      for (Row& r : gemm_rows_together(*pass, ceilings, clear_grads)) rows.push_back(std::move(r));
    clear_grads();
  };
  constexpr auto kTanh = GeluApproximation::Tanh;
  {
    const int64_t m = 8192, k = 4096, n = 16384;
    const Tensor x = randn({m, k}, bf16_gpu), w = randn({n, k}, bf16_gpu) * (1.0 / 64.0), b = randn({n}, bf16_gpu);
    const Tensor dy = randn({m, n}, bf16_gpu);
    layer_rows({m, k, n}, 2.0 * m * k * n, {x, w, b}, dy,
               {{"linear_no_bias", "minigrad", [](const tensor_list& t) { return linear(t[0], t[1]); }},
                {"linear_gelu", "minigrad", [&](const tensor_list& t) { return linear_gelu(t[0], t[1], t[2], kTanh); }},
                {"linear_gelu", "minigrad_composite",
                 [&](const tensor_list& t) { return composite::linear_gelu(t[0], t[1], t[2], kTanh); }}});
  }
  {
    const int64_t m = 8192, k = 768, hidden = 3072, n = 768;
    const Tensor x = randn({m, k}, bf16_gpu);
    const Tensor w1 = randn({hidden, k}, bf16_gpu) * 0.036, b1 = randn({hidden}, bf16_gpu);
    const Tensor w2 = randn({n, hidden}, bf16_gpu) * 0.018, b2 = randn({n}, bf16_gpu);
    const Tensor dy = randn({m, n}, bf16_gpu);
    layer_rows({m, k, hidden, n}, 2.0 * m * k * hidden + 2.0 * m * hidden * n, {x, w1, b1, w2, b2}, dy,
               {{"mlp", "minigrad", [&](const tensor_list& t) { return mlp(t[0], t[1], t[2], t[3], t[4], kTanh); }},
                {"mlp", "minigrad_composite",
                 [&](const tensor_list& t) { return composite::mlp(t[0], t[1], t[2], t[3], t[4], kTanh); }}});
  }
}

// Attention in bf16 on the shapes of compare_pytorch.py's SDPA rows (B, H, S, D), causal or
// not: the flash kernels, and at (4, 16, 1024, 128) also the composite twin, softmax_dropout(q
// k^T) v with the [B, H, S, S] scores stored; GPT-2's shape also with dropout (p = 0.1, op
// suffix _dropout). TFLOP/s counts 4 B H S^2 D forward and 2.5x that backward (3.5x for the
// full pass), halved when causal, as FlashAttention's papers count.
void attention_rows(std::vector<Row>& rows, const Ceilings& ceilings, Device gpu) {
  const TensorOptions bf16_gpu = TensorOptions(kBFloat16).device(gpu);
  struct Case {
    Shape shape;
    bool is_causal;
    bool with_twin;
    double dropout = 0.0;
  };
  const Case cases[] = {{{4, 16, 4096, 128}, false, false}, {{4, 16, 4096, 128}, true, false},
                        {{16, 16, 1024, 64}, false, false}, {{8, 12, 1024, 64}, true, false},
                        {{4, 16, 1024, 128}, false, true},  {{8, 12, 1024, 64}, true, false, 0.1}};
  for (const Case& c : cases) {
    const Shape& shape = c.shape;
    const Tensor q = randn(shape, bf16_gpu), k = randn(shape, bf16_gpu), v = randn(shape, bf16_gpu);
    const Tensor dy = randn(shape, bf16_gpu);
    const double flops = 4.0 * shape[0] * shape[1] * shape[2] * shape[2] * shape[3] / (c.is_causal ? 2.0 : 1.0);
    const std::string op = std::string("scaled_dot_product_attention") + (c.is_causal ? "_causal" : "") +
                           (c.dropout > 0 ? "_dropout" : "");
    using Attention = std::function<Tensor(const tensor_list&)>;
    auto full_row = [&](const std::string& name, const char* impl, const Attention& f) {
      tensor_list leaves = {q.detach().requires_grad_(), k.detach().requires_grad_(), v.detach().requires_grad_()};
      rows.push_back(gemm_row(name, impl, shape, "full", 3.5 * flops, ceilings, [&] {
        for (Tensor& leaf : leaves) leaf.mutable_grad() = Tensor();
        f(leaves).backward(dy);
      }));
    };
    auto pass_rows = [&](const char* impl, const Attention& f) {
      rows.push_back(gemm_row(op, impl, shape, "fwd", flops, ceilings, [&] { f({q, k, v}); }));
      full_row(op, impl, f);
    };
    const Attention flash = [&](const tensor_list& t) {
      return scaled_dot_product_attention(t[0], t[1], t[2], std::nullopt, c.dropout, c.is_causal);
    };
    pass_rows("minigrad", flash);
    {  // the backward's deterministic form (dQ by a second pass, no atomics), op suffix _deterministic
      const DeterministicAlgorithmsGuard deterministic;
      full_row(op + "_deterministic", "minigrad", flash);
    }
    if (c.with_twin)
      pass_rows("minigrad_composite", [&](const tensor_list& t) {
        return composite::scaled_dot_product_attention(t[0], t[1], t[2], std::nullopt, 0.0, c.is_causal);
      });
  }
}

// cross_entropy over a GPT-2-sized vocabulary: [8192, 50304] bf16 logits (824 MB, far past
// the L2), random targets, the Mean reduction. Forward floor: read the logits once (the loss
// is a few bytes). Full floor (forward + backward, the logits requiring grad, each run starting
// with no .grad): read the logits and write their gradient, 2 x N x C x 2 bytes.
void cross_entropy_rows(std::vector<Row>& rows, const Ceilings& ceilings, Device gpu) {
  constexpr int64_t kTokens = 8192, kVocab = 50304;
  const Shape shape = {kTokens, kVocab};
  const double logits_bytes = static_cast<double>(kTokens * kVocab) * 2.0;
  const Tensor logits = randn(shape, TensorOptions(kBFloat16).device(gpu));
  const Tensor targets = randint(kVocab, {kTokens}, TensorOptions(kInt64).device(gpu));
  Tensor leaf = logits.detach().requires_grad_();
  using Loss = std::function<Tensor(const Tensor&)>;
  struct Case {
    const char* impl;
    Loss f;
  };
  const Case cases[] = {
      {"minigrad", [&](const Tensor& x) { return cross_entropy(x, targets); }},
      {"minigrad_composite", [&](const Tensor& x) { return composite::cross_entropy(x, targets); }},
  };
  for (const Case& c : cases) {
    rows.push_back(memory_row("cross_entropy", c.impl, shape, kBFloat16, "fwd", logits_bytes, ceilings,
                              [&] { c.f(logits); }));
    rows.push_back(memory_row("cross_entropy", c.impl, shape, kBFloat16, "full", 2.0 * logits_bytes, ceilings, [&] {
      leaf.mutable_grad() = Tensor();
      c.f(leaf).backward();
    }));
    leaf.mutable_grad() = Tensor();  // would count in the next row's peak
  }
}

// For compare_pytorch.py's accuracy check of the flash kernels: bf16 q, k, v and dy, and what
// minigrad computes from them (out, dq, dk, dv), for a causal head dim 64 case and a non-causal
// head dim 128 one, in one safetensors file. PyTorch reads it, computes a float64 reference
// and SDPA flash's own bf16 result on the same inputs, and compares the two errors.
void write_attention_accuracy(const std::string& path, Device gpu) {
  struct Case {
    const char* name;
    Shape shape;
    bool is_causal;
  };
  const Case cases[] = {{"d64_causal", {2, 4, 1024, 64}, true}, {"d128", {2, 4, 1024, 128}, false}};
  nn::NamedTensors tensors;
  for (const Case& c : cases) {
    const TensorOptions bf16_gpu = TensorOptions(kBFloat16).device(gpu);
    tensor_list leaves;
    for (const char* name : {"q", "k", "v"}) {
      leaves.push_back(randn(c.shape, bf16_gpu).requires_grad_());
      tensors.emplace_back(fmt::format("{}.{}", c.name, name), leaves.back().detach());
    }
    const Tensor dy = randn(c.shape, bf16_gpu);
    tensors.emplace_back(fmt::format("{}.dy", c.name), dy);
    const Tensor out = scaled_dot_product_attention(leaves[0], leaves[1], leaves[2], std::nullopt, 0.0, c.is_causal);
    out.backward(dy);
    tensors.emplace_back(fmt::format("{}.minigrad.out", c.name), out.detach());
    for (size_t i = 0; i < 3; ++i)
      tensors.emplace_back(fmt::format("{}.minigrad.d{}", c.name, "qkv"[i]), leaves[i].grad());
  }
  nn::save_safetensors(tensors, path);
  fmt::print("attention accuracy inputs and minigrad's outputs written to {}\n", path);
}

int run(int argc, char** argv) {
  std::string json_path, date = today_utc(), commit = "unknown", accuracy_path;
  for (int i = 1; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    if (std::strcmp(argv[i], "--json") == 0 && has_value) {
      json_path = argv[++i];
    } else if (std::strcmp(argv[i], "--date") == 0 && has_value) {
      date = argv[++i];
    } else if (std::strcmp(argv[i], "--commit") == 0 && has_value) {
      commit = argv[++i];
    } else if (std::strcmp(argv[i], "--attention-accuracy") == 0 && has_value) {
      accuracy_path = argv[++i];
    } else {
      fmt::print(stderr, "usage: {} --json PATH [--date YYYY-MM-DD] [--commit SHA] [--attention-accuracy PATH]\n",
                 argv[0]);
      return 2;
    }
  }
  if (json_path.empty()) {
    fmt::print(stderr, "usage: {} --json PATH [--date YYYY-MM-DD] [--commit SHA]\n", argv[0]);
    return 2;
  }
  if (!cuda_is_available()) {
    fmt::print("bench_gpu: no GPU is present (or this build has no CUDA backend): nothing to measure\n");
    return 2;
  }

  const Device gpu = Device::cuda(0);
  cudaDeviceProp prop{};
  MG_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0), "bench_gpu");
  const std::string device_name = prop.name;
  fmt::print("bench_gpu: {} ({} SMs, L2 {} MB), date {}, commit {}\n", device_name, prop.multiProcessorCount,
             prop.l2CacheSize / 1000000, date, commit);

  // Inputs, drawn once and shared by the rows: every row reads them from HBM anyway (256 MiB
  // against a 60 MB L2), so drawing fresh ones per row would only cost time. randn draws on
  // the CPU and copies; that takes a few seconds for these sizes.
  manual_seed(0);
  const auto t0 = std::chrono::steady_clock::now();
  const TensorOptions bf16_gpu = TensorOptions(kBFloat16).device(gpu);
  const Tensor x = randn({kRows, kCols}, bf16_gpu);
  const Tensor grad = randn({kRows, kCols}, bf16_gpu);  // the upstream gradient of the full passes
  const Tensor bias = randn({kCols}, bf16_gpu);
  cuda::synchronize();
  fmt::print("inputs drawn in {:.1f} s\n",
             std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());

  const double n = static_cast<double>(kRows * kCols);
  const double elem = 2.0;  // bytes of one bf16 element
  Ceilings ceilings;
  std::vector<Row> rows;
  std::vector<std::string> failures;

  // ---- the copy ceiling, measured before the rows, in this run ----
  // Copy: device-to-device cudaMemcpy of 256 MiB (the size the rows stream), counting the
  // bytes read and the bytes written.
  try {
    const Tensor copy_dst = empty({kRows, kCols}, bf16_gpu);
    const double copy_bytes = n * elem;
    auto copy_once = [&] {
      MG_CUDA_CHECK(cudaMemcpyAsync(copy_dst.raw_data(), x.raw_data(), static_cast<size_t>(copy_bytes),
                                    cudaMemcpyDeviceToDevice, cuda::current_stream()),
                    "bench_gpu copy ceiling");
    };
    // An idle GPU runs its SMs at a few hundred MHz and takes a while to reach full clocks;
    // half a second of copies first, so that no ceiling is measured on a cold GPU (a low
    // ceiling would inflate every roofline after it).
    for (int i = 0; i < 4000; ++i) copy_once();
    cuda::synchronize();
    const double ms = median_gpu_ms(copy_once);
    ceilings.copy_gbps = 2.0 * copy_bytes / (ms * 1e-3) / 1e9;
  } catch (const std::exception& e) {
    failures.push_back(fmt::format("copy ceiling: {}", e.what()));
  }

  // ---- memory-bound rows ----
  // Forward floor: read x, write y (2 n elements). Full (forward + backward) floor: the
  // forward's 2 n, plus backward reading grad and x and writing grad_x (3 n): 5 n.
  const double fwd_bytes = 2.0 * n * elem;
  const double full_bytes = 5.0 * n * elem;
  const Shape shape = {kRows, kCols};
  // A leaf that requires grad, sharing x's memory: the full passes differentiate through it.
  Tensor xg = x.detach().requires_grad_();

  // Each full pass starts with no gradient on the leaf, so the backward writes grad_x fresh
  // (the engine hands its buffer to .grad without a copy) instead of accumulating into it.
  using UnaryFn = std::function<Tensor(const Tensor&)>;
  auto full_pass = [&xg, &grad](UnaryFn f) {
    return [&xg, &grad, f] {
      xg.mutable_grad() = Tensor();
      f(xg).backward(grad);
    };
  };

  struct Case {
    const char* op;
    const char* impl;
    UnaryFn f;
  };
  // op "gelu" is the exact form (gelu's default); "gelu_tanh" is gelu(x, GeluApproximation::Tanh).
  const Case cases[] = {
      {"gelu", "minigrad", [](const Tensor& t) { return gelu(t); }},
      // The tutorial's formula, five elementwise ops, each its own pass over memory; its backward
      // is the tape's, through all five: what fusing into gelu() saves.
      {"gelu", "minigrad_composite", [](const Tensor& t) { return 0.5 * t * (1.0 + erf(t / std::sqrt(2.0))); }},
      {"gelu_tanh", "minigrad", [](const Tensor& t) { return gelu(t, GeluApproximation::Tanh); }},
      {"relu", "minigrad", [](const Tensor& t) { return relu(t); }},
  };
  for (const Case& c : cases) {
    rows.push_back(memory_row(c.op, c.impl, shape, kBFloat16, "fwd", fwd_bytes, ceilings, [&] { c.f(x); }));
    rows.push_back(memory_row(c.op, c.impl, shape, kBFloat16, "full", full_bytes, ceilings, full_pass(c.f)));
    xg.mutable_grad() = Tensor();  // the last run's gradient would count in the next row's peak
  }

  // add with broadcasting: [16384, 8192] + [8192]. Floor: read both inputs, write the output.
  rows.push_back(memory_row("add", "minigrad", shape, kBFloat16, "fwd", (2.0 * n + kCols) * elem, ceilings,
                            [&] { add(x, bias); }));

  fused_rows(rows, ceilings, x, grad);
  cross_entropy_rows(rows, ceilings, gpu);

  // AdamW over GPT-2 124M's parameters: one tensor, and the model's 148.
  adamw_rows(rows, ceilings, gpu);

  // ---- bf16 matmul: the matmul ceiling and row ----
  // 8192^3 through minigrad's matmul (cuBLAS underneath), on the two halves of x
  // (contiguous 8192 x 8192 slices, random data). This is also the matmul row: its roofline
  // against itself is 1 by construction, so compare_pytorch.py sets it against PyTorch's
  // matmul in the same file, the measure its target (at least 0.95 of PyTorch's rate) is stated in.
  {
    const Tensor a = x.slice(0, 0, kMatmulSize);
    const Tensor b = x.slice(0, kMatmulSize, 2 * kMatmulSize);
    const double flops = 2.0 * kMatmulSize * kMatmulSize * kMatmulSize;
    Row r{"matmul", "minigrad", {kMatmulSize, kMatmulSize, kMatmulSize}, "bfloat16", "fwd", {}, {}, {}, {}, {}, {}, {}};
    try {
      r.base_mib = reset_peak_mib();
      const double ms = median_gpu_ms([&] { matmul(a, b); });
      r.ms = ms;
      r.tflops = flops / (ms * 1e-3) / 1e12;
      ceilings.matmul_tflops = r.tflops;
      r.roofline = 1.0;
      r.peak_mib = peak_mib_since_reset();
    } catch (const std::exception& e) {
      r.error = e.what();
    }
    rows.push_back(r);
  }
  // After the memory-bound rows, not before: a third of a second of matmul at full power
  // may leave the SMs at lower clocks for a while (suspected, H200 2026-12-02: the
  // instruction-heavy gelu row right after it ran at 0.91 of the copy rate, its kernel at
  // 0.94-1.00 in runs with no matmul before it). compare_pytorch.py times PyTorch's matmul
  // after its memory rows too.

  // The linear layers' GEMMs and attention, against the matmul ceiling just measured.
  linear_rows(rows, ceilings, gpu);
  attention_rows(rows, ceilings, gpu);

  // ---- per-op overhead on the GPU ----
  {
    const TensorOptions f32_gpu = TensorOptions(kFloat32).device(gpu);
    const Tensor offset = randn({kChainElements}, f32_gpu);
    const Tensor twice_offset = offset * 2.0;
    const Tensor input = randn({kChainElements}, f32_gpu);
    Tensor leaf = input.detach().clone().requires_grad_();
    rows.push_back(chain_row("fwd", [&] {
      NoGradGuard no_grad;
      run_chain(input, offset, twice_offset);
    }));
    rows.push_back(chain_row("full", [&] {
      // The graph is built, replayed and destroyed inside the timed region.
      leaf.mutable_grad() = Tensor();
      run_chain(leaf, offset, twice_offset).sum().backward();
    }));
  }

  // ---- report ----
  fmt::print("ceilings: copy {} GB/s (read + write), bf16 matmul {} TFLOP/s\n",
             format_opt(ceilings.copy_gbps, "{:.0f}"), format_opt(ceilings.matmul_tflops, "{:.0f}"));
  fmt::print("{:<24} {:<19} {:<20} {:<9} {:<5} {:>10} {:>8} {:>8} {:>8} {:>9}\n", "op", "impl", "shape", "dtype",
             "pass", "ms", "GB/s", "TFLOP/s", "roofline", "peak MiB");
  for (const Row& r : rows) {
    if (!r.error.empty()) {
      fmt::print("{:<24} {:<19} {:<20} {:<9} {:<5} FAILED: {}\n", r.op, r.impl, json_shape(r.shape), r.dtype, r.pass,
                 r.error);
      failures.push_back(fmt::format("{} {} {}: {}", r.op, r.impl, r.pass, r.error));
      continue;
    }
    // The chain rows' time is per op: shown in microseconds.
    const std::string time = r.op == "chain_small_ops" ? fmt::format("{:.2f} us/op", *r.ms * 1e3)
                                                       : format_opt(r.ms, "{:.4f}");
    fmt::print("{:<24} {:<19} {:<20} {:<9} {:<5} {:>10} {:>8} {:>8} {:>8} {:>9}\n", r.op, r.impl, json_shape(r.shape),
               r.dtype, r.pass, time, format_opt(r.gbps, "{:.0f}"), format_opt(r.tflops, "{:.0f}"),
               format_opt(r.roofline, "{:.3f}"), format_opt(r.peak_mib, "{:.0f}"));
  }

  if (!write_json(json_path, device_name, date, commit, ceilings, rows)) {
    fmt::print(stderr, "bench_gpu: cannot write {}\n", json_path);
    return 2;
  }
  fmt::print("results written to {}\n", json_path);
  if (!accuracy_path.empty()) {
    try {
      write_attention_accuracy(accuracy_path, gpu);
    } catch (const std::exception& e) {
      failures.push_back(fmt::format("attention accuracy file: {}", e.what()));
    }
  }
  for (const std::string& f : failures) fmt::print("FAILED: {}\n", f);
  return failures.empty() ? 0 : 1;
}

}  // namespace

// Errors inside a row are caught there (the row fails, the others go on); this catches the
// rest (no inputs, no device), so the round's log shows the message, not a bare abort.
int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    fmt::print("bench_gpu FAILED: {}\n", e.what());
    return 1;
  }
}
