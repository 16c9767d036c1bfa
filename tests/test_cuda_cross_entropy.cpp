// cross_entropy on the GPU (cuda/cross_entropy.cu) against the CPU's on the same logits: class
// counts covering both kernels (a warp per row up to 1024 bf16 classes, a block beyond) and
// lengths that are no multiple of any vector width, so rows start off 16-byte boundaries;
// every reduction, label smoothing, ignored rows, dy of 1, of 3, a loss scale of 2^10 and per
// row (contiguous, expanded, strided); the half types against float64; views of the logits that are not
// contiguous or start off a boundary; every row ignored; -inf logits; no gradient written when
// none is wanted; the second backward's error; out-of-range targets; gradcheck in float64.
// Outputs are compared at every element, with the allocator's cache filled with NaN first so
// that an element a kernel forgets shows.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <minigrad/config.h>  // MINIGRAD_WITH_CUDA
#if MINIGRAD_WITH_CUDA
#include <minigrad/cuda/runtime.h>  // the allocator's statistics
#endif

#include "tests/cuda_test_support.h"

using namespace minigrad;
using namespace minigrad::test;

namespace {

constexpr int64_t kIgnore = -100;

const std::vector<int64_t> kClasses = {1, 2, 3, 7, 31, 33, 1000, 1023, 4097, 50304, 65536};
const std::vector<int64_t> kRows = {1, 5, 64};

// Fills freed GPU blocks with NaN, so outputs allocated next start as NaN where the caching
// allocator hands them back.
void poison_gpu_cache(int64_t elements) {
  (void)full({elements}, std::numeric_limits<double>::quiet_NaN(), TensorOptions(kFloat32).device(kGpu));
}

// How the backward is started, which decides the dy the node sees.
enum class Dy {
  Plain,          // loss.backward(): dy = 1, the gradient handed over untouched
  Tripled,        // (loss * 3).backward(): a 0-dim dy of 3
  Scaled,         // (loss * 1024).backward(): a loss scale, which must bring back gradients
                  // below float16's range rather than scale their underflow to 0
  PerRow,         // None: a random [N] dy
  Summed,         // None: loss.sum().backward(), a [N] dy of ones expanded from one value
  PerRowStrided,  // None: a random [N] dy with stride 2
};

struct Case {
  const char* name;
  Reduction reduction;
  double label_smoothing;
  bool with_ignored;
  Dy dy;
};

// Each reduction with and without smoothing and ignored rows, each way of starting backward.
const std::vector<Case> kCases = {
    {"mean", Reduction::Mean, 0.0, false, Dy::Plain},
    {"mean, smoothing, ignored, dy 3", Reduction::Mean, 0.1, true, Dy::Tripled},
    {"sum, ignored", Reduction::Sum, 0.0, true, Dy::Plain},
    {"sum, smoothing, dy 3", Reduction::Sum, 0.1, false, Dy::Tripled},
    {"none, ignored, random dy", Reduction::None, 0.0, true, Dy::PerRow},
    {"none, smoothing, summed", Reduction::None, 0.1, false, Dy::Summed},
    {"none, smoothing, ignored, strided dy", Reduction::None, 0.1, true, Dy::PerRowStrided},
    {"mean, ignored, loss scale", Reduction::Mean, 0.0, true, Dy::Scaled},
};

// Random targets in [0, classes); with_ignored sets rows 1, 4, 7, ... to kIgnore (so that a
// single row is never ignored: a Mean over no rows is the NaN of its own test).
Tensor random_targets(int64_t rows, int64_t classes, bool with_ignored) {
  std::vector<int64_t> t = randint(classes, {rows}).to_vector<int64_t>();
  if (with_ignored)
    for (size_t i = 1; i < t.size(); i += 3) t[i] = kIgnore;
  return from_vector<int64_t>(t, {rows});
}

struct Result {
  Tensor loss;
  Tensor grad;
};

// cross_entropy of `logits` (on the CPU) on `device`, its backward started as c.dy says with
// `dy_pairs` ([N, 2], column 0 the per-row dy) for the per-row kinds; both results on the CPU.
Result run(const Tensor& logits, const Tensor& targets, const Case& c, const Tensor& dy_pairs, Device device) {
  const Tensor leaf = logits.detach().to(device).requires_grad_();
  const Tensor loss = cross_entropy(leaf, targets.to(device), kIgnore, c.label_smoothing, c.reduction);
  switch (c.dy) {
    case Dy::Plain: loss.backward(); break;
    case Dy::Tripled: (loss * 3.0).backward(); break;
    case Dy::Scaled: (loss * 1024.0).backward(); break;
    case Dy::PerRow: loss.backward(dy_pairs.select(1, 0).contiguous().to(device)); break;
    case Dy::Summed: loss.sum().backward(); break;
    case Dy::PerRowStrided: loss.backward(dy_pairs.to(device).select(1, 0)); break;
  }
  return {loss.detach().to(kCPU), leaf.grad().to(kCPU)};
}

struct Tolerance {
  double loss_rtol, loss_atol, grad_rtol, grad_atol;
};

// float64: the two devices differ in the order of their sums. float32: both compute exp within
// 2 ulp, and a sum of 65536 terms carries ~1e-6 of relative rounding; the gradient cancels at
// the target (p - 1 with p near 1), so its error is absolute there. Half types, against
// float64: each result rounds once to 8 (bfloat16) or 11 (float16) bits, bfloat16's gradient
// twice when dy != 1 (the gradient for dy = 1 is stored, then scaled); float16's denormals
// below 6e-5 keep their absolute spacing, 6e-8, which atol covers.
Tolerance tolerance_of(DType dtype) {
  switch (dtype) {
    case kFloat64: return {1e-10, 1e-12, 1e-10, 1e-13};
    case kFloat32: return {2e-5, 2e-5, 1e-4, 5e-6};
    default: return {1e-2, 1e-2, 2e-2, 1e-6};
  }
}

void check_against_cpu(int64_t rows, int64_t classes, DType dtype, const Case& c) {
  CAPTURE(rows);
  CAPTURE(classes);
  CAPTURE(dtype);
  INFO("case: " << c.name);
  // Scaled by 3 so that softmax is far from flat (some rows put most of their mass on a few
  // classes); the reference gets the same values, rounded to dtype.
  const Tensor logits = (randn({rows, classes}, kFloat64) * 3.0).to(dtype);
  const Tensor targets = random_targets(rows, classes, c.with_ignored);
  const Tensor dy_pairs = randn({rows, 2}, kFloat64).to(dtype);
  poison_gpu_cache(4 * logits.numel() + 1024);
  const Result gpu = run(logits, targets, c, dy_pairs, kGpu);
  // The half types against float64 on the CPU, the others against their own dtype.
  const bool half = is_half(dtype);
  const Result cpu = half ? run(logits.to(kFloat64), targets, c, dy_pairs.to(kFloat64), kCPU)
                          : run(logits, targets, c, dy_pairs, kCPU);
  CHECK(gpu.loss.dtype() == dtype);
  CHECK(gpu.grad.dtype() == dtype);
  CHECK(gpu.grad.sizes() == logits.sizes());
  const Tolerance tol = tolerance_of(dtype);
  CHECK_ALLCLOSE(gpu.loss.to(kFloat64), cpu.loss.to(kFloat64), tol.loss_rtol, tol.loss_atol);
  // The absolute error at the target (p - 1 with p near 1) is that of p, times the row's
  // factor (dy, over the rows counted for Mean): atol is per unit of the largest factor, which
  // the largest gradient element approaches (a loss scale of 1024 makes it hundreds).
  const double grad_scale = std::max(1.0, max(abs(cpu.grad.to(kFloat64))).item<double>());
  CHECK_ALLCLOSE(gpu.grad.to(kFloat64), cpu.grad.to(kFloat64), tol.grad_rtol, tol.grad_atol * grad_scale);
}

}  // namespace

