// scaled_dot_product_attention on the GPU against the CPU's kernels on the same values: the
// output and dQ, dK, dV over the features and their combinations (odd lengths, Sq != Sk,
// decoding, causal, grouped-query heads, masks, dropout), float32 against float32 and the
// half types against float64; the dropped scores the same on both devices for the same
// generator state; gradcheck in float64 on the GPU. Outputs are allocated after the
// allocator's cache was filled with NaN, so an element a kernel forgets shows.
//
// float16 and bfloat16 at head dims 64 and 128 run the flash kernels (cuda/flash_attention.cu);
// everything else runs the composite twin on cuBLAS. The flash backward has two forms, one pass
// with dQ by atomic adds (the default) and two passes (under use_deterministic_algorithms):
// both are checked. The tests of the flash kernels say "flash kernels" in their names; those of
// the twin's half types say "(half-precision cuBLAS)", the kernels the sanitizers' initcheck and
// racecheck cannot follow on sm_90.
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <fmt/core.h>

#include <minigrad/config.h>  // MINIGRAD_WITH_CUDA
#include <minigrad/core/determinism.h>
#include <minigrad/core/generator.h>
#if MINIGRAD_WITH_CUDA
#include <minigrad/cuda/runtime.h>  // the allocator's statistics
#endif

#include "tests/cuda_test_support.h"

using namespace minigrad;
using namespace minigrad::test;

