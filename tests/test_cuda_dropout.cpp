// dropout and softmax_dropout on the GPU (the elementwise engine; cuda/softmax_dropout.cu)
// against the CPU on the same values and the same generator state: row lengths covering
// every kernel (warp rows, block rows, the two-pass kernel, and odd lengths that cannot take
// 16-byte vectors), every option, dims other than the last, the half types against float64;
// the same dropped elements bit for bit on both devices, the kept fraction, fully masked
// rows, gradcheck in float64 on the GPU. Outputs are checked at every element, with the
// allocator's cache filled with NaN first so that an element a kernel forgets shows.
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <minigrad/core/generator.h>
#include <minigrad/kernels/dropout.h>

#include "tests/cuda_test_support.h"

using namespace minigrad;
using namespace minigrad::test;

namespace {

constexpr uint64_t kSeed = 0xd20d;

// Warp rows up to 1024 elements (32 and 1000 leave lanes or vector slots empty), block rows
// up to 4096 (the forward's up to 8192 in the half types); longer rows staged in shared memory
// where two blocks' rows fit an SM (on sm_90, the forward's x: all but 20000 in float64; the
// backward's x and dy: 8192 in every dtype but float64, 20000 in the half types), the two-pass
// kernel otherwise; 1, 7, 1025 and 8193 are not multiples of any vector width (the two-pass
// kernel one element at a time).
const std::vector<int64_t> kRowLengths = {1, 7, 32, 1000, 1024, 1025, 8192, 8193, 20000};

// Fills freed GPU blocks with NaN, so outputs allocated next start as NaN where the caching
// allocator hands them back.
void poison_gpu_cache(int64_t elements) {
  (void)full({elements}, std::numeric_limits<double>::quiet_NaN(), TensorOptions(kFloat32).device(kGpu));
}

struct Options {
  std::string name;
  double p;
  std::optional<Tensor> mask;  // on the CPU; moved to the GPU for the GPU call
  bool is_causal;
  std::optional<double> scale;
  // > 0: the mask is a view of a wider one, from this column on, made on each device (its rows
  // start at odd offsets, so the kernels cannot read it in vectors).
  int64_t mask_column_offset = 0;
};

std::vector<Options> options_for(int64_t rows, int64_t n, DType dtype) {
  // Bool mask with column 0 kept: no row fully masked, so the twin comparisons stay finite.
  Tensor keep = rand({rows, n}, kFloat64) < 0.7;
  keep = logical_or(keep, eq(arange(n, TensorOptions(kFloat64)), 0.0));
  // Padding: row r keeps its first (r + 1) * n / (rows + 1) + 3 columns (at least one), so
  // the kernels see vectors the mask hides wholly, in part and not at all.
  std::vector<double> lengths;
  for (int64_t r = 0; r < rows; ++r) lengths.push_back(static_cast<double>((r + 1) * n / (rows + 1) + 3));
  const Tensor padding = lt(arange(n, TensorOptions(kFloat64)).view({1, n}), from_vector<double>(lengths, {rows, 1}));
  Tensor wide_keep = rand({rows, n + 1}, kFloat64) < 0.7;
  wide_keep = logical_or(wide_keep, eq(arange(n + 1, TensorOptions(kFloat64)), 1.0));
  return {
      {"no dropout", 0.0, std::nullopt, false, std::nullopt},
      {"p 0.1", 0.1, std::nullopt, false, std::nullopt},
      {"p 0.5, scale", 0.5, std::nullopt, false, 0.125},
      {"bool mask", 0.1, keep, false, std::nullopt},
      {"padding mask", 0.1, padding, false, std::nullopt},
      {"additive mask broadcast over rows", 0.1, randn({n}, dtype), false, 2.0},
      {"causal", 0.1, std::nullopt, true, std::nullopt},
      {"causal, bool mask", 0.2, keep, true, 0.5},
      {"bool mask, a view at odd offsets", 0.1, wide_keep, false, std::nullopt, 1},
      {"additive mask, a view at odd offsets", 0.1, randn({rows, n + 1}, dtype), true, 0.5, 1},
  };
}

// The mask of `o` on `device` (narrowed there when it is a view of a wider one).
Tensor mask_on(const Options& o, int64_t n, Device device) {
  const Tensor mask = o.mask->to(device);
  return o.mask_column_offset > 0 ? mask.narrow(-1, o.mask_column_offset, n) : mask;
}

// softmax_dropout on `device` with a generator seeded kSeed; y and dx for the gradient dy.
std::pair<Tensor, Tensor> run(const Tensor& x, int64_t dim, const Options& o, const Tensor& dy, Device device) {
  Generator gen(kSeed);
  Tensor leaf = x.detach().to(device).requires_grad_();
  const std::optional<Tensor> mask = o.mask ? std::optional<Tensor>(mask_on(o, x.size(dim), device)) : std::nullopt;
  const Tensor y = softmax_dropout(leaf, dim, o.p, true, mask, o.is_causal, o.scale, &gen);
  y.backward(dy.to(device));
  return {y, leaf.grad()};
}

}  // namespace