TEST_CASE("cross_entropy on the GPU matches the CPU at every element: float32 and float64, every class count" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(1300);
  for (DType dtype : {kFloat64, kFloat32})
    for (int64_t classes : kClasses)
      for (int64_t rows : kRows)
        for (const Case& c : kCases) check_against_cpu(rows, classes, dtype, c);
}

TEST_CASE("cross_entropy on the GPU: float16 and bfloat16 against float64 on the CPU" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(1301);
  for (DType dtype : kHalfDTypes)
    for (int64_t classes : kClasses)
      for (int64_t rows : kRows)
        for (const Case& c : kCases) check_against_cpu(rows, classes, dtype, c);
}

TEST_CASE("cross_entropy on the GPU: many short rows" * doctest::skip(!cuda_is_available())) {
  manual_seed(1302);
  for (int64_t classes : {3, 200}) {
    CAPTURE(classes);
    check_against_cpu(30000, classes, kFloat32, kCases[1]);
    check_against_cpu(30000, classes, kBFloat16, kCases[4]);
  }
}

TEST_CASE("cross_entropy on the GPU: logits that are not contiguous or start off a 16-byte boundary" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(1303);
  for (DType dtype : {kFloat32, kBFloat16}) {
    for (int64_t classes : {7, 1000, 4097}) {
      CAPTURE(dtype);
      CAPTURE(classes);
      const int64_t rows = 6;
      const Tensor wide = (randn({rows + 1, classes + 1}, kFloat64) * 3.0).to(dtype);
      const Tensor flat = (randn({rows * classes + 1}, kFloat64) * 3.0).to(dtype);
      // The same views of the same values on either device.
      auto views_of = [&](const Tensor& w, const Tensor& f) {
        return tensor_list{
            w.slice(0, 1, rows + 1).slice(1, 1, classes + 1),                // rows of classes + 1
            w.t().contiguous().t().slice(0, 0, rows).slice(1, 0, classes),  // column-major
            f.slice(0, 1, rows * classes + 1).view({rows, classes}),        // contiguous, one element in
        };
      };
      const tensor_list on_gpu = views_of(wide.to(kGpu), flat.to(kGpu));
      const tensor_list on_cpu = views_of(wide.to(kFloat64), flat.to(kFloat64));
      const Tensor targets = random_targets(rows, classes, true);
      const Tolerance tol = tolerance_of(dtype == kFloat32 ? kFloat32 : kBFloat16);
      for (size_t v = 0; v < on_gpu.size(); ++v) {
        CAPTURE(v);
        const Tensor gpu_leaf = on_gpu[v].detach().requires_grad_();
        const Tensor cpu_leaf = on_cpu[v].detach().requires_grad_();
        poison_gpu_cache(4 * gpu_leaf.numel() + 1024);
        const Tensor loss = cross_entropy(gpu_leaf, targets.to(kGpu), kIgnore, 0.1, Reduction::Sum);
        loss.backward();
        const Tensor expected = cross_entropy(cpu_leaf, targets, kIgnore, 0.1, Reduction::Sum);
        expected.backward();
        CHECK_ALLCLOSE(loss.to(kFloat64).to(kCPU), expected, tol.loss_rtol, tol.loss_atol);
        CHECK_ALLCLOSE(gpu_leaf.grad().to(kFloat64).to(kCPU), cpu_leaf.grad(), tol.grad_rtol, tol.grad_atol);
      }
    }
  }
}