namespace {

void poison_gpu_cache(int64_t elements) {
  (void)full({elements}, std::numeric_limits<double>::quiet_NaN(), TensorOptions(kFloat32).device(kGpu));
}

enum class MaskKind { None, Padding, Additive };

struct Case {
  int64_t batch, q_heads, kv_heads, q_len, k_len, head_dim;
  bool is_causal;
  MaskKind mask;
  double p;
  double rise = 0.0;  // each key's score this much above the previous key's (rising_scores)
};

constexpr auto kNoMask = MaskKind::None, kPadding = MaskKind::Padding, kAdditive = MaskKind::Additive;

const Case kCases[] = {
    {2, 2, 2, 7, 7, 64, false, kNoMask, 0.0},
    {1, 4, 4, 129, 257, 64, false, kNoMask, 0.0},  // lengths past the tiles
    {2, 2, 2, 100, 300, 128, true, kNoMask, 0.0},  // causal, Sq < Sk
    {1, 2, 2, 300, 100, 64, true, kNoMask, 0.0},   // causal, Sq > Sk
    {2, 8, 2, 33, 65, 64, false, kPadding, 0.0},   // grouped-query heads, a padding mask
    {4, 2, 2, 1, 513, 128, false, kNoMask, 0.0},   // decoding: one query
    {2, 4, 2, 77, 150, 64, true, kPadding, 0.2},   // everything at once
    {2, 4, 4, 70, 90, 64, false, kAdditive, 0.0},  // an additive mask: -inf entries, a fully masked row
    {1, 4, 2, 65, 130, 128, true, kAdditive, 0.1}, // ... with causal, grouped-query heads, dropout
    {2, 4, 2, 77, 136, 64, true, kPadding, 0.2},   // Sk a multiple of 8: lanes share each group's Philox call
    {1, 2, 1, 50, 200, 128, false, kNoMask, 0.5},  // ... at head dim 128, grouped-query heads
    {1, 2, 2, 64, 64, 32, false, kNoMask, 0.0},    // head dim 32
    {1, 2, 2, 40, 50, 96, true, kNoMask, 0.0},     // head dim 96
    // Scores rising along the keys, so that the forward's running max moves at later steps
    // (every other step of 64 keys at 0.075, every step at 0.2) and trails the true max between
    {1, 2, 2, 64, 520, 64, false, kNoMask, 0.0, 0.075},
    {1, 2, 2, 200, 200, 128, true, kNoMask, 0.0, 0.2},
};

std::string describe(const Case& c) {
  const char* mask = c.mask == kNoMask ? "none" : c.mask == kPadding ? "padding" : "additive";
  return fmt::format("B {} Hq {} Hk {} Sq {} Sk {} D {} causal {} mask {} p {} rise {}", c.batch, c.q_heads,
                     c.kv_heads, c.q_len, c.k_len, c.head_dim, c.is_causal, mask, c.p, c.rise);
}

// q and k changed so that the scaled score of key j gains rise * j: every column of q plus 1,
// of key j plus rise * j / sqrt(D) (spread over the columns, so that no element grows large).
void rising_scores(Tensor& q, Tensor& k, double rise) {
  const int64_t k_len = k.size(2), dim = k.size(3);
  const double per_key = rise / std::sqrt(static_cast<double>(dim));
  std::vector<double> ramp(static_cast<size_t>(k_len));
  for (int64_t j = 0; j < k_len; ++j) ramp[static_cast<size_t>(j)] = per_key * static_cast<double>(j);
  const TensorOptions like = TensorOptions(q.dtype()).device(q.device());
  q = q.add(ones({dim}, like));
  k = k.add(from_vector(ramp, {k_len, 1}).to(q.dtype()).to(q.device()));
}

// A [1, Hq, Sq, Sk] additive mask, float64 on the CPU: multiples of 1/4 in [-2, 2] (exact in
// every floating dtype, so each run adds the same numbers), -inf at every 11th position, and
// query row 0 masked out entirely (its output and gradients are zeros).
Tensor additive_mask(const Case& c) {
  std::vector<double> values;
  for (int64_t h = 0; h < c.q_heads; ++h)
    for (int64_t i = 0; i < c.q_len; ++i)
      for (int64_t j = 0; j < c.k_len; ++j)
        values.push_back(i == 0 || (i + 2 * j + h) % 11 == 0
                             ? -std::numeric_limits<double>::infinity()
                             : static_cast<double>((i * 7 + j * 3 + h * 5) % 17 - 8) / 4.0);
  return from_vector(values, {1, c.q_heads, c.q_len, c.k_len});
}

// Out and dQ, dK, dV of attention on `device` in `dtype`, from the CPU float64 values given.
tensor_list run(const Case& c, const tensor_list& inputs, const Tensor& dy, Device device, DType dtype) {
  tensor_list leaves;
  // detach(): where dtype and device are t's own, to() returns t itself, which must stay a
  // plain input for the next run.
  for (const Tensor& t : inputs) leaves.push_back(t.to(dtype).to(device).detach().requires_grad_());
  std::optional<Tensor> mask;
  if (c.mask == kPadding) {
    std::vector<int64_t> lengths;
    for (int64_t b = 0; b < c.batch; ++b) lengths.push_back(std::max<int64_t>(1, c.k_len - 7 * b));
    mask = lt(arange(c.k_len).reshape({1, 1, 1, c.k_len}), from_vector(lengths, {c.batch, 1, 1, 1})).to(device);
  } else if (c.mask == kAdditive) {
    mask = additive_mask(c).to(dtype).to(device);
  }
  Generator generator(11);
  const Tensor out = scaled_dot_product_attention(leaves[0], leaves[1], leaves[2], mask, c.p, c.is_causal,
                                                  std::nullopt, c.q_heads != c.kv_heads, &generator);
  out.backward(dy.to(dtype).to(device));
  return {out.detach(), leaves[0].grad(), leaves[1].grad(), leaves[2].grad()};
}

// Every element of got within tol of want, scaled by want's largest magnitude.
void check_close_scaled(const Tensor& got, const Tensor& want, double tol) {
  REQUIRE(got.sizes() == want.sizes());
  const Tensor g = got.to(kCPU).to(kFloat64), w = want.to(kCPU).to(kFloat64);
  CHECK(!isnan(g).any().item<bool>());
  const double scale = std::max(1.0, max(abs(w)).item<double>());
  CHECK(max(abs(g - w)).item<double>() <= tol * scale);
}

}  // namespace