TEST_CASE("softmax_dropout on the GPU matches the CPU at every element, every row length and option" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(300);
  for (int64_t n : kRowLengths) {
    for (DType dtype : {kFloat64, kFloat32}) {
      const int64_t rows = 6;
      const Tensor x = (randn({2, rows / 2, n}, kFloat64) * 3.0).to(dtype);
      const Tensor dy = randn(x.sizes(), dtype);
      const double tol = dtype == kFloat64 ? 1e-12 : 1e-5;
      for (Options o : options_for(rows / 2, n, dtype)) {
        CAPTURE(n);
        CAPTURE(dtype);
        CAPTURE(o.name);
        poison_gpu_cache(8 * x.numel());
        const auto [y_gpu, dx_gpu] = run(x, -1, o, dy, kGpu);
        const auto [y_cpu, dx_cpu] = run(x, -1, o, dy, kCPU);
        CHECK(y_gpu.device() == kGpu);
        CHECK(y_gpu.dtype() == dtype);
        CHECK(!isnan(y_gpu).any().item<bool>());
        CHECK(!isnan(dx_gpu).any().item<bool>());
        CHECK_ALLCLOSE(y_gpu, y_cpu, tol, tol * 1e-2);
        // dx = scale * P * (dP - sum(dP * P)) cancels where P is near 1 (a causal row's first
        // element): an absolute error of a few float ulps of dP. And each device recomputes P
        // from x and the row's log-sum-exp L, rounded to float: P's relative error is about
        // |L| * 2^-24 on either side (|L| up to about 20 here).
        CHECK_ALLCLOSE(dx_gpu, dx_cpu, tol, tol * 0.5);
      }
    }
  }
}

TEST_CASE("softmax_dropout on the GPU: the same elements dropped as on the CPU, bit for bit" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(301);
  for (int64_t n : {8, 1000, 1025, 20000}) {
    CAPTURE(n);
    const Tensor x = randn({4, n}, kFloat32);
    Generator g_cpu(kSeed), g_gpu(kSeed);
    const Tensor y_cpu = softmax_dropout(x, -1, 0.5, true, std::nullopt, false, std::nullopt, &g_cpu);
    const Tensor y_gpu = softmax_dropout(x.to(kGpu), -1, 0.5, true, std::nullopt, false, std::nullopt, &g_gpu);
    CHECK(same_bits(eq(y_gpu, 0.0).to(kCPU), eq(y_cpu, 0.0)));
    // dropout through the engine, on a transposed x: the index is the logical row-major one.
    const Tensor xt = (rand({n, 4}, kFloat32) + 1.0).transpose(0, 1);
    CHECK(same_bits(eq(dropout(xt.to(kGpu), 0.5, true, &g_gpu), 0.0).to(kCPU),
                    eq(dropout(xt, 0.5, true, &g_cpu), 0.0)));
  }
}

TEST_CASE("softmax_dropout on the GPU: dims other than the last and strided x drop x's elements" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(302);
  const Tensor x = randn({6, 5, 40}, kFloat64);
  const Tensor dy = randn(x.sizes(), kFloat64);
  const Options with_mask{"additive mask", 0.3, randn({5, 1}, kFloat64), false, 0.5};
  for (int64_t dim : {0, 1, 2}) {
    for (bool strided : {false, true}) {
      CAPTURE(dim);
      CAPTURE(strided);
      const Tensor in = strided ? x.transpose(0, 2).contiguous().transpose(0, 2) : x;
      const auto [y_gpu, dx_gpu] = run(in, dim, with_mask, dy, kGpu);
      const auto [y_cpu, dx_cpu] = run(in, dim, with_mask, dy, kCPU);
      CHECK_ALLCLOSE(y_gpu, y_cpu, 1e-12, 1e-14);
      CHECK_ALLCLOSE(dx_gpu, dx_cpu, 1e-12, 1e-14);
    }
  }
}

TEST_CASE("softmax_dropout on the GPU: float16 and bfloat16 against float64 on the CPU" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(303);
  for (int64_t n : kRowLengths) {
    for (DType half : kHalfDTypes) {
      const Tensor x = randn({2, 3, n}, kFloat64).to(half);
      const Tensor dy = randn(x.sizes(), kFloat64).to(half);
      for (const Options& o : options_for(3, n, half)) {
        CAPTURE(n);
        CAPTURE(half);
        CAPTURE(o.name);
        poison_gpu_cache(8 * x.numel());
        const auto [y_gpu, dx_gpu] = run(x, -1, o, dy, kGpu);
        Options in_double = o;
        if (o.mask && o.mask->dtype() != kBool) in_double.mask = o.mask->to(kFloat64);
        const auto [y_ref, dx_ref] = run(x.to(kFloat64), -1, in_double, dy.to(kFloat64), kCPU);
        CHECK(y_gpu.dtype() == half);
        CHECK(!isnan(y_gpu).any().item<bool>());
        // y rounds once to 11 or 8 bits. dx is computed in float from x and L, and rounds once;
        // the tolerance is that of dy's rounding: about P * 2^-8 * |dP| (|dP| up to 4 here)
        // where dP - sum(dP * P) cancels.
        CHECK_ALLCLOSE(y_gpu.to(kFloat64), y_ref, 2e-2, 1e-4);
        CHECK_ALLCLOSE(dx_gpu.to(kFloat64), dx_ref, 5e-2, 2e-2);
      }
    }
  }
}