TEST_CASE("cross_entropy on the GPU: every row ignored gives NaN with Mean, 0 with Sum, and zero gradients" *
          doctest::skip(!cuda_is_available())) {
  for (int64_t classes : {3, 4097}) {
    for (Reduction reduction : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
      CAPTURE(classes);
      const Tensor leaf = randn({4, classes}, TensorOptions(kFloat32).device(kGpu)).requires_grad_();
      const Tensor targets = full({4}, static_cast<double>(kIgnore), TensorOptions(kInt64).device(kGpu));
      poison_gpu_cache(4 * leaf.numel() + 1024);
      const Tensor loss = cross_entropy(leaf, targets, kIgnore, 0.1, reduction);
      if (reduction == Reduction::Mean) CHECK(std::isnan(loss.item<double>()));
      if (reduction == Reduction::Sum) CHECK(loss.item<double>() == 0.0);
      if (reduction == Reduction::None) CHECK(equal(loss, zeros({4}, TensorOptions(kFloat32).device(kGpu))));
      reduction == Reduction::None ? loss.sum().backward() : loss.backward();
      // As PyTorch's: an ignored row has no gradient, also when Mean divides by no rows.
      CHECK(equal(leaf.grad(), zeros({4, classes}, TensorOptions(kFloat32).device(kGpu))));
    }
  }
}