namespace {

// q, k, v and O's gradient dy, float64 on the CPU.
struct CaseInputs {
  tensor_list qkv;
  Tensor dy;
};

CaseInputs case_inputs(const Case& c) {
  Tensor q = randn({c.batch, c.q_heads, c.q_len, c.head_dim}, kFloat64);
  Tensor k = randn({c.batch, c.kv_heads, c.k_len, c.head_dim}, kFloat64);
  if (c.rise != 0.0) rising_scores(q, k, c.rise);
  return {{q, k, randn({c.batch, c.kv_heads, c.k_len, c.head_dim}, kFloat64)},
          randn({c.batch, c.q_heads, c.q_len, c.head_dim}, kFloat64)};
}

bool runs_flash_kernels(const Case& c) { return c.head_dim == 64 || c.head_dim == 128; }

// The cases `which` selects, in float16 and bfloat16 on the GPU, against float64 on the CPU
// from the same rounded values.
template <typename Which>
void check_half_types(Which which) {
  for (const Case& c : kCases) {
    if (!which(c)) continue;
    CAPTURE(describe(c));
    const CaseInputs in = case_inputs(c);
    poison_gpu_cache(1 << 24);
    for (DType half : kHalfDTypes) {
      CAPTURE(dtype_name(half));
      tensor_list rounded;
      for (const Tensor& t : in.qkv) rounded.push_back(t.to(half).to(kFloat64));
      const Tensor dy = in.dy.to(half).to(kFloat64);
      const tensor_list reference = run(c, rounded, dy, kCPU, kFloat64);
      for (bool deterministic : {false, true}) {
        CAPTURE(deterministic);
        DeterministicAlgorithmsGuard mode(deterministic);
        const tensor_list gpu = run(c, rounded, dy, kGpu, half);
        for (size_t i = 0; i < gpu.size(); ++i) {
          CAPTURE(i);
          CHECK(gpu[i].dtype() == half);
          check_close_scaled(gpu[i], reference[i], half == kBFloat16 ? 4e-2 : 5e-3);
        }
      }
    }
  }
}

}  // namespace

TEST_CASE("scaled_dot_product_attention on the GPU matches the CPU, every feature: float32" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(1300);
  for (const Case& c : kCases) {
    CAPTURE(describe(c));
    const CaseInputs in = case_inputs(c);
    poison_gpu_cache(1 << 24);
    const tensor_list cpu32 = run(c, in.qkv, in.dy, kCPU, kFloat32);
    const tensor_list gpu32 = run(c, in.qkv, in.dy, kGpu, kFloat32);
    for (size_t i = 0; i < cpu32.size(); ++i) {
      CAPTURE(i);
      check_close_scaled(gpu32[i], cpu32[i], 1e-4);
    }
  }
}

TEST_CASE("scaled_dot_product_attention on the GPU matches the CPU, every feature: the flash kernels in float16 "
          "and bfloat16" * doctest::skip(!cuda_is_available())) {
  manual_seed(1304);
  check_half_types(runs_flash_kernels);
}

TEST_CASE("scaled_dot_product_attention on the GPU matches the CPU: head dims the flash kernels do not run, "
          "float16 and bfloat16 (half-precision cuBLAS)" * doctest::skip(!cuda_is_available())) {
  manual_seed(1305);
  check_half_types([](const Case& c) { return !runs_flash_kernels(c); });
}

TEST_CASE("scaled_dot_product_attention: the GPU drops the scores the CPU drops, for the same generator state" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(1301);
  // V the identity: O = P * keep / (1 - p), so the zeros of O are the dropped scores.
  const int64_t batch = 2, heads = 2, q_len = 45, k_len = 128;
  const Tensor q = randn({batch, heads, q_len, 64}, kFloat64), k = randn({batch, heads, k_len, 64}, kFloat64);
  const Tensor v = eye(k_len, kFloat64).expand({batch, heads, k_len, k_len}).contiguous();
  for (bool is_causal : {false, true}) {
    CAPTURE(is_causal);
    Generator on_cpu(21), on_gpu(21);
    const Tensor cpu = scaled_dot_product_attention(q, k, v, std::nullopt, 0.4, is_causal, std::nullopt, false, &on_cpu);
    const Tensor gpu = scaled_dot_product_attention(q.to(kGpu), k.to(kGpu), v.to(kGpu), std::nullopt, 0.4, is_causal,
                                                    std::nullopt, false, &on_gpu);
    CHECK(equal(eq(gpu.cpu(), 0.0), eq(cpu, 0.0)));
    CHECK_ALLCLOSE(gpu.cpu(), cpu, 1e-10, 1e-10);
  }
}

