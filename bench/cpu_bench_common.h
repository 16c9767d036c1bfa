#pragma once
// What bench_cpu (minigrad) and compare_libtorch (LibTorch) share, so that both time the
// same ops at the same shapes, count bytes the same way and write rows in one format.
// Plain C++17 and the C library only: the LibTorch project includes this header too, and
// must not need minigrad or fmt to build.
//
// A run: warm-up calls, then timed calls; a row reports the median (what the op costs on
// this machine as it is) and the fastest call (what it costs when nothing else takes the
// core: on a shared machine the median can be well above it, and the gap shows the noise).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace cpu_bench {

// ---- the shapes (float32 throughout) ----
constexpr int64_t kGeluRows = 2048, kGeluCols = 4096;        // gelu, forward and backward
constexpr int64_t kSoftmaxRows = 2048, kSoftmaxCols = 4096;  // softmax over the last dim
constexpr int64_t kFusedRows = 2048, kFusedCols = 4096;      // the fused ops and their twins (bench_cpu only)
constexpr int64_t kSumRows = 4096, kSumCols = 1024;          // sum over dim 0, and over dim 1
constexpr int64_t kMatmulM = 1024, kMatmulK = 1024, kMatmulN = 1024;
constexpr int64_t kChainElements = 8;  // the overhead chain's tensors (bench/overhead_chain.h)
constexpr int kChainLength = 2000;     // ops in one chain: bench_cpu checks it is overhead_chain.h's

// ---- bytes moved ----
// The fewest bytes an op must move between memory and the core: every input read once and
// every output written once, 4 bytes an element. A real kernel may move more (softmax reads
// its row again after the max; a cache miss on a write also reads the line first), so GB/s
// here is a lower bound on the traffic, and comparable between the two libraries, which
// are charged the same bytes for the same op.
constexpr double kFloatBytes = 4.0;
inline double bytes_unary(int64_t elements) { return 2.0 * kFloatBytes * elements; }  // read x, write y
// gelu forward + backward: forward reads x and writes y; backward reads the incoming
// gradient and x (saved by the forward) and writes the gradient of x. Five passes.
inline double bytes_gelu_forward_backward(int64_t elements) { return 5.0 * kFloatBytes * elements; }
// A reduction reads the whole input and writes one value per kept element.
inline double bytes_sum(int64_t rows, int64_t cols, int dim) {
  return kFloatBytes * (rows * cols + (dim == 0 ? cols : rows));
}
inline double matmul_flops(int64_t m, int64_t k, int64_t n) { return 2.0 * m * k * n; }

// ---- options ----
// The thread count a row reports: MINIGRAD_NUM_THREADS, or every core when it is unset.
inline int threads_from_env() {
  if (const char* s = std::getenv("MINIGRAD_NUM_THREADS")) {
    const int n = std::atoi(s);
    if (n > 0) return n;
  }
  const unsigned cores = std::thread::hardware_concurrency();
  return cores > 0 ? static_cast<int>(cores) : 1;
}

struct Options {
  std::string json_path;  // empty: no JSON
  int reps = 0;           // timed calls per op; 0: chosen per op (see choose_reps)
  std::string only;       // empty: every op
  int threads = threads_from_env();
};

inline void print_usage(const char* program, bool with_threads) {
  std::fprintf(stderr, "usage: %s [--json PATH] [--reps N] [--only NAME]%s\n", program,
               with_threads ? " [--threads N]" : "");
  std::fprintf(stderr, "  NAME: gelu, softmax, sum, matmul, chain, fused, or one row's op (gelu_fwd_bwd)\n");
}

// Returns false (after printing the usage) on an unknown or incomplete argument.
inline bool parse_args(int argc, char** argv, bool with_threads, Options& options) {
  for (int i = 1; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    if (std::strcmp(argv[i], "--json") == 0 && has_value) {
      options.json_path = argv[++i];
    } else if (std::strcmp(argv[i], "--reps") == 0 && has_value) {
      options.reps = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--only") == 0 && has_value) {
      options.only = argv[++i];
    } else if (with_threads && std::strcmp(argv[i], "--threads") == 0 && has_value) {
      options.threads = std::atoi(argv[++i]);
    } else {
      print_usage(argv[0], with_threads);
      return false;
    }
  }
  if (options.reps < 0 || options.threads < 1) {
    print_usage(argv[0], with_threads);
    return false;
  }
  return true;
}

// A row's op is its family's name, or the family's name and a suffix: gelu_fwd_bwd is in
// the family gelu. --only names a family (all its rows) or one row.
inline std::string family_of(const std::string& op) { return op.substr(0, op.find('_')); }
inline bool selected(const Options& options, const std::string& op) {
  return options.only.empty() || options.only == op || options.only == family_of(op);
}