TEST_CASE("dropout on the GPU: the kept fraction is 1 - p_q within 5 sigma over 1e7 elements" *
          doctest::skip(!cuda_is_available())) {
  const int64_t n = 10000000;
  Generator gen(kSeed);
  const double p = 0.1;
  const double p_q = dropout_bits::threshold_of(p) / 65536.0;
  const double sigma = std::sqrt(n * p_q * (1.0 - p_q));
  const double kept = ne(dropout(ones({n}, TensorOptions(kBFloat16).device(kGpu)), p, true, &gen), 0.0)
                          .to(kFloat64).sum().item<double>();
  CHECK(std::fabs(kept - n * (1.0 - p_q)) < 5.0 * sigma);
  const Tensor y = softmax_dropout(zeros({1000, 10000}, TensorOptions(kBFloat16).device(kGpu)), -1, p, true,
                                   std::nullopt, false, std::nullopt, &gen);
  const double kept_rows = ne(y, 0.0).to(kFloat64).sum().item<double>();
  CHECK(std::fabs(kept_rows - n * (1.0 - p_q)) < 5.0 * sigma);
}

TEST_CASE("softmax_dropout on the GPU: a fully masked row gives zeros forward and backward" *
          doctest::skip(!cuda_is_available())) {
  for (int64_t n : {8, 1024, 1025, 20000}) {
    CAPTURE(n);
    // Row 1 masked out everywhere; the mask read with stride 0 along the rows.
    const Tensor keep = ne(arange(3, TensorOptions(kFloat64)), 1.0).reshape({3, 1}).expand({3, n});
    const Tensor x = randn({3, n}, kFloat32);
    const Tensor dy = randn({3, n}, kFloat32);
    const auto [y, dx] = run(x, -1, Options{"fully masked row", 0.2, keep, false, std::nullopt}, dy, kGpu);
    CHECK(eq(y.select(0, 1), 0.0).all().item<bool>());
    CHECK(eq(dx.select(0, 1), 0.0).all().item<bool>());
    CHECK(isfinite(y).all().item<bool>());
    CHECK(isfinite(dx).all().item<bool>());
  }
}

TEST_CASE("softmax_dropout and dropout on the GPU: gradcheck in float64, a generator re-seeded per call" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(304);
  const Tensor x = randn({2, 3, 9}, TensorOptions(kFloat64).device(kGpu)).requires_grad_();
  const Tensor keep = (rand({3, 9}, kFloat64) < 0.8).to(kGpu);
  CHECK_GRADCHECK(
      [&](const tensor_list& t) {
        Generator gen(kSeed);
        return softmax_dropout(t[0], -1, 0.3, true, keep, true, 0.7, &gen);
      },
      tensor_list{x});
  CHECK_GRADCHECK(
      [&](const tensor_list& t) {
        Generator gen(kSeed);
        return softmax_dropout(t[0], 1, 0.3, true, std::nullopt, false, std::nullopt, &gen);
      },
      tensor_list{x});
  CHECK_GRADCHECK(
      [&](const tensor_list& t) {
        Generator gen(kSeed);
        return dropout(t[0], 0.3, true, &gen);
      },
      tensor_list{x});
}

TEST_CASE("softmax_dropout on the GPU against its twin on the GPU, values and gradients" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(305);
  const Tensor x = randn({2, 4, 64}, kFloat32);
  const Tensor dy = randn(x.sizes(), kFloat32);
  for (const Options& o : options_for(4, 64, kFloat32)) {
    CAPTURE(o.name);
    Generator g1(kSeed), g2(kSeed);
    Tensor a = gpu_leaf(x), b = gpu_leaf(x);
    const std::optional<Tensor> mask = o.mask ? std::optional<Tensor>(mask_on(o, 64, kGpu)) : std::nullopt;
    const Tensor fused = softmax_dropout(a, -1, o.p, true, mask, o.is_causal, o.scale, &g1);
    const Tensor twin = composite::softmax_dropout(b, -1, o.p, true, mask, o.is_causal, o.scale, &g2);
    fused.backward(dy.to(kGpu));
    twin.backward(dy.to(kGpu));
    CHECK_ALLCLOSE(fused, twin, 1e-5, 1e-7);
    CHECK_ALLCLOSE(a.grad(), b.grad(), 1e-5, 1e-6);
  }
}