TEST_CASE("scaled_dot_product_attention: the flash kernels drop the scores the CPU drops, for the same generator "
          "state" * doctest::skip(!cuda_is_available())) {
  manual_seed(1306);
  // As above, in bfloat16 (the identity is exact in it): O = P * keep / (1 - p) rounded, zero
  // exactly where a score is dropped. Head dim 128 = k_len, 45 queries (not a whole tile).
  const int64_t batch = 2, heads = 2, q_len = 45, k_len = 128;
  const Tensor q = randn({batch, heads, q_len, k_len}, kFloat64).to(kBFloat16);
  const Tensor k = randn({batch, heads, k_len, k_len}, kFloat64).to(kBFloat16);
  const Tensor v = eye(k_len, kFloat64).expand({batch, heads, k_len, k_len}).contiguous().to(kBFloat16);
  for (bool is_causal : {false, true}) {
    CAPTURE(is_causal);
    Generator on_cpu(22), on_gpu(22);
    const Tensor cpu = scaled_dot_product_attention(q.to(kFloat64), k.to(kFloat64), v.to(kFloat64), std::nullopt,
                                                    0.4, is_causal, std::nullopt, false, &on_cpu);
    const Tensor gpu = scaled_dot_product_attention(q.to(kGpu), k.to(kGpu), v.to(kGpu), std::nullopt, 0.4, is_causal,
                                                    std::nullopt, false, &on_gpu)
                           .cpu()
                           .to(kFloat64);
    CHECK(equal(eq(gpu, 0.0), eq(cpu, 0.0)));
    CHECK_ALLCLOSE(gpu, cpu, 1e-2, 1e-3);
  }
}

TEST_CASE("scaled_dot_product_attention: the flash kernels read strided views and give the same bits every run "
          "under use_deterministic_algorithms" * doctest::skip(!cuda_is_available())) {
  manual_seed(1307);
  // q, k and v as views of one [B, S, 3, H, D] projection, transposed to [B, H, S, D]: strided
  // rows, no copies. The kernels see the same values as from contiguous copies, and with
  // deterministic algorithms sum in a fixed order (no atomics): two runs and the views agree bit
  // for bit, dQ included. The default form (dQ by atomic adds) agrees with them within a
  // rounding of dQ's 16-bit output.
  const int64_t batch = 2, len = 150, heads = 4, dim = 64;
  const Tensor qkv = randn({batch, len, 3, heads, dim}, TensorOptions(kBFloat16).device(kGpu));
  const Tensor dy = randn({batch, heads, len, dim}, TensorOptions(kBFloat16).device(kGpu));
  auto run_once = [&](bool views) {
    tensor_list leaves;
    for (int64_t which = 0; which < 3; ++which) {
      Tensor t = qkv.select(2, which).transpose(1, 2);
      leaves.push_back((views ? t : t.contiguous()).detach().requires_grad_());
    }
    CHECK(leaves[0].is_contiguous() == !views);
    Generator generator(5);
    const Tensor out =
        scaled_dot_product_attention(leaves[0], leaves[1], leaves[2], std::nullopt, 0.1, true, std::nullopt, false,
                                     &generator);
    out.backward(dy);
    return tensor_list{out.detach(), leaves[0].grad(), leaves[1].grad(), leaves[2].grad()};
  };
  tensor_list first, again, contiguous;
  {
    DeterministicAlgorithmsGuard deterministic(true);
    first = run_once(true);
    again = run_once(true);
    contiguous = run_once(false);
  }
  DeterministicAlgorithmsGuard atomic_grad_q(false);
  const tensor_list one_pass = run_once(true);
  for (size_t i = 0; i < first.size(); ++i) {  // O, dQ, dK, dV
    CAPTURE(i);
    CHECK(equal(first[i], again[i]));
    CHECK(equal(first[i], contiguous[i]));
    check_close_scaled(one_pass[i], first[i], 1e-2);
  }
}

