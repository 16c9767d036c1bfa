// Runs the flash-attention kernels (cuda/flash_attention.cu and cuda/mma.cuh as rewrite.py
// turns them into host code) under emu.h, on the CPU, and compares O, the log-sum-exp, dQ,
// dK and dV with the float64 CPU reference (scaled_dot_product_attention and its backward on
// float64 copies of the same rounded inputs). Built and run by ./run, which see.
//
//   driver [case ...]   the named cases (default: all), each in bfloat16 and float16
//   driver --list       the case names
// Exit status 0 when every case passes with no emulator error, 1 otherwise, 2 on bad usage.

// The generated file defines the kernels' entry points, which libminigrad.a (a CUDA build)
// defines too: renamed here before any header declares them.
#define flash_attention_supports emu_flash_attention_supports
#define flash_attention_forward emu_flash_attention_forward
#define flash_attention_backward emu_flash_attention_backward

#include "emu.h"

#include <chrono>
#include <cstdio>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include <minigrad/cuda/runtime.h>
#include <minigrad/minigrad.h>

// The runtime calls of flash_attention.cu's host code, answered without a GPU.
#include "host_calls.h"

#include "flash_attention.inc"

#undef cudaGetDevice
#undef cudaFuncSetAttribute
#undef cudaDeviceGetAttribute
#undef cudaOccupancyMaxActiveBlocksPerMultiprocessor
#undef cudaGetLastError
#undef DeviceGuard
#undef current_stream
#undef current_device

using namespace minigrad;

namespace {

// What a launch may read by cp.async: the rows of q, k, v and dO its parameters describe (and
// the backward's L and D, below).
void add_readable_rows(const cuda::HeadRows& r, int batch, int heads, int rows, int dim) {
  if (r.data == nullptr || batch == 0 || heads == 0 || rows == 0) return;
  const int64_t elements =
      (batch - 1) * r.batch_stride + (heads - 1) * r.head_stride + (rows - 1) * r.row_stride + dim;
  emu::add_readable(r.data, static_cast<size_t>(elements) * sizeof(uint16_t));
}

void readable_of_params(const void* params) {
  const auto& p = *static_cast<const cuda::Params*>(params);  // every kernel takes a Params
  add_readable_rows(p.q, p.batch, p.q_heads, p.q_len, p.head_dim);
  add_readable_rows(p.k, p.batch, p.kv_heads(), p.k_len, p.head_dim);
  add_readable_rows(p.v, p.batch, p.kv_heads(), p.k_len, p.head_dim);
  add_readable_rows(p.grad_out, p.batch, p.q_heads, p.q_len, p.head_dim);
  // The backward's L and D: grad_kv copies each step's by cp.async.
  const size_t query_rows = static_cast<size_t>(p.batch) * p.q_heads * p.q_len;
  if (p.log_sum_exp != nullptr && query_rows > 0) emu::add_readable(p.log_sum_exp, query_rows * sizeof(float));
  if (p.delta != nullptr && query_rows > 0) emu::add_readable(p.delta, query_rows * sizeof(float));
}

// An output tensor with guard bands of 0xFF bytes on both sides: a kernel's store out of
// bounds changes them.
struct Guarded {
  Tensor base, view;
  int64_t pad, n;
};
Guarded guarded(const Shape& sizes, DType dtype) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  const int64_t pad = 64;
  Tensor base = empty({n + 2 * pad}, TensorOptions(dtype));
  memset(base.raw_data(), 0xFF, static_cast<size_t>(n + 2 * pad) * base.element_size());
  return {base, base.narrow(0, pad, n).view(sizes), pad, n};
}
bool guard_intact(const Guarded& g) {
  const auto* bytes = static_cast<const uint8_t*>(g.base.raw_data());
  const size_t element = g.base.element_size();
  for (size_t i = 0; i < static_cast<size_t>(g.pad) * element; ++i)
    if (bytes[i] != 0xFF || bytes[static_cast<size_t>(g.pad + g.n) * element + i] != 0xFF) return false;
  return true;
}