TEST_CASE("cross_entropy on the GPU: -inf logits (masked classes) and a +inf logit as on the CPU" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(1304);
  // float32 as well as float64: float's exp is the hardware's ex2, which must give 0 for -inf.
  for (DType dtype : {kFloat64, kFloat32}) {
    for (int64_t classes : {9, 1000, 4097}) {
      for (double eps : {0.0, 0.1}) {
        CAPTURE(dtype);
        CAPTURE(classes);
        CAPTURE(eps);
        // Row 0 starts with a run of -inf, row 1 has every third class at -inf, row 2 none; row 3
        // has +inf at class 1 (an overflowed float16 logit): its lse is +inf, its loss +inf (NaN
        // with smoothing: inf - inf), its gradient NaN at the +inf and finite elsewhere.
        const double inf = std::numeric_limits<double>::infinity();
        std::vector<double> v = (randn({4, classes}, kFloat64) * 3.0).to_vector<double>();
        for (int64_t j = 0; j < classes; ++j) {
          if (j < 8) v[static_cast<size_t>(j)] = -inf;
          if (j % 3 == 1) v[static_cast<size_t>(classes + j)] = -inf;
        }
        v[static_cast<size_t>(3 * classes + 1)] = inf;
        const Tensor x = from_vector<double>(v, {4, classes}).to(dtype);
        const Tensor targets = from_vector<int64_t>({8, 0, 5, 2}, {4});  // finite classes
        const Tensor gpu_leaf = x.to(kGpu).requires_grad_(), cpu_leaf = x.detach().requires_grad_();
        const Tensor gpu_loss = cross_entropy(gpu_leaf, targets.to(kGpu), kIgnore, eps, Reduction::None);
        const Tensor cpu_loss = cross_entropy(cpu_leaf, targets, kIgnore, eps, Reduction::None);
        gpu_loss.sum().backward();
        cpu_loss.sum().backward();
        const Tolerance tol = tolerance_of(dtype);
        // +inf where eps > 0 and a row has -inf.
        CHECK_ALLCLOSE(gpu_loss.to(kCPU).to(kFloat64), cpu_loss.to(kFloat64), tol.loss_rtol, tol.loss_atol);
        CHECK_ALLCLOSE(gpu_leaf.grad().to(kCPU).to(kFloat64), cpu_leaf.grad().to(kFloat64), tol.grad_rtol,
                       tol.grad_atol);
      }
    }
  }
}

TEST_CASE("cross_entropy on the GPU: a NaN logit makes its row's loss NaN and leaves the others" *
          doctest::skip(!cuda_is_available())) {
  for (int64_t classes : {5, 4097}) {
    CAPTURE(classes);
    Tensor x = randn({3, classes}, kFloat32);
    std::vector<float> v = x.to_vector<float>();
    v[static_cast<size_t>(classes + classes / 2)] = std::numeric_limits<float>::quiet_NaN();  // row 1
    x = from_vector<float>(v, {3, classes});
    const Tensor targets = from_vector<int64_t>({0, 1, 2}, {3});
    const std::vector<float> loss =
        cross_entropy(x.to(kGpu), targets.to(kGpu), kIgnore, 0.0, Reduction::None).to_vector<float>();
    CHECK(std::isfinite(loss[0]));
    CHECK(std::isnan(loss[1]));
    CHECK(std::isfinite(loss[2]));
  }
}