TEST_CASE("scaled_dot_product_attention: the flash forward's two tile shapes give the same bits" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(1311);
  // A non-causal forward whose grid of 128-row blocks fills the GPU several times over takes the
  // wide tile shape (two mma tiles of queries a warp); its first heads alone, a grid of a few
  // blocks, take the narrow one (one tile a warp). The keys are visited in the same steps of 64
  // either way, clean and masking steps alike, so each row's arithmetic is the same: the same
  // bits, with a padding mask and dropout (batch 1: a score's dropout index does not depend on
  // the head count), and without them, on scores rising along the keys (the running max moves).
  for (const int64_t dim : {int64_t{64}, int64_t{128}}) {
    for (const bool masked : {true, false}) {
      CAPTURE(dim);
      CAPTURE(masked);
      // 1280 blocks of 128 rows (the second of a head 72 rows long), above 4 waves of 2 blocks an
      // SM on GPUs of up to 160 SMs; the first 4 heads alone make 8, too few for the wide shape.
      const int64_t heads = 640, len = 200, few = 4;
      const TensorOptions options = TensorOptions(kBFloat16).device(kGpu);
      Tensor q = randn({1, heads, len, dim}, options), k = randn({1, heads, len, dim}, options);
      const Tensor v = randn({1, heads, len, dim}, options);
      if (!masked) rising_scores(q, k, 0.1);
      std::optional<Tensor> mask;
      if (masked) mask = lt(arange(len).reshape({1, 1, 1, len}), len - 37).to(kGpu);
      const double p = masked ? 0.1 : 0.0;
      poison_gpu_cache(1 << 26);
      Generator all_generator(3), few_generator(3);
      const Tensor all = scaled_dot_product_attention(q, k, v, mask, p, false, std::nullopt, false, &all_generator);
      const Tensor first = scaled_dot_product_attention(q.narrow(1, 0, few), k.narrow(1, 0, few),
                                                        v.narrow(1, 0, few), mask, p, false, std::nullopt, false,
                                                        &few_generator);
      CHECK(!isnan(all).any().item<bool>());
      CHECK(equal(all.narrow(1, 0, few), first));
    }
  }
}

namespace {

// The allocator's peak, above what was allocated before, of forward + backward at one head
// of 4096 queries and keys (head dim 64, causal, dropout), in bytes. Its score matrix alone
// would be 32 MiB in bfloat16.
constexpr int64_t kLongLen = 4096;
constexpr size_t kScoreBytes = static_cast<size_t>(kLongLen * kLongLen) * 2;

template <typename Attention>
size_t peak_bytes_of(Attention attention) {
#if MINIGRAD_WITH_CUDA
  const TensorOptions options = TensorOptions(kBFloat16).device(kGpu);
  const Shape shape = {1, 1, kLongLen, 64};
  const Tensor q = randn(shape, options).requires_grad_(), k = randn(shape, options).requires_grad_(),
               v = randn(shape, options).requires_grad_();
  const Tensor dy = randn(shape, options);
  const size_t before = cuda::allocator_stats(0).allocated_bytes;
  cuda::reset_peak_stats(0);
  attention(q, k, v).backward(dy);
  return cuda::allocator_stats(0).peak_allocated_bytes - before;
#else
  (void)attention;
  return 0;
#endif
}

}  // namespace

TEST_CASE("scaled_dot_product_attention: the flash kernels never store the scores" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(1308);
  // O, L, D, the gradients and the atomic dQ's float32 sum: about 4 MiB with the allocator's
  // rounding (the sum is one 2 MiB block), an eighth of one score matrix.
  const size_t peak = peak_bytes_of([](const Tensor& q, const Tensor& k, const Tensor& v) {
    return scaled_dot_product_attention(q, k, v, std::nullopt, 0.1, true);
  });
  CHECK(peak < kScoreBytes / 4);
}

TEST_CASE("scaled_dot_product_attention: the twin stores the scores (half-precision cuBLAS)" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(1309);
  // For contrast: softmax_dropout(q k^T) v keeps at least one [Sq, Sk] matrix for its backward.
  const size_t peak = peak_bytes_of([](const Tensor& q, const Tensor& k, const Tensor& v) {
    return composite::scaled_dot_product_attention(q, k, v, std::nullopt, 0.1, true);
  });
  CHECK(peak >= kScoreBytes);
}

TEST_CASE("scaled_dot_product_attention: gradcheck in float64 on the GPU, causal + grouped-query + mask + dropout" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(1302);
  auto leaf = [](const Shape& s) { return randn(s, TensorOptions(kFloat64).device(kGpu)).requires_grad_(); };
  const Tensor q = leaf({1, 4, 5, 8}), k = leaf({1, 2, 7, 8}), v = leaf({1, 2, 7, 8});
  const Tensor mask = gt(rand({5, 7}, kFloat64), 0.2).to(kGpu);
  const auto attention = [&](const tensor_list& t) {
    Generator generator(3);
    return scaled_dot_product_attention(t[0], t[1], t[2], mask, 0.3, true, std::nullopt, true, &generator);
  };
  CHECK_GRADCHECK(attention, (tensor_list{q, k, v}));
}