struct Comparison {
  double max_error = 0, max_reference = 0;
  long nonfinite_mismatches = 0;  // a NaN or infinity on one side that the other does not have
};
Comparison compare(const Tensor& got, const Tensor& reference) {
  const std::vector<double> a = got.to_vector<double>(), r = reference.to_vector<double>();
  Comparison c;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isfinite(r[i])) c.max_reference = std::max(c.max_reference, std::fabs(r[i]));
    if (!std::isfinite(r[i]) || !std::isfinite(a[i])) {
      if (!(a[i] == r[i])) ++c.nonfinite_mismatches;
      continue;
    }
    c.max_error = std::max(c.max_error, std::fabs(a[i] - r[i]));
  }
  return c;
}

enum class Mask {
  None,
  PaddingBool,        // bool [B, 1, 1, Sk]: batch b's last 13 b + 3 keys masked out
  AdditiveWithInf,    // additive [B, 1, Sq, Sk] of q's dtype, every 7th entry -inf, row 5 all -inf
  Bool2d,             // bool [Sq, Sk], random, row 2 all false
  AdditiveFull,       // additive [B, Hq, Sq, Sk], no broadcasting
};

struct Case {
  const char* name;
  int B, Hq, Hk, Sq, Sk, D;
  bool causal;
  Mask mask;
  double dropout;
  bool strided = false;    // q, k, v as transposed views of [B, S, H, D]
  double q_scale = 1.0;    // q times this: large logits exercise the online softmax's rescaling
  bool unaligned = false;  // rows not 16-byte aligned: the host code's chunk_aligned copies
  double rise = 0.0;       // each key's score this much (natural units) above the key before it's:
                           // the forward's running max moves at later steps and trails in between
};

const std::vector<Case> kCases = {
    // name                            B  Hq Hk   Sq   Sk    D  causal mask               dropout
    {"tiny",                           2, 2, 2,    7,   7,  64, false, Mask::None,            0.0},
    {"129x257",                        1, 2, 2,  129, 257,  64, false, Mask::None,            0.0},
    {"causal100x300d128",              1, 2, 2,  100, 300, 128, true,  Mask::None,            0.0},
    {"causal300x100",                  1, 2, 2,  300, 100,  64, true,  Mask::None,            0.0},
    {"gqa_padding",                    2, 4, 2,   33,  65,  64, false, Mask::PaddingBool,     0.0},
    {"single_query_d128",              1, 2, 2,    1, 150, 128, false, Mask::None,            0.0},
    {"gqa_causal_padding_dropout",     2, 4, 2,   77, 150,  64, true,  Mask::PaddingBool,     0.2},
    {"additive_inf_masked_row",        1, 2, 2,   40,  90,  64, false, Mask::AdditiveWithInf, 0.0},
    {"additive_causal_dropout_d128",   1, 2, 1,   70,  70, 128, true,  Mask::AdditiveWithInf, 0.1},
    {"strided_views",                  1, 2, 2,   50,  80,  64, false, Mask::None,            0.0, true},
    {"odd_sk_dropout",                 1, 2, 2,   45,  77,  64, false, Mask::None,            0.3},
    {"gqa4_bool2d_dropout_d128",       2, 4, 1,   70, 131, 128, false, Mask::Bool2d,          0.25},
    {"additive_full_causal",           1, 2, 2,   65,  64,  64, true,  Mask::AdditiveFull,    0.0},
    {"large_logits_long",              1, 1, 1,   64, 520,  64, false, Mask::None,            0.0, false, 8.0},
    {"unaligned_views",                1, 2, 2,   30,  40,  64, false, Mask::None,            0.0, false, 1.0, true},
    {"empty_keys",                     1, 2, 2,    5,   0,  64, false, Mask::None,            0.0},
    {"empty_queries",                  1, 2, 2,    0,  10,  64, false, Mask::None,            0.0},
    {"high_dropout",                   1, 2, 2,   64, 128,  64, true,  Mask::None,            0.9},
    {"one_row_short_of_tiles",         1, 2, 2,   63, 127,  64, false, Mask::None,            0.0},
    // Sk a multiple of 8: the lanes share each group of 8 scores' Philox call (the others draw their own)
    {"gqa_causal_padding_dropout_sk8", 2, 4, 2,   77, 136,  64, true,  Mask::PaddingBool,     0.2},
    {"dropout_d128_sk8",               1, 2, 1,   50, 200, 128, false, Mask::None,            0.5},
    // Non-causal with 16 blocks of 128 query rows, 8 of emu.h's waves (2 SMs, a block each): the
    // forward's wide tile shape (WideForwardShape), with a last block of 1 row and of 72
    {"wide_gqa_padding_dropout",       2, 4, 2,  129, 150,  64, false, Mask::PaddingBool,     0.2},
    {"wide_bool2d_d128",               2, 4, 1,  200, 131, 128, false, Mask::Bool2d,          0.1},
    // Scores that rise along the keys: 4.8 (natural units) a step of 64 keys moves a row's
    // running max every other step (it may trail by 2^8), 12.8 every step; the causal case
    // runs clean steps, then masking ones
    {"rising_scores_long",             1, 1, 1,   64, 520,  64, false, Mask::None, 0.0, false, 1.0, false, 0.075},
    {"rising_scores_causal_d128",      1, 2, 2,  200, 200, 128, true,  Mask::None, 0.0, false, 1.0, false, 0.2},
    {"wide_rising_scores_dropout",     2, 4, 2,  129, 300,  64, false, Mask::None, 0.1, false, 1.0, false, 0.05},
};