TEST_CASE("cross_entropy on the GPU: no gradient is written when none is wanted" *
          doctest::skip(!cuda_is_available())) {
#if MINIGRAD_WITH_CUDA
  // 64 x 32768 float32 logits: 8 MiB, a whole multiple of the allocator's 2 MiB granule. With
  // a gradient the forward allocates as much again; without, a few bytes a row.
  const Tensor x = randn({64, 32768}, TensorOptions(kFloat32).device(kGpu));
  const Tensor targets = randint(32768, {64}, TensorOptions(kInt64).device(kGpu));
  const size_t logits_bytes = static_cast<size_t>(x.numel()) * 4;
  auto forward_peak = [&](const Tensor& logits) {
    const size_t before = cuda::allocator_stats(0).allocated_bytes;
    cuda::reset_peak_stats(0);
    const Tensor loss = cross_entropy(logits, targets);
    return cuda::allocator_stats(0).peak_allocated_bytes - before;
  };
  CHECK(forward_peak(x) < logits_bytes / 8);
  const Tensor leaf = x.detach().requires_grad_();
  {
    NoGradGuard no_grad;
    CHECK(forward_peak(leaf) < logits_bytes / 8);
  }
  CHECK(forward_peak(leaf) >= logits_bytes);
  const Tensor expected = cross_entropy(x.to(kCPU), targets.to(kCPU));
  CHECK(cross_entropy(x, targets).to(kCPU).item<double>() == doctest::Approx(expected.item<double>()).epsilon(1e-5));
  CHECK(!cross_entropy(x, targets).requires_grad());
#endif
}

TEST_CASE("cross_entropy on the GPU: a second backward through one call is an error, the first is right" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(1305);
  const Tensor x = randn({5, 33}, kFloat64) * 3.0;
  const Tensor targets = from_vector<int64_t>({0, 32, kIgnore, 7, 1}, {5});
  const Tensor leaf = x.to(kGpu).requires_grad_();
  const Tensor loss = cross_entropy(leaf, targets.to(kGpu));
  loss.backward(Tensor(), /*retain_graph=*/true);
  const Tensor cpu_leaf = x.detach().requires_grad_();
  cross_entropy(cpu_leaf, targets).backward();
  CHECK_ALLCLOSE(leaf.grad().to(kCPU), cpu_leaf.grad(), 1e-10, 1e-13);
  CHECK_THROWS_CONTAINING(loss.backward(), "backpropagate through one call more than once");
  // The twin backpropagates twice.
  const Tensor twin_leaf = x.to(kGpu).requires_grad_();
  const Tensor twin = composite::cross_entropy(twin_leaf, targets.to(kGpu));
  twin.backward(Tensor(), /*retain_graph=*/true);
  twin.backward();
  CHECK_ALLCLOSE(twin_leaf.grad().to(kCPU), cpu_leaf.grad() * 2.0, 1e-10, 1e-13);
}

TEST_CASE("cross_entropy on the GPU: a target outside [0, C) that is not ignore_index is an error, as on the CPU" *
          doctest::skip(!cuda_is_available())) {
  const Tensor x = randn({3, 4}, TensorOptions(kFloat32).device(kGpu)).requires_grad_();
  for (const std::vector<int64_t>& bad : {std::vector<int64_t>{0, 4, 1}, std::vector<int64_t>{-1, 0, 1},
                                          std::vector<int64_t>{kIgnore, 2, 1000000}}) {
    const Tensor targets = from_vector<int64_t>(bad, {3});
    const char* message = "cross_entropy: a target is outside [0, 4) and is not ignore_index (-100)";
    CHECK_THROWS_CONTAINING(cross_entropy(x, targets.to(kGpu)), message);
    CHECK_THROWS_CONTAINING(cross_entropy(x.detach().to(kCPU), targets), message);
  }
  // ignore_index itself may be any value, and the GPU is still usable after the error.
  const Tensor ok = from_vector<int64_t>({kIgnore, 3, 0}, {3}).to(kGpu);
  CHECK(std::isfinite(cross_entropy(x, ok).item<double>()));
  CHECK(std::isfinite(cross_entropy(x, from_vector<int64_t>({7, 3, 0}, {3}).to(kGpu), 7).item<double>()));
}

TEST_CASE("cross_entropy on the GPU: gradcheck in float64" * doctest::skip(!cuda_is_available())) {
  manual_seed(1306);
  const Tensor targets = from_vector<int64_t>({4, kIgnore, 0, 2}, {4}).to(kGpu);
  for (Reduction reduction : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
    for (double eps : {0.0, 0.3}) {
      CAPTURE(eps);
      const Tensor x = randn({4, 5}, TensorOptions(kFloat64).device(kGpu)).requires_grad_();
      CHECK_GRADCHECK([&](const tensor_list& in) { return cross_entropy(in[0], targets, kIgnore, eps, reduction); },
                      (tensor_list{x}));
    }
  }
}