// ---- timing ----
struct Timing {
  double median_ms = 0;
  double min_ms = 0;
  int runs = 0;
};

inline double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// Without --reps: enough calls for about a second of timing, 5 at least and 50 at most,
// judged from the slowest warm-up call.
inline int choose_reps(double warmup_ms) {
  const int reps = static_cast<int>(1000.0 / std::max(warmup_ms, 1e-3));
  return std::clamp(reps, 5, 50);
}

constexpr int kWarmupRuns = 2;

template <typename F>
Timing time_op(F&& run_once, int reps) {
  double warmup_ms = 0;
  for (int i = 0; i < kWarmupRuns; ++i) {
    const auto start = std::chrono::steady_clock::now();
    run_once();
    warmup_ms = std::max(warmup_ms, ms_since(start));
  }
  if (reps == 0) reps = choose_reps(warmup_ms);
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    run_once();
    ms.push_back(ms_since(start));
  }
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms.front(), reps};
}

// ---- rows ----
// One measured op. Exactly one of the rates is meaningful: gbps for memory-bound ops,
// gflops for matmul, us_per_op for the overhead chain (the time of one small op).
struct Row {
  std::string op;
  std::string shape;
  Timing timing;
  enum class Rate { GBps, GFLOPs, UsPerOp } rate_kind;
  double work;  // bytes for GBps, FLOPs for GFLOPs, ops in the timed call for UsPerOp

  const char* rate_name() const {
    return rate_kind == Rate::GBps ? "gbps" : rate_kind == Rate::GFLOPs ? "gflops" : "us_per_op";
  }
  double rate(double ms) const {
    switch (rate_kind) {
      case Rate::GBps: return work / (ms * 1e-3) / 1e9;
      case Rate::GFLOPs: return work / (ms * 1e-3) / 1e9;
      case Rate::UsPerOp: return ms * 1e3 / work;
    }
    return 0;
  }
};

inline Row bandwidth_row(std::string op, std::string shape, Timing t, double bytes) {
  return {std::move(op), std::move(shape), t, Row::Rate::GBps, bytes};
}
inline Row matmul_row(std::string op, std::string shape, Timing t, double flops) {
  return {std::move(op), std::move(shape), t, Row::Rate::GFLOPs, flops};
}
inline Row chain_row(std::string op, std::string shape, Timing t, int ops) {
  return {std::move(op), std::move(shape), t, Row::Rate::UsPerOp, static_cast<double>(ops)};
}

// Prints each row as it is measured, and writes it as one JSON line when asked to.
class Reporter {
 public:
  Reporter(const char* impl, int threads, const std::string& json_path)
      : impl_(impl), threads_(threads), wants_json_(!json_path.empty()) {
    if (wants_json_) {
      json_ = std::fopen(json_path.c_str(), "w");
      if (!json_) std::fprintf(stderr, "cannot open %s for writing\n", json_path.c_str());
    }
    std::printf("%s, %d thread%s; median and fastest of the timed calls\n", impl, threads,
                threads == 1 ? "" : "s");
    std::printf("%-16s %-20s %10s %10s %6s %12s\n", "op", "shape", "median ms", "min ms", "runs", "rate");
  }
  ~Reporter() {
    if (json_) std::fclose(json_);
  }
  Reporter(const Reporter&) = delete;
  Reporter& operator=(const Reporter&) = delete;

  bool ok() const { return json_ != nullptr || !wants_json_; }  // false: the JSON file did not open

  void add(const Row& r) {
    const double rate = r.rate(r.timing.median_ms);
    std::printf("%-16s %-20s %10.3f %10.3f %6d %9.3f %s\n", r.op.c_str(), r.shape.c_str(),
                r.timing.median_ms, r.timing.min_ms, r.timing.runs, rate,
                r.rate_kind == Row::Rate::GBps ? "GB/s" : r.rate_kind == Row::Rate::GFLOPs ? "GFLOP/s" : "us/op");
    std::fflush(stdout);
    if (json_) {
      std::fprintf(json_,
                   "{\"op\":\"%s\",\"shape\":\"%s\",\"impl\":\"%s\",\"threads\":%d,\"ms\":%.4f,"
                   "\"min_ms\":%.4f,\"runs\":%d,\"%s\":%.4f}\n",
                   r.op.c_str(), r.shape.c_str(), impl_, threads_, r.timing.median_ms, r.timing.min_ms,
                   r.timing.runs, r.rate_name(), rate);
      std::fflush(json_);
    }
  }

 private:
  const char* impl_;
  int threads_;
  bool wants_json_;
  std::FILE* json_ = nullptr;
};

inline std::string shape_2d(int64_t rows, int64_t cols) {
  return std::to_string(rows) + "x" + std::to_string(cols);
}

}  // namespace cpu_bench