int failures = 0;

void report(const char* what, const Comparison& c, double relative_tolerance, bool guard) {
  const double tolerance = relative_tolerance * std::max(1.0, c.max_reference);
  const bool pass = c.nonfinite_mismatches == 0 && c.max_error <= tolerance && guard;
  if (!pass) ++failures;
  printf("    %-9s %s  max_err=%.3e tol=%.2e max|ref|=%.3g nonfinite_mismatch=%ld%s\n", what, pass ? "PASS" : "FAIL",
         c.max_error, tolerance, c.max_reference, c.nonfinite_mismatches, guard ? "" : " GUARD-OVERWRITTEN");
}

// Each row's log-sum-exp of its masked, scaled scores, in float64: what the forward saves.
Tensor log_sum_exp_reference(const Case& cs, const Tensor& q64, const Tensor& k64, const Tensor& mask, double scale) {
  const std::vector<double> qv = q64.contiguous().to_vector<double>(), kv = k64.contiguous().to_vector<double>();
  std::vector<double> mv;
  if (mask.defined()) mv = mask.to(kFloat64).expand({cs.B, cs.Hq, cs.Sq, cs.Sk}).contiguous().to_vector<double>();
  const bool boolean_mask = cs.mask == Mask::PaddingBool || cs.mask == Mask::Bool2d;
  std::vector<double> lse(static_cast<size_t>(cs.B) * cs.Hq * cs.Sq);
  for (int b = 0; b < cs.B; ++b)
    for (int h = 0; h < cs.Hq; ++h)
      for (int i = 0; i < cs.Sq; ++i) {
        std::vector<double> s(static_cast<size_t>(cs.Sk));
        double m = -INFINITY;
        for (int j = 0; j < cs.Sk; ++j) {
          const size_t qi = ((static_cast<size_t>(b) * cs.Hq + h) * cs.Sq + i) * cs.D;
          const size_t ki = ((static_cast<size_t>(b) * cs.Hk + h / (cs.Hq / cs.Hk)) * cs.Sk + j) * cs.D;
          double dot = 0;
          for (int d = 0; d < cs.D; ++d) dot += qv[qi + d] * kv[ki + d];
          double score = dot * scale;
          if (cs.causal && j > i) score = -INFINITY;
          if (!mv.empty()) {
            const double mm = mv[((static_cast<size_t>(b) * cs.Hq + h) * cs.Sq + i) * cs.Sk + j];
            score = boolean_mask ? (mm != 0 ? score : -INFINITY) : score + mm;
          }
          s[j] = score;
          m = std::max(m, score);
        }
        double l = 0;
        if (m != -INFINITY)
          for (double x : s) l += std::exp(x - m);
        lse[(static_cast<size_t>(b) * cs.Hq + h) * cs.Sq + i] = l > 0 ? m + std::log(l) : INFINITY;
      }
  return from_vector(lse, {cs.B, cs.Hq, cs.Sq});
}

void run_case(const Case& cs, DType dtype) {
  manual_seed(42);  // a case's inputs do not depend on which cases ran before it
  const auto start = std::chrono::steady_clock::now();
  const long errors_before = emu::errors;
  const bool bf16 = dtype == kBFloat16;
  printf("case %s [%s] B=%d Hq=%d Hk=%d Sq=%d Sk=%d D=%d causal=%d mask=%d dropout=%.2f\n", cs.name,
         bf16 ? "bf16" : "f16", cs.B, cs.Hq, cs.Hk, cs.Sq, cs.Sk, cs.D, cs.causal, static_cast<int>(cs.mask),
         cs.dropout);
  auto make = [&](int H, int S) {
    if (cs.strided) return randn({cs.B, S, H, cs.D}).to(dtype).transpose(1, 2);
    if (cs.unaligned) return randn({cs.B, H, S, cs.D + 3}).to(dtype).narrow(3, 1, cs.D);
    return randn({cs.B, H, S, cs.D}).to(dtype);
  };
  Tensor q = make(cs.Hq, cs.Sq);
  if (cs.q_scale != 1.0) q = q.mul(cs.q_scale).to(dtype);
  Tensor k = make(cs.Hk, cs.Sk);
  const Tensor v = make(cs.Hk, cs.Sk);
  if (cs.rise != 0.0) {
    // Every column: q's plus 1, key j's plus rise j / sqrt(D), so that the scaled score of key
    // j gains rise j (spread over the columns, no element of K grows large).
    std::vector<float> q_add(static_cast<size_t>(cs.D), 1.0f), k_add(static_cast<size_t>(cs.Sk) * cs.D);
    const double per_key = cs.rise / std::sqrt(static_cast<double>(cs.D));
    for (int j = 0; j < cs.Sk; ++j)
      for (int c = 0; c < cs.D; ++c) k_add[static_cast<size_t>(j) * cs.D + c] = static_cast<float>(per_key * j);
    q = q.add(from_vector(q_add, {1, 1, 1, cs.D}).to(dtype)).to(dtype);
    k = k.add(from_vector(k_add, {1, 1, cs.Sk, cs.D}).to(dtype)).to(dtype);
  }
  const Tensor grad_out = randn({cs.B, cs.Hq, cs.Sq, cs.D}).to(dtype);

  cuda::AttentionSpec spec;
  spec.scale = 1.0 / std::sqrt(static_cast<double>(cs.D));
  spec.is_causal = cs.causal;
  spec.group = cs.Hq / cs.Hk;
  // The kernels and the reference draw the same dropout mask from generators in one state.
  Generator kernel_generator(777), reference_generator(777);
  if (cs.dropout > 0) {
    const Generator::Stream stream = kernel_generator.reserve();
    spec.drop = true;
    spec.dropout = dropout_bits::Mask{stream.seed, stream.offset, dropout_bits::threshold_of(cs.dropout)};
  }
  Tensor mask;
  std::optional<Tensor> reference_mask;
  if (cs.mask == Mask::PaddingBool) {
    std::vector<float> m(static_cast<size_t>(cs.B) * cs.Sk);
    for (int b = 0; b < cs.B; ++b)
      for (int j = 0; j < cs.Sk; ++j) m[static_cast<size_t>(b) * cs.Sk + j] = j < cs.Sk - 13 * b - 3 ? 1.0f : 0.0f;
    mask = from_vector(m, {cs.B, 1, 1, cs.Sk}).gt(0.5);
    reference_mask = mask;
  } else if (cs.mask == Mask::AdditiveWithInf) {
    std::vector<float> m = randn({cs.B, 1, cs.Sq, cs.Sk}).to_vector<float>();
    for (size_t i = 0; i < m.size(); ++i)
      if (i % 7 == 3) m[i] = -INFINITY;
    for (int b = 0; b < cs.B; ++b)
      for (int j = 0; j < cs.Sk; ++j) m[(static_cast<size_t>(b) * cs.Sq + 5) * cs.Sk + j] = -INFINITY;
    mask = from_vector(m, {cs.B, 1, cs.Sq, cs.Sk}).to(dtype);
    reference_mask = mask.to(kFloat64);
  } else if (cs.mask == Mask::Bool2d) {
    std::vector<float> m(static_cast<size_t>(cs.Sq) * cs.Sk);
    for (size_t i = 0; i < m.size(); ++i) m[i] = (i * 2654435761u >> 7) % 3 != 0 ? 1.0f : 0.0f;
    for (int j = 0; j < cs.Sk; ++j) m[static_cast<size_t>(2) * cs.Sk + j] = 0.0f;
    mask = from_vector(m, {cs.Sq, cs.Sk}).gt(0.5);
    reference_mask = mask;
  } else if (cs.mask == Mask::AdditiveFull) {
    mask = randn({cs.B, cs.Hq, cs.Sq, cs.Sk}).mul(2.0).to(dtype);
    reference_mask = mask.to(kFloat64);
  }
  if (mask.defined()) spec.mask = mask;

  // ---- the kernels, emulated ----
  Guarded out = guarded({cs.B, cs.Hq, cs.Sq, cs.D}, dtype), lse = guarded({cs.B, cs.Hq, cs.Sq}, kFloat32);
  // The backward in both forms: two passes (use_deterministic_algorithms on) into dq, dk, dv,
  // and one pass (dQ by atomic adds: the default) into dq1, dk1, dv1.
  Guarded dq = guarded({cs.B, cs.Hq, cs.Sq, cs.D}, dtype), dk = guarded({cs.B, cs.Hk, cs.Sk, cs.D}, dtype),
          dv = guarded({cs.B, cs.Hk, cs.Sk, cs.D}, dtype);
  Guarded dq1 = guarded({cs.B, cs.Hq, cs.Sq, cs.D}, dtype), dk1 = guarded({cs.B, cs.Hk, cs.Sk, cs.D}, dtype),
          dv1 = guarded({cs.B, cs.Hk, cs.Sk, cs.D}, dtype);
  try {
    cuda::flash_attention_forward(q, k, v, spec, out.view, lse.view);
    // The "wide_" cases are there for the forward's wide tile shape: that it ran (the kernel's
    // signature names its template arguments) and not, after a change to the choice or to emu.h's
    // occupancy, the narrow one.
    const bool wide_ran = emu::kernel_name.find("kTiles = 2") != std::string::npos;
    if (std::string(cs.name).rfind("wide_", 0) == 0 && !wide_ran) {
      ++failures;
      printf("    FAIL: the forward ran %s, not the wide tile shape\n", emu::kernel_name.c_str());
    }
    {
      DeterministicAlgorithmsGuard two_passes(true);
      cuda::flash_attention_backward(grad_out, q, k, v, out.view, lse.view, spec, dq.view, dk.view, dv.view);
    }
    DeterministicAlgorithmsGuard one_pass(false);
    cuda::flash_attention_backward(grad_out, q, k, v, out.view, lse.view, spec, dq1.view, dk1.view, dv1.view);
  } catch (const std::exception& e) {
    ++failures;
    printf("    FAIL: %s\n", e.what());
    return;
  }

  // ---- the reference: float64 from the same rounded inputs ----
  Tensor q64 = q.to(kFloat64).detach(), k64 = k.to(kFloat64).detach(), v64 = v.to(kFloat64).detach();
  q64.requires_grad_();
  k64.requires_grad_();
  v64.requires_grad_();
  Tensor o64 = scaled_dot_product_attention(q64, k64, v64, reference_mask, cs.dropout, cs.causal, std::nullopt,
                                            cs.Hq != cs.Hk, &reference_generator);
  o64.backward(grad_out.to(kFloat64));
  const Tensor lse64 = log_sum_exp_reference(cs, q64.detach(), k64.detach(), mask, spec.scale);

  // One rounding of a 16-bit output, and the 16-bit P and dS fed to the products, bound these.
  const double tolerance = bf16 ? 4e-2 : 5e-3;
  report("O", compare(out.view, o64.detach()), tolerance, guard_intact(out));
  report("LSE", compare(lse.view, lse64), 1e-4, guard_intact(lse));
  report("dQ", compare(dq.view, q64.grad()), tolerance, guard_intact(dq));
  report("dK", compare(dk.view, k64.grad()), tolerance, guard_intact(dk));
  report("dV", compare(dv.view, v64.grad()), tolerance, guard_intact(dv));
  report("dQ one pass", compare(dq1.view, q64.grad()), tolerance, guard_intact(dq1));
  report("dK one pass", compare(dk1.view, k64.grad()), tolerance, guard_intact(dk1));
  report("dV one pass", compare(dv1.view, v64.grad()), tolerance, guard_intact(dv1));
  const long emulator_errors = emu::errors - errors_before;
  if (emulator_errors) {
    ++failures;
    printf("    FAIL: %ld emulator errors (stderr)\n", emulator_errors);
  }
  printf("    (%.1f s)\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  fflush(stdout);
}

// The block order (block_order) must give every (head, tile rank) pair to exactly one block,
// for any head count and group size: the kernels' cases above have few heads, so their grids
// are one group, never a last group with fewer heads, which only the benchmarks' shapes reach.
void check_block_order() {
  long wrong = 0;
  for (int heads = 1; heads <= 20; ++heads)
    for (int tiles = 1; tiles <= 9; ++tiles)
      for (int per_group = 1; per_group <= heads; ++per_group) {
        std::vector<int> owners(static_cast<size_t>(heads) * tiles, 0);
        for (int block = 0; block < heads * tiles; ++block) {
          emu::block_idx = emu::Index{static_cast<unsigned>(block), 0, 0};
          const cuda::BlockOrder order = cuda::block_order(heads, tiles, per_group);
          if (order.head < 0 || order.head >= heads || order.rank < 0 || order.rank >= tiles)
            ++wrong;
          else
            ++owners[static_cast<size_t>(order.head) * tiles + order.rank];
        }
        for (int n : owners) wrong += n != 1;
      }
  printf("block order: every (head, tile) taken once over 1-20 heads, 1-9 tiles, every group size: %s\n",
         wrong ? "FAIL" : "PASS");
  if (wrong) ++failures;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<const Case*> selected;
  for (int a = 1; a < argc; ++a) {
    const std::string name = argv[a];
    if (name == "--list") {
      for (const Case& c : kCases) printf("%s\n", c.name);
      return 0;
    }
    const Case* found = nullptr;
    for (const Case& c : kCases)
      if (name == c.name) found = &c;
    if (!found) {
      fprintf(stderr, "driver: no case %s (driver --list names them)\n", name.c_str());
      return 2;
    }
    selected.push_back(found);
  }
  if (selected.empty())
    for (const Case& c : kCases) selected.push_back(&c);

  setvbuf(stdout, nullptr, _IOLBF, 0);  // the lines so far survive an abort (a deadlock)
  emu::before_launch = readable_of_params;
  const auto start = std::chrono::steady_clock::now();
  check_block_order();
  for (const Case* c : selected) {
    run_case(*c, kBFloat16);
    run_case(*c, kFloat16);
  }
  printf("%zu cases x 2 dtypes: %d failures, %ld emulator errors (%.1f s)\n", selected.size(), failures, emu::errors,
         std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return failures || emu::errors ? 1 : 0;
}
