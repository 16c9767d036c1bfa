// scaled_dot_product_attention on tensor cores: FlashAttention-2's algorithm (ops/attention.cpp
// explains it on the CPU, with the same names), never storing a [Sq, Sk] score matrix.
//
// The forward, a small preprocessing kernel, and the backward in one of two forms:
//
//   forward   a block of 4 warps owns 64 query rows of one head (128 where the grid is large
//             and not causal: WideForwardShape) and walks its keys 64 at a time: S = Q K^T,
//             the online softmax in registers, O += P V. Writes O and L, the rows' log-sum-exp
//             (float32). Each warp owns 16 rows (the rows of one mma tile, cuda/mma.cuh). A
//             row's running max may trail its true max by up to 2^8 (kMaxLagLog2), so that O
//             is rescaled only at the few steps where a row's max jumps.
//   delta     D_i = dO_i . O_i, a warp per query row (the backward's one preprocessing pass).
//
// The backward, in one pass (the default, FlashAttention-2's):
//   grad_kvq  a block of 8 warps owns 128 keys of one key/value head and walks the queries of
//             every query head that reads them (grouped-query attention), 64 at a time,
//             computing the scores transposed so that keys are its rows:
//               S^T = K Q^T, P^T = exp(S^T - L), dP^T = V dO^T, dS^T = P^T (Z dP^T - D)
//               dV += (Z P)^T dO,  dK += scale dS^T Q,  dQ += scale dS K
//             dQ sums over keys, which other blocks own too: each step adds its share into a
//             float32 buffer by atomic adds (cleared by delta, converted to T after). 5 products.
// or, under use_deterministic_algorithms, in two passes, each summing in one block's
// registers in a fixed order (the same bits every run):
//   grad_kv   as grad_kvq without dQ: a block of 4 warps owns 64 keys, 32 queries a step.
//   grad_q    a block owns 64 query rows and walks their keys: S, P, dP = dO V^T, dS, then
//             dQ += scale dS K. It recomputes S and dP: 7 products in all.
// Why the transposed scores: the key blocks' products sum over queries (dV = P^T dO), so P^T
// is the A operand, read with keys as rows.
//
// In the forward and the two passes, each warp's product keeps its output in registers and
// feeds it to the next as an A fragment (mma::a_from_c): neither P nor dS touches shared
// memory. grad_kvq splits each product over its 8 warps, 32 rows a warp (two mma tiles), so
// that each fragment read from shared memory feeds twice the products; P^T and dS^T pass
// through shared memory between the products (why, and what it gained: docs/perf-notes.md).
//
// The tiles a block walks are copied by cp.async into one of two shared-memory stages while
// the block computes on the other. Scores are kept in the log2 domain, (scale * q.k + mask) *
// log2(e), so that each exponential is one exp2; in the forward's clean steps (no masking) the
// dot products stay as they are and the factor goes into the exponent's multiply-add.
//
// Masks: positions past the ends of Sq and Sk, is_causal (key j > query i masked out) and the
// attn_mask (bool, or additive of q's dtype, read at its broadcast strides) are applied to a
// tile only when the tile has any of them (a test per tile, the same for all of a warp's
// lanes); inside a clean tile a score is just scaled. The forward walks a block's clean steps
// in a loop of their own, then the steps that may mask (the causal diagonal and the keys' end
// come last), so that the clean loop carries none of the masking code.
//
// Dropout keys score (b, h, i, j) by its index in the row-major [B, Hq, Sq, Sk] order, as
// softmax_dropout keys its input (kernels/dropout.h): the mask is regenerated in the backward,
// never stored. A Philox call decides 8 scores, which lie in several lanes; the lanes split the
// calls and exchange the bits by shuffles (keep_bits_query_rows, keep_bits_key_rows).
//
// Under is_causal the tiles' work differs (the last query tile sees every key, the first its
// own): the blocks are numbered heaviest first, head group by head group (block_order), so
// that the grid ends on light blocks, not on a few heavy ones running alone.
//
// Template parameters are the element type (float16, bfloat16) and the head dim (64, 128):
// 4 instantiations of each kernel, the forward's twice (its two tile shapes, ForwardShape and
// WideForwardShape; GradKvShape and OnePassShape are one each). Only the experiments under
// bench/experiments/ vary the shapes further. Everything else is a runtime value, so the
// options do not multiply the build.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>

#include <minigrad/core/determinism.h>
#include <minigrad/core/shape.h>
#include <minigrad/cuda/convert.cuh>
#include <minigrad/cuda/flash_attention.h>
#include <minigrad/cuda/launch.cuh>
#include <minigrad/cuda/mma.cuh>
#include <minigrad/cuda/runtime.h>
#include <minigrad/kernels/dropout.h>

namespace minigrad {
namespace cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kWarpRows = 16;                   // the rows of an mma tile: each warp owns 16
constexpr int kBlockRows = kWarps * kWarpRows;  // 64 queries (forward, grad_q) or keys (grad_kv) a block owns
constexpr int kKeysPerStep = 64;                // keys a forward or grad_q step scores
constexpr int kQueriesPerStep = 32;             // queries a grad_kv step scores (half: its registers hold dK and dV)
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

enum class MaskKind : int { None, Bool, Additive };

// A [B, H, S, D] operand as 16-bit elements: rows of D contiguous elements, any other strides.
struct HeadRows {
  const uint16_t* data;
  int64_t batch_stride, head_stride, row_stride;
  __device__ const uint16_t* head(int b, int h) const { return data + b * batch_stride + h * head_stride; }
};

// Everything the kernels read, by value.
struct Params {
  HeadRows q, k, v, grad_out;  // grad_out: the backward's dO
  uint16_t* out;               // forward: O, contiguous [B, Hq, Sq, D]
  const uint16_t* saved_out;   // backward: O, contiguous
  float* log_sum_exp;          // [B, Hq, Sq], natural log (+inf: every key masked out)
  float* delta;                // [B, Hq, Sq]: dO_i . O_i
  float* grad_q_sum;           // the one-pass backward's dQ in float32, [B, Hq, Sq, D]; else null
  uint16_t *grad_q, *grad_k, *grad_v;  // contiguous, the shapes of q, k, v
  int batch, q_heads, group, q_len, k_len, head_dim;
  int query_heads_per_group, kv_heads_per_group;  // the block order's head groups (block_order)
  float scale, scale_log2;
  const void* mask;
  MaskKind mask_kind;
  int64_t mask_strides[4];  // [B, Hq, Sq, Sk], 0 where broadcast
  bool is_causal;
  bool drop;
  dropout_bits::Mask dropout;
  float keep_scale;

  __host__ __device__ int kv_heads() const { return q_heads / group; }
  // Query row i of head bh = b * Hq + h in [B, Hq, Sq] (O, L, D, dQ).
  __device__ int64_t query_row(int bh, int i) const { return static_cast<int64_t>(bh) * q_len + i; }
  __device__ uint64_t score_index(int b, int h, int i, int j) const {
    return static_cast<uint64_t>((static_cast<int64_t>(b) * q_heads + h) * q_len + i) * k_len + j;
  }
  // What dropout multiplies a probability by: 1 / (1 - p) where kept, 0 where dropped.
  __device__ float keep_factor(bool kept) const { return kept ? keep_scale : 0.0f; }
  // The same for element e (0..3) of an n-block whose keep decisions are the bits of kept_bits.
  __device__ float keep_factor(uint32_t kept_bits, int e) const { return keep_factor(((kept_bits >> e) & 1u) != 0); }
};

__host__ __device__ constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }

template <typename T>
__device__ __forceinline__ float to_float(uint16_t bits) {
  T x;
  x.bits = bits;
  return half_to_float(x);
}

// 2^x by the hardware's approximation alone (one MUFU.EX2, 2 ulp), a result below 2^-126
// flushed to zero. exp2f keeps such results, at the price of a test and two multiplies around
// every exponential; a probability that small adds nothing to a sum of ones.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// m where finite, else 0: the reference the exponents are taken against while every key so
// far is masked out (m = -inf), so that exp2(-inf - 0) is 0 and not NaN.
__device__ __forceinline__ float finite_or_zero(float m) { return m == -INFINITY ? 0.0f : m; }

__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// Where element e (0..3) of n-block nb of a warp's C tile sits: row (0..15) and column.
__device__ __forceinline__ int c_row(int e) { return threadIdx.x % 32 / 4 + e / 2 * 8; }
__device__ __forceinline__ int c_col(int nb, int e) { return nb * 8 + threadIdx.x % 4 * 2 + e % 2; }

// The score of query i and key j of head h in the log2 domain, (scale * dot + mask) * log2(e),
// or -inf where masked out: past the ends, above the causal diagonal, or by attn_mask.
template <typename T>
__device__ float masked_score(const Params& p, int b, int h, int i, int j, float dot) {
  if (i >= p.q_len || j >= p.k_len || (p.is_causal && j > i)) return -INFINITY;
  float s = dot * p.scale_log2;
  if (p.mask_kind != MaskKind::None) {
    const int64_t at = b * p.mask_strides[0] + h * p.mask_strides[1] + i * p.mask_strides[2] + j * p.mask_strides[3];
    if (p.mask_kind == MaskKind::Bool) {
      if (!static_cast<const bool*>(p.mask)[at]) return -INFINITY;
    } else {
      s += to_float<T>(static_cast<const uint16_t*>(p.mask)[at]) * kLog2e;
    }
  }
  return s;
}

// A warp's C tile of dot products c, rows row0 + c_row(e) and columns col0 + c_col(nb, e)
// (queries x keys, or with kKeysAsRows keys x queries), turned into scores in place. The one
// branch is around the loops: written per element, it stayed a branch around every score.
template <typename T, bool kKeysAsRows, int kN>
__device__ void to_scores(const Params& p, bool masking, int b, int h, int row0, int col0, float (&c)[kN / 8][4]) {
  if (!masking) {
#pragma unroll
    for (int nb = 0; nb < kN / 8; ++nb)
#pragma unroll
      for (int e = 0; e < 4; ++e) c[nb][e] *= p.scale_log2;
    return;
  }
#pragma unroll
  for (int nb = 0; nb < kN / 8; ++nb)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = row0 + c_row(e), col = col0 + c_col(nb, e);
      c[nb][e] = kKeysAsRows ? masked_score<T>(p, b, h, col, row, c[nb][e]) : masked_score<T>(p, b, h, row, col, c[nb][e]);
    }
}

// Whether the tile of queries [i0, i0 + rows) and keys [j0, j0 + cols) needs masked_score: it
// reaches past an end, crosses the causal diagonal, or there is a mask.
__device__ bool tile_needs_masking(const Params& p, int i0, int rows, int j0, int cols) {
  return p.mask_kind != MaskKind::None || i0 + rows > p.q_len || j0 + cols > p.k_len ||
         (p.is_causal && j0 + cols - 1 > i0);
}

// Calls f(std::true_type{}) when scores are dropped out, else f(std::false_type{}), so that a
// step's loop is compiled twice and the test sits once around it, not at every score.
template <typename F>
__device__ void with_dropout(const Params& p, F&& f) {
  if (p.drop)
    f(std::true_type{});
  else
    f(std::false_type{});
}

// grad_kv's element loop in three forms, chosen once per step: no dropout; dropout with the
// groups of 8 shared out by shuffles (Sk a multiple of 8, keep_bits_key_rows); dropout drawn a
// score at a time (groups straddle the C tile's n-blocks). f gets the form as a constant.
enum class KeyRowsDropout { None, SharedGroups, PerScore };
template <KeyRowsDropout kForm>
using KeyRowsDropoutForm = std::integral_constant<KeyRowsDropout, kForm>;

template <typename F>
__device__ void with_key_rows_dropout(const Params& p, F&& f) {
  if (!p.drop)
    f(KeyRowsDropoutForm<KeyRowsDropout::None>{});
  else if (p.k_len % 8 == 0)
    f(KeyRowsDropoutForm<KeyRowsDropout::SharedGroups>{});
  else
    f(KeyRowsDropoutForm<KeyRowsDropout::PerScore>{});
}

// ---- dropout: one Philox call per group of 8 scores ----
//
// A Philox call decides 8 consecutive scores of a row (kernels/dropout.h). When Sk is a
// multiple of 8, every group starts at a multiple of 8 keys, i.e. at one of a C tile's
// n-blocks, and its 8 scores lie in several lanes: in a quad's 4 lanes, 2 each, with queries
// as rows (forward, grad_q); in 8 lanes, 1 each, with keys as rows (grad_kv). Drawn by every
// lane that needs it, a group took 4 or 8 calls. Here the lanes that share groups split the
// calls among them and exchange the bits by shuffles: one call a group. When Sk is not a
// multiple of 8 (groups straddle n-blocks, at offsets that differ from row to row), each lane
// draws what it needs. The result is keep[nb]: bit e set iff the lane's score c[nb][e] of its
// C tile is kept. Every lane of the warp must call these (they shuffle).

// Bits 0 and 1: whether scores index and index + 1 are kept (their groups may differ).
__device__ uint32_t pair_keep_bits(const Params& p, uint64_t index) {
  const uint32_t bits = p.dropout.keep_bits(index / dropout_bits::kElementsPerBlock);
  const uint32_t at = index % dropout_bits::kElementsPerBlock;
  const uint32_t second =
      at + 1 < dropout_bits::kElementsPerBlock ? (bits >> (at + 1)) & 1u : p.dropout.keep(index + 1);
  return ((bits >> at) & 1u) | second << 1;
}

// Queries as rows (forward, grad_q): the lane's scores of rows row0 + c_row(e), keys col0 +
// c_col(nb, e), of query head h. Lane m of a quad (m = lane % 4) draws the groups of n-blocks
// m, m + 4, ... of both its rows, and takes bits 2m, 2m + 1 of every group the quad drew.
template <int kN>
__device__ void keep_bits_query_rows(const Params& p, int b, int h, int row0, int col0, uint32_t (&keep)[kN / 8]) {
  static_assert(kN % 32 == 0, "n-blocks shared out 4 ways");
  const int lane = threadIdx.x % 32, m = lane % 4;
  if (p.k_len % 8 == 0) {
    constexpr int kDrawn = kN / 32;  // n-blocks a lane draws (two groups each: its two rows)
    uint32_t drawn[(kDrawn + 1) / 2] = {};  // byte 2k + half of the pair's word: n-block 4k + m, row half
#pragma unroll
    for (int k = 0; k < kDrawn; ++k)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const uint64_t first = p.score_index(b, h, row0 + c_row(2 * half), col0 + (4 * k + m) * 8);
        drawn[k / 2] |= p.dropout.keep_bits(first / dropout_bits::kElementsPerBlock) << (8 * (2 * (k % 2) + half));
      }
#pragma unroll
    for (int w = 0; w < (kDrawn + 1) / 2; ++w)
#pragma unroll
      for (int source = 0; source < 4; ++source) {
        const uint32_t word = __shfl_sync(0xffffffffu, drawn[w], (lane & ~3) | source);
#pragma unroll
        for (int k = 2 * w; k < 2 * w + 2 && k < kDrawn; ++k) {
          const int nb = 4 * k + source;
          keep[nb] = 0;
#pragma unroll
          for (int half = 0; half < 2; ++half)
            keep[nb] |= ((word >> (8 * (2 * (k % 2) + half) + 2 * m)) & 3u) << (2 * half);
        }
      }
  } else {
#pragma unroll
    for (int nb = 0; nb < kN / 8; ++nb) {
      keep[nb] = 0;
#pragma unroll
      for (int half = 0; half < 2; ++half)
        keep[nb] |= pair_keep_bits(p, p.score_index(b, h, row0 + c_row(2 * half), col0 + c_col(nb, 0))) << (2 * half);
    }
  }
}

// Keys as rows (grad_kv), Sk a multiple of 8: the lane's scores of keys key0 + c_row(e),
// queries query0 + c_col(nb, e), of query head h, over a step's 32 queries. Lane (m, g) =
// (lane % 4, lane / 4) draws the groups of query c_col(g / 2, g % 2) over keys key0 .. key0 +
// 15 (two groups), and takes bit g (its key) of every group the 8 lanes with its m drew. (With
// Sk not a multiple of 8, grad_kv draws a score at a time in its element loop.)
__device__ void keep_bits_key_rows(const Params& p, int b, int h, int key0, int query0,
                                   uint32_t (&keep)[kQueriesPerStep / 8]) {
  static_assert(kQueriesPerStep == 32, "8 lanes a quad position, two queries an n-block");
  const int lane = threadIdx.x % 32, m = lane % 4, g = lane / 4;
  const int i = query0 + g / 2 * 8 + 2 * m + g % 2;
  const uint64_t first = p.score_index(b, h, i, key0) / dropout_bits::kElementsPerBlock;
  const uint32_t drawn = p.dropout.keep_bits(first) | p.dropout.keep_bits(first + 1) << 8;
#pragma unroll
  for (int nb = 0; nb < kQueriesPerStep / 8; ++nb) {
    keep[nb] = 0;
#pragma unroll
    for (int c = 0; c < 2; ++c) {  // query c_col(nb, c): drawn by the lane with g = 2 nb + c
      const uint32_t word = __shfl_sync(0xffffffffu, drawn, (2 * nb + c) * 4 + m);
      keep[nb] |= ((word >> g) & 1u) << c | ((word >> (8 + g)) & 1u) << (2 + c);
    }
  }
}

// Rows row0 .. row0 + kRows - 1 of one head (rows `row_stride` apart) into a swizzled tile by
// cp.async, zeros for rows at or past `end`, by the kBlockThreads threads of the block. Thread
// t copies chunk t % (kD / 8) of row t / (kD / 8) and of every kRowsPerPass-th row after it:
// its source advances by a fixed stride and its destination's swizzle never changes
// (kRowsPerPass is a multiple of 8). A whole tile, every tile but a head's last, tests no
// rows: a copy is a 64-bit add and the cp.async.
template <int kD, int kRows, int kBlockThreads = kThreads>
__device__ void load_rows_async(uint16_t* tile, const uint16_t* head, int64_t row_stride, int row0, int end) {
  constexpr int kChunksPerRow = kD / mma::kChunkElements;
  constexpr int kRowsPerPass = kBlockThreads / kChunksPerRow;
  constexpr int kPasses = kRows / kRowsPerPass;
  static_assert(kBlockThreads % kChunksPerRow == 0 && kRowsPerPass % 8 == 0 && kRows % kRowsPerPass == 0,
                "the block's threads copy whole rows, 8 rows apart");
  const int r = threadIdx.x / kChunksPerRow, col = threadIdx.x % kChunksPerRow * mma::kChunkElements;
  uint16_t* const dst = tile + mma::swizzled<kD>(r, col);
  const uint16_t* src = head + (row0 + r) * row_stride + col;
  const int64_t pass_stride = kRowsPerPass * row_stride;
  if (row0 + kRows <= end) {
#pragma unroll
    for (int pass = 0; pass < kPasses; ++pass, src += pass_stride)
      mma::copy_chunk_async(dst + pass * kRowsPerPass * kD, src, true);
  } else {
#pragma unroll
    for (int pass = 0; pass < kPasses; ++pass, src += pass_stride) {
      const bool valid = row0 + r + pass * kRowsPerPass < end;
      mma::copy_chunk_async(dst + pass * kRowsPerPass * kD, valid ? src : head, valid);
    }
  }
}

// ---- the warp's products ----

// c += A B over kK, for a warp's kTiles mma tiles of rows and kN columns: load_a(t, k0, a)
// gives tile t's A fragment at k0, load_b(k0, n0, b0, b1) the B fragments of columns n0 ..
// n0 + 15. Each B fragment feeds kTiles products.
template <typename T, int kTiles, int kN, int kK, typename LoadA, typename LoadB>
__device__ void warp_product(LoadA&& load_a, LoadB&& load_b, float (&c)[kTiles][kN / 8][4]) {
#pragma unroll
  for (int k0 = 0; k0 < kK; k0 += 16) {
    mma::FragA a[kTiles];
#pragma unroll
    for (int t = 0; t < kTiles; ++t) load_a(t, k0, a[t]);
#pragma unroll
    for (int n0 = 0; n0 < kN; n0 += 16) {
      mma::FragB b0, b1;
      load_b(k0, n0, b0, b1);
#pragma unroll
      for (int t = 0; t < kTiles; ++t) {
        mma::mma_16x8x16<T>(c[t][n0 / 8], a[t], b0);
        mma::mma_16x8x16<T>(c[t][n0 / 8 + 1], a[t], b1);
      }
    }
  }
}

// A warp's C fragments of one tile, as warp_product's array of tiles (kTiles = 1): the same
// floats, for the products of grad_kv and grad_q, whose warps own one tile of rows.
template <int kBlocks>
using OneTile = float[1][kBlocks][4];
template <int kBlocks>
__device__ OneTile<kBlocks>& as_one_tile(float (&c)[kBlocks][4]) {
  return reinterpret_cast<OneTile<kBlocks>&>(c);
}

// c = A B^T for the warp's 16 rows a_row0.. of tile a and all kN rows of tile b, both kD
// columns wide: C [16 x kN] (S = Q K^T, dP = dO V^T, and transposed in grad_kv).
template <typename T, int kD, int kN>
__device__ void rows_times_rows(const uint16_t* a, int a_row0, const uint16_t* b, float (&c)[kN / 8][4]) {
  for (auto& block : c)
    for (float& x : block) x = 0.0f;
  warp_product<T, 1, kN, kD>(
      [&](int, int k0, mma::FragA& fa) { mma::load_a<kD>(a, a_row0, k0, fa); },
      [&](int k0, int n0, mma::FragB& b0, mma::FragB& b1) { mma::load_b_from_rows<kD>(b, n0, k0, b0, b1); },
      as_one_tile(c));
}

// c += A B with A the warp's C tile x [16 x kK] (rounded to T) and B the kK rows of tile b,
// kD columns wide: C [16 x kD] (dQ += dS K, dV += P^T dO, dK += dS^T Q).
template <typename T, int kK, int kD>
__device__ void tile_times_columns(const float (&x)[kK / 8][4], const uint16_t* b, float (&c)[kD / 8][4]) {
  warp_product<T, 1, kD, kK>(
      [&](int, int k0, mma::FragA& fa) { mma::a_from_c<T>(x[k0 / 8], x[k0 / 8 + 1], fa); },
      [&](int k0, int n0, mma::FragB& b0, mma::FragB& b1) { mma::load_b_from_columns<kD>(b, k0, n0, b0, b1); },
      as_one_tile(c));
}

// The lane's share of row c_row(2 * half) of the warp's C tile c, times factor, as T into
// `row` (kD contiguous elements).
template <typename T, int kD>
__device__ void store_row(const float (&c)[kD / 8][4], int half, float factor, uint16_t* row) {
#pragma unroll
  for (int nb = 0; nb < kD / 8; ++nb)
    *reinterpret_cast<uint32_t*>(row + c_col(nb, 0)) =
        mma::pack<T>(c[nb][2 * half] * factor, c[nb][2 * half + 1] * factor);
}

// ---- the order of the blocks ----
//
// Under is_causal a block's work grows with its tile's rank: the last query tile sees every
// key, the first only its own, and the other way round for key tiles. The GPU starts blocks in
// blockIdx order as earlier ones finish. Numbered head by head, the grid would end on the last
// heads' heavy tiles, running on alone while the SMs empty: a tail of up to one heavy block.
// Numbered heaviest first over all heads, the last blocks are the lightest. But the blocks that
// run at one time must share what they stream (K and V; Q and dO for key tiles) through L2,
// so the heads go in groups whose streamed rows fit a share of it (heads_per_group, set on the
// host), and within a group the blocks go rank by rank: every head's heaviest tile, then every
// head's next. Without is_causal the tiles weigh the same, and a group is one head.
struct BlockOrder {
  int head;  // the (batch, head) pair: b * heads + h
  int rank;  // 0: the tile with the most work
};
__device__ BlockOrder block_order(int heads, int tiles, int heads_per_group) {
  const int per_group = heads_per_group * tiles;
  const int group = blockIdx.x / per_group, in_group = blockIdx.x % per_group;
  const int first = group * heads_per_group, heads_here = min(heads_per_group, heads - first);
  return {first + in_group % heads_here, in_group / heads_here};
}

// What a forward or grad_q block owns: kRows query rows i0 .. i0 + kRows - 1 of head h (bh =
// b * Hq + h), and the keys they see, taken kKeys at a time. Rank 0 is the last tile: under
// is_causal, the rows that see the most keys.
template <int kRows, int kKeys>
struct QueryBlock {
  int bh, b, h, kh, i0, key_end, steps;
  __device__ explicit QueryBlock(const Params& p) {
    const int tiles = ceil_div(p.q_len, kRows);
    const BlockOrder order = block_order(p.batch * p.q_heads, tiles, p.query_heads_per_group);
    bh = order.head;
    i0 = (tiles - 1 - order.rank) * kRows;
    b = bh / p.q_heads;
    h = bh % p.q_heads;
    kh = h / p.group;
    // Under is_causal the block's last row, i0 + kRows - 1, sees keys 0 .. i0 + kRows - 1.
    key_end = p.is_causal ? min(p.k_len, i0 + kRows) : p.k_len;
    steps = ceil_div(key_end, kKeys);
  }
  // Step `step`'s keys into `keys`, its values right after them, by cp.async.
  template <int kD>
  __device__ void load_keys(const Params& p, uint16_t* keys, int step) const {
    const int j0 = step * kKeys;
    load_rows_async<kD, kKeys>(keys, p.k.head(b, kh), p.k.row_stride, j0, key_end);
    load_rows_async<kD, kKeys>(keys + kKeys * kD, p.v.head(b, kh), p.v.row_stride, j0, key_end);
  }
};

// ---- forward ----

// The forward's tile shapes for head dim kD: each warp owns kTiles mma tiles of 16 query rows
// (a block 64 * kTiles rows), and a step scores kKeys keys. More rows a warp means each K and
// V fragment read from shared memory feeds more products; the price is registers (the warp's
// O alone is kTiles * kD / 2 floats a lane) and blocks twice as large. Of 1 x 64, 1 x 128,
// 2 x 32 and 2 x 64 (bench/experiments/flash_forward_shapes.cu, docs/perf-notes.md), 1 x 64 is
// the best under is_causal at GPT-2's size (2 x 64 takes 30% longer there: its larger blocks
// split the causal imbalance into larger pieces) and as good at long causal heads; 2 x 64
// (WideForwardShape) is about 6% faster on non-causal heads whose grid of 128-row blocks fills
// the GPU several times over (kWideForwardWaves; flash_attention_forward chooses).
template <int kD>
struct ForwardShape {
  static constexpr int kTiles = 1;
  static constexpr int kKeys = 64;
};
template <int kD>
struct WideForwardShape {
  static constexpr int kTiles = 2;
  static constexpr int kKeys = 64;
};

// Waves of WideForwardShape's blocks a non-causal forward needs to take it: the shapes were
// measured at 7.8 waves (2048 blocks on an H100), not below; 4 leaves (4, 16, 1024, 128), 1.9
// waves, to the narrow shape.
constexpr int64_t kWideForwardWaves = 4;

// How far (in log2 units) the forward's running max may trail a row's true max: its
// probabilities, exp2(score - m), then reach 2^8 = 256, far inside the range of float16 and
// bfloat16 (P is rounded to T for P V) and of the float32 sums; each is still rounded to T with
// T's relative precision. In exchange a step rescales O only when some row of the warp meets a
// score 256 times its m's probability: after a head's first steps, hardly ever.
constexpr float kMaxLagLog2 = 8.0f;

template <int kD, int kTiles, int kKeys>
constexpr int forward_shared_bytes() {
  return (kBlockRows * kTiles + 2 * 2 * kKeys) * kD * 2;  // Q, then two stages of K and V
}

// How many of a query block's first steps need no masking: a step's tile only starts to need
// it as its keys advance (keys past the end, the causal diagonal), unless there is an
// attn_mask, or a scale <= 0 (the clean steps take the scale into the exponent, which a
// nonpositive one would not allow): then none. Rows past the queries' end do not count: their
// scores are computed from zeros and their outputs never stored, so that a row's steps, and
// its bits, are the same in both tile shapes.
__device__ int clean_forward_steps(const Params& p, int i0, int kKeys, int steps) {
  if (p.mask_kind != MaskKind::None || !(p.scale_log2 > 0.0f)) return 0;
  // Step n is clean while its last key, n kKeys + kKeys - 1, is below k_len and, under
  // is_causal, at most the block's first row i0.
  const int last_key = p.is_causal ? min(p.k_len - 1, i0) : p.k_len - 1;
  return min(steps, (last_key + 1) / kKeys);
}

template <typename T, int kD, int kTiles = ForwardShape<kD>::kTiles, int kKeys = ForwardShape<kD>::kKeys>
__global__ void __launch_bounds__(kThreads) attention_forward_kernel(const Params p) {
  constexpr int kRows = kBlockRows * kTiles;
  // Q's A fragments stay in registers while they fit (64 registers a lane at most); else they
  // are read from shared memory again at every step.
  constexpr bool kQInRegisters = kTiles * kD <= 128;
  extern __shared__ __align__(128) uint16_t shared[];
  uint16_t* const q_tile = shared;
  auto stage = [&](int step) { return shared + (kRows + step % 2 * 2 * kKeys) * kD; };

  const QueryBlock<kRows, kKeys> block(p);
  const int bh = block.bh, b = block.b, h = block.h, i0 = block.i0, steps = block.steps;
  const int warp_row0 = threadIdx.x / 32 * kWarpRows * kTiles;  // tile t: rows warp_row0 + 16 t ..

  load_rows_async<kD, kRows>(q_tile, p.q.head(b, h), p.q.row_stride, i0, p.q_len);
  if (steps > 0) block.template load_keys<kD>(p, stage(0), 0);
  mma::commit_copies();

  mma::FragA q_fragments[kQInRegisters ? kTiles : 1][kQInRegisters ? kD / 16 : 1];
  float m[kTiles][2], l[kTiles][2];  // each tile's running max of rows c_row(0) and c_row(2),
                                     // and this lane's share of their sums of exp(s - m)
  for (int t = 0; t < kTiles; ++t)
    for (int half = 0; half < 2; ++half) m[t][half] = -INFINITY, l[t][half] = 0.0f;
  float o[kTiles][kD / 8][4] = {};
  // One step: the keys j0 .. j0 + kKeys - 1. kMasking: whether the step's tile may need
  // masked_score (tile_needs_masking); without it the scores stay dot products and the scale
  // goes into each exponential's multiply-add.
  auto step_body = [&](int step, auto masking) {
    constexpr bool kMasking = decltype(masking)::value;
    if (step + 1 < steps) block.template load_keys<kD>(p, stage(step + 1), step + 1);
    mma::commit_copies();
    mma::wait_copies<1>();  // this step's keys (and at step 0 the queries) have landed
    __syncthreads();
    if constexpr (kQInRegisters) {
      if (step == 0) {
#pragma unroll
        for (int t = 0; t < kTiles; ++t)
#pragma unroll
          for (int k0 = 0; k0 < kD; k0 += 16)
            mma::load_a<kD>(q_tile, warp_row0 + t * kWarpRows, k0, q_fragments[t][k0 / 16]);
      }
    }
    const uint16_t* keys = stage(step);
    const uint16_t* values = keys + kKeys * kD;
    const int j0 = step * kKeys;

    // S = Q K^T: each K fragment serves the warp's kTiles tiles.
    float s[kTiles][kKeys / 8][4] = {};
    warp_product<T, kTiles, kKeys, kD>(
        [&](int t, int k0, mma::FragA& a) {
          if constexpr (kQInRegisters)
            for (int r = 0; r < 4; ++r) a[r] = q_fragments[t][k0 / 16][r];
          else
            mma::load_a<kD>(q_tile, warp_row0 + t * kWarpRows, k0, a);
        },
        [&](int k0, int n0, mma::FragB& b0, mma::FragB& b1) { mma::load_b_from_rows<kD>(keys, n0, k0, b0, b1); }, s);
    // Masking steps turn the dot products into log2-domain scores (to_scores); clean ones keep
    // them, and the scale moves into each exponential's multiply-add (and the max: the factor is
    // positive there).
    const float factor = kMasking ? 1.0f : p.scale_log2;

#pragma unroll
    for (int t = 0; t < kTiles; ++t) {
      if constexpr (kMasking)
        to_scores<T, false, kKeys>(p, tile_needs_masking(p, i0, kRows, j0, kKeys), b, h, i0 + warp_row0 + t * kWarpRows,
                                   j0, s[t]);
      // The online softmax, for the lane's two rows (elements 0, 1 and 2, 3 of each n-block).
      // The running max m moves only when the tile's max passes it by more than kMaxLagLog2,
      // so most steps rescale nothing: the warp multiplies O and the sums by the correction
      // only when the m of one of its rows moved.
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        float tile_max = -INFINITY;
#pragma unroll
        for (int nb = 0; nb < kKeys / 8; ++nb)
          tile_max = fmaxf(tile_max, fmaxf(s[t][nb][2 * half], s[t][nb][2 * half + 1]));
        tile_max = quad_max(tile_max) * factor;
        const float m_before = m[t][half];
        const bool moves = tile_max > m_before + kMaxLagLog2;  // m = -inf: any finite max moves it
        if (moves) m[t][half] = tile_max;
        const float m_ref = finite_or_zero(m[t][half]);
        if (__any_sync(0xffffffffu, moves)) {
          const float correction = exp2_approx(m_before - m_ref);  // 1 where m stayed, 0 where it was -inf
          l[t][half] *= correction;
#pragma unroll
          for (int nd = 0; nd < kD / 8; ++nd) {
            o[t][nd][2 * half] *= correction;
            o[t][nd][2 * half + 1] *= correction;
          }
        }
#pragma unroll
        for (int nb = 0; nb < kKeys / 8; ++nb)
#pragma unroll
          for (int e = 2 * half; e < 2 * half + 2; ++e) {
            s[t][nb][e] = exp2_approx(fmaf(s[t][nb][e], factor, -m_ref));
            l[t][half] += s[t][nb][e];  // the denominator sums every probability, dropped or not
          }
      }
      if (p.drop) {
        // Dropped probabilities are zeroed here; the kept ones' 1 / (1 - p) is applied to O at
        // the end (a factor here could take P past float16's range).
        uint32_t kept[kKeys / 8];
        keep_bits_query_rows<kKeys>(p, b, h, i0 + warp_row0 + t * kWarpRows, j0, kept);
#pragma unroll
        for (int nb = 0; nb < kKeys / 8; ++nb)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            if (((kept[nb] >> e) & 1u) == 0) s[t][nb][e] = 0.0f;
      }
    }

    // O += P V: P straight from the C fragments; each V fragment serves the kTiles tiles.
    warp_product<T, kTiles, kD, kKeys>(
        [&](int t, int k0, mma::FragA& a) { mma::a_from_c<T>(s[t][k0 / 8], s[t][k0 / 8 + 1], a); },
        [&](int k0, int n0, mma::FragB& b0, mma::FragB& b1) { mma::load_b_from_columns<kD>(values, k0, n0, b0, b1); },
        o);
    __syncthreads();  // every warp is done with this stage before step + 2 loads into it
  };
  // The clean steps first, then those whose tiles may need masking (clean_forward_steps). Two
  // loops, so that the clean steps' code holds nothing of masked_score's (registers, branches).
  const int clean_steps = clean_forward_steps(p, i0, kKeys, steps);
  int step = 0;
  for (; step < clean_steps; ++step) step_body(step, std::false_type{});
  for (; step < steps; ++step) step_body(step, std::true_type{});
  mma::wait_copies<0>();  // with no step (no keys), the queries' copies are still in flight

#pragma unroll
  for (int t = 0; t < kTiles; ++t)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int i = i0 + warp_row0 + t * kWarpRows + c_row(2 * half);
      const float sum = quad_sum(l[t][half]);
      if (i >= p.q_len) continue;
      const float kept_scale = p.drop ? p.keep_scale : 1.0f;
      store_row<T, kD>(o[t], half, sum > 0.0f ? kept_scale / sum : 0.0f, p.out + p.query_row(bh, i) * kD);
      if (threadIdx.x % 4 == 0)
        p.log_sum_exp[p.query_row(bh, i)] = sum > 0.0f ? (m[t][half] + log2f(sum)) * kLn2 : INFINITY;
    }
}

// ---- backward ----

// D_i = dO_i . O_i in float32, a warp per row; dO and O contiguous. For the one-pass backward
// it also clears the row's float32 dQ, into which grad_kvq adds.
template <typename T>
__global__ void __launch_bounds__(kThreads) attention_delta_kernel(const Params p) {
  const int64_t rows = static_cast<int64_t>(p.batch) * p.q_heads * p.q_len;
  const int dim = p.head_dim;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (row >= rows) return;
  const uint16_t* grad = p.grad_out.data + row * dim;
  const uint16_t* out = p.saved_out + row * dim;
  float sum = 0.0f;
  for (int d = threadIdx.x % 32; d < dim; d += 32) sum += to_float<T>(grad[d]) * to_float<T>(out[d]);
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  if (threadIdx.x % 32 == 0) p.delta[row] = sum;
  if (p.grad_q_sum != nullptr)
    for (int d = threadIdx.x % 32; d < dim; d += 32) p.grad_q_sum[row * dim + d] = 0.0f;
}

// grad_kv's block for head dim kD: kWarps warps, each owning 16 keys (the block kWarps * 16).
// Larger blocks copy each step's Q and dO tiles once for more keys, at the price of one 8-warp
// block an SM where two 4-warp blocks fit (about 240 registers a thread either way), so a
// barrier stalls every warp of the SM. bench/experiments/flash_backward_shapes.cu times 4 and
// 8 warps: 4 were faster at every shape (docs/perf-notes.md).
template <int kD>
struct GradKvShape {
  static constexpr int kWarps = 4;
};

// What a grad_kv or grad_kvq block owns: kKeys keys j0 .. j0 + kKeys - 1 of key/value head
// kh of batch b, and the steps over the queries that see them, kQueries a step, every query
// head of its group in turn (grouped-query attention). Rank 0 is the first key tile: under
// is_causal, the keys the most queries see.
template <int kKeys, int kQueries>
struct KeyBlock {
  // A step's query head and first query. Advanced by an add and a compare (next), not by
  // dividing the step's number by the query tiles (a division in software, every step).
  struct Tile {
    int h, q0;
  };
  // A stage of shared memory, as load_queries fills it: the step's Q and dO tiles (kD columns),
  // then their L and D (float32).
  template <int kD>
  struct Stage {
    static constexpr int kElements = 2 * kQueries * kD + 2 * kQueries * 2;  // in 16-bit units
    uint16_t* queries;
    __device__ uint16_t* grads() const { return queries + kQueries * kD; }
    __device__ float* lse() const { return reinterpret_cast<float*>(queries + 2 * kQueries * kD); }
    __device__ float* delta() const { return lse() + kQueries; }
  };
  int bkh, b, kh, j0, steps;  // bkh = b * Hk + kh
  int h_first;         // the group's first query head
  int q_first, q_end;  // the queries each query head's steps walk
  __device__ explicit KeyBlock(const Params& p) {
    const int kv_heads = p.kv_heads();
    const BlockOrder order = block_order(p.batch * kv_heads, ceil_div(p.k_len, kKeys), p.kv_heads_per_group);
    bkh = order.head;
    b = bkh / kv_heads;
    kh = bkh % kv_heads;
    j0 = order.rank * kKeys;
    // Under is_causal, queries i < j0 see none of these keys.
    const int first_query_tile = p.is_causal ? j0 / kQueries : 0;
    const int query_tiles = max(0, ceil_div(p.q_len, kQueries) - first_query_tile);
    steps = p.group * query_tiles;
    h_first = kh * p.group;
    q_first = first_query_tile * kQueries;
    q_end = q_first + query_tiles * kQueries;
  }
  __device__ Tile first() const { return {h_first, q_first}; }
  __device__ Tile next(Tile t) const {
    t.q0 += kQueries;
    if (t.q0 == q_end) t.q0 = q_first, ++t.h;
    return t;
  }
  // Step `tile`'s queries and their gradients into `stage` by cp.async, then their L and D (a
  // float a thread of the first 2 * kQueries threads, by cp.async too: a plain load would hold
  // the thread until it returned). A query past the end gets zeros: its scores are -inf (its
  // tile is masked), so P = 0 and it adds nothing.
  template <int kD, int kBlockThreads>
  __device__ void load_queries(const Params& p, Stage<kD> stage, Tile tile) const {
    load_rows_async<kD, kQueries, kBlockThreads>(stage.queries, p.q.head(b, tile.h), p.q.row_stride, tile.q0, p.q_len);
    load_rows_async<kD, kQueries, kBlockThreads>(stage.grads(), p.grad_out.head(b, tile.h), p.grad_out.row_stride,
                                                 tile.q0, p.q_len);
    float* lse = stage.lse();  // then D: lse + kQueries
    if (threadIdx.x < 2 * kQueries) {
      const int i = tile.q0 + threadIdx.x % kQueries;
      const int64_t row = p.query_row(b * p.q_heads + tile.h, i < p.q_len ? i : 0);
      mma::copy_word_async(lse + threadIdx.x, (threadIdx.x < kQueries ? p.log_sum_exp : p.delta) + row, i < p.q_len);
    }
  }
  // The block's K and V into k_tile and v_tile, and the first step's queries into `stage`, by
  // cp.async, committed as one group.
  template <int kD, int kBlockThreads>
  __device__ void load_keys_and_first_queries(const Params& p, uint16_t* k_tile, uint16_t* v_tile,
                                              Stage<kD> stage) const {
    load_rows_async<kD, kKeys, kBlockThreads>(k_tile, p.k.head(b, kh), p.k.row_stride, j0, p.k_len);
    load_rows_async<kD, kKeys, kBlockThreads>(v_tile, p.v.head(b, kh), p.v.row_stride, j0, p.k_len);
    if (steps > 0) load_queries<kD, kBlockThreads>(p, stage, first());
    mma::commit_copies();
  }
  // The head of step `step` (of tile `tile`) in the double-buffered pipeline: the next step's
  // copies issued into `next_stage`, then this step's waited for, and a barrier, after which
  // every thread's copies are visible to all.
  template <int kD, int kBlockThreads>
  __device__ void begin_step(const Params& p, int step, Tile tile, Stage<kD> next_stage) const {
    if (step + 1 < steps) load_queries<kD, kBlockThreads>(p, next_stage, next(tile));
    mma::commit_copies();
    mma::wait_copies<1>();
    __syncthreads();
  }
};

// With keys as rows: a warp's 16 keys key0 .. and 32 queries query0 .. of query head h, S^T's dot
// products s and dP^T dp in, (Z P)^T and scale dS^T out, in place. lse and delta hold the 32
// queries' L (natural units) and D. The dropout's decisions: a Philox call a group of 8 scores
// shared out by shuffles where the groups allow, else a call a score, each form an element loop
// of its own.
template <typename T>
__device__ void key_rows_gradients(const Params& p, bool masking, int b, int h, int key0, int query0, const float* lse,
                                   const float* delta, float (&s)[kQueriesPerStep / 8][4],
                                   float (&dp)[kQueriesPerStep / 8][4]) {
  to_scores<T, true, kQueriesPerStep>(p, masking, b, h, key0, query0, s);
  with_key_rows_dropout(p, [&](auto form) {
    constexpr KeyRowsDropout kForm = decltype(form)::value;
    [[maybe_unused]] uint32_t kept[kQueriesPerStep / 8];
    if constexpr (kForm == KeyRowsDropout::SharedGroups) keep_bits_key_rows(p, b, h, key0, query0, kept);
#pragma unroll
    for (int nb = 0; nb < kQueriesPerStep / 8; ++nb)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int c = c_col(nb, e);
        const float prob = exp2_approx(fmaf(lse[c], -kLog2e, s[nb][e]));  // L is in natural units
        float keep = 1.0f;
        if constexpr (kForm == KeyRowsDropout::SharedGroups) {
          keep = p.keep_factor(kept[nb], e);
        } else if constexpr (kForm == KeyRowsDropout::PerScore) {
          keep = p.keep_factor(p.dropout.keep(p.score_index(b, h, query0 + c, key0 + c_row(e))));
        }
        s[nb][e] = prob * keep;
        dp[nb][e] = prob * (keep * dp[nb][e] - delta[c]) * p.scale;
      }
  });
}

template <int kD, int kKeys>
constexpr int grad_kv_shared_bytes() {
  // K and V; then two stages of Q and dO, and of the queries' L and D.
  return (2 * kKeys * kD + 2 * KeyBlock<kKeys, kQueriesPerStep>::template Stage<kD>::kElements) * 2;
}

// A block owns kKeyWarps * 16 keys, 16 a warp (GradKvShape). At head dim 64 an SM holds three
// 4-warp blocks (170 registers a thread at most), and ptxas is held to that.
template <int kD, int kKeyWarps>
constexpr int kGradKvMinBlocks = kD == 64 && kKeyWarps == 4 ? 3 : 1;

template <typename T, int kD, int kKeyWarps = GradKvShape<kD>::kWarps>
__global__ void __launch_bounds__(kKeyWarps * 32, (kGradKvMinBlocks<kD, kKeyWarps>))
    attention_grad_kv_kernel(const Params p) {
  constexpr int kKeys = kKeyWarps * kWarpRows;  // the keys the block owns
  constexpr int kBlockThreads = kKeyWarps * 32;
  extern __shared__ __align__(128) uint16_t shared[];
  uint16_t* const k_tile = shared;
  uint16_t* const v_tile = shared + kKeys * kD;
  using Block = KeyBlock<kKeys, kQueriesPerStep>;
  using Stage = typename Block::template Stage<kD>;
  auto stage = [&](int step) { return Stage{shared + 2 * kKeys * kD + step % 2 * Stage::kElements}; };

  const Block block(p);
  const int b = block.b, j0 = block.j0, steps = block.steps;
  const int warp_row0 = threadIdx.x / 32 * kWarpRows;

  block.template load_keys_and_first_queries<kD, kBlockThreads>(p, k_tile, v_tile, stage(0));

  float dk[kD / 8][4] = {}, dv[kD / 8][4] = {};
  auto tile = block.first();
  for (int step = 0; step < steps; ++step, tile = block.next(tile)) {
    block.template begin_step<kD, kBlockThreads>(p, step, tile, stage(step + 1));
    const int h = tile.h, q0 = tile.q0;
    const Stage staged = stage(step);
    const uint16_t *queries = staged.queries, *grads = staged.grads();
    const float *lse = staged.lse(), *delta = staged.delta();

    float s[kQueriesPerStep / 8][4], dp[kQueriesPerStep / 8][4];
    rows_times_rows<T, kD, kQueriesPerStep>(k_tile, warp_row0, queries, s);  // S^T
    rows_times_rows<T, kD, kQueriesPerStep>(v_tile, warp_row0, grads, dp);   // dP^T
    // Whether the warp's own 16 keys need masking (a warp-uniform test: no barrier inside).
    const bool masking = tile_needs_masking(p, q0, kQueriesPerStep, j0 + warp_row0, kWarpRows);
    key_rows_gradients<T>(p, masking, b, h, j0 + warp_row0, q0, lse, delta, s, dp);
    tile_times_columns<T, kQueriesPerStep, kD>(s, grads, dv);     // dV += (Z P)^T dO
    tile_times_columns<T, kQueriesPerStep, kD>(dp, queries, dk);  // dK += scale dS^T Q
    __syncthreads();
  }
  mma::wait_copies<0>();

#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int j = j0 + warp_row0 + c_row(2 * half);
    if (j >= p.k_len) continue;
    const int64_t row = static_cast<int64_t>(block.bkh) * p.k_len + j;
    store_row<T, kD>(dk, half, 1.0f, p.grad_k + row * kD);
    store_row<T, kD>(dv, half, 1.0f, p.grad_v + row * kD);
  }
}

template <int kD>
constexpr int grad_q_shared_bytes() {
  return (2 * kBlockRows + 2 * 2 * kKeysPerStep) * kD * 2;  // Q, dO, then two stages of K and V
}

template <typename T, int kD>
__global__ void __launch_bounds__(kThreads) attention_grad_q_kernel(const Params p) {
  extern __shared__ __align__(128) uint16_t shared[];
  uint16_t* const q_tile = shared;
  uint16_t* const grad_tile = shared + kBlockRows * kD;
  auto stage = [&](int step) { return shared + (2 * kBlockRows + step % 2 * 2 * kKeysPerStep) * kD; };

  const QueryBlock<kBlockRows, kKeysPerStep> block(p);
  const int bh = block.bh, b = block.b, h = block.h, i0 = block.i0, steps = block.steps;
  const int warp_row0 = threadIdx.x / 32 * kWarpRows;

  load_rows_async<kD, kBlockRows>(q_tile, p.q.head(b, h), p.q.row_stride, i0, p.q_len);
  load_rows_async<kD, kBlockRows>(grad_tile, p.grad_out.head(b, h), p.grad_out.row_stride, i0, p.q_len);
  if (steps > 0) block.template load_keys<kD>(p, stage(0), 0);
  mma::commit_copies();

  // The lane's two rows' L (log2 domain) and D; a row past the end gets P = 0.
  float lse[2], delta[2];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int i = i0 + warp_row0 + c_row(2 * half);
    lse[half] = i < p.q_len ? p.log_sum_exp[p.query_row(bh, i)] * kLog2e : INFINITY;
    delta[half] = i < p.q_len ? p.delta[p.query_row(bh, i)] : 0.0f;
  }

  float dq[kD / 8][4] = {};
  for (int step = 0; step < steps; ++step) {
    if (step + 1 < steps) block.template load_keys<kD>(p, stage(step + 1), step + 1);
    mma::commit_copies();
    mma::wait_copies<1>();
    __syncthreads();
    const uint16_t* keys = stage(step);
    const uint16_t* values = keys + kKeysPerStep * kD;
    const int j0 = step * kKeysPerStep;

    float s[kKeysPerStep / 8][4], dp[kKeysPerStep / 8][4];
    rows_times_rows<T, kD, kKeysPerStep>(q_tile, warp_row0, keys, s);
    rows_times_rows<T, kD, kKeysPerStep>(grad_tile, warp_row0, values, dp);
    to_scores<T, false, kKeysPerStep>(p, tile_needs_masking(p, i0, kBlockRows, j0, kKeysPerStep), b, h,
                                      i0 + warp_row0, j0, s);
    with_dropout(p, [&](auto dropout) {
      uint32_t kept[kKeysPerStep / 8];
      if constexpr (decltype(dropout)::value) keep_bits_query_rows<kKeysPerStep>(p, b, h, i0 + warp_row0, j0, kept);
#pragma unroll
      for (int nb = 0; nb < kKeysPerStep / 8; ++nb)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float keep = decltype(dropout)::value ? p.keep_factor(kept[nb], e) : 1.0f;
          const float prob = exp2_approx(s[nb][e] - lse[e / 2]);
          s[nb][e] = prob * (keep * dp[nb][e] - delta[e / 2]) * p.scale;  // scale dS
        }
    });
    tile_times_columns<T, kKeysPerStep, kD>(s, keys, dq);  // dQ += scale dS K
    __syncthreads();
  }
  mma::wait_copies<0>();

#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int i = i0 + warp_row0 + c_row(2 * half);
    if (i < p.q_len) store_row<T, kD>(dq, half, 1.0f, p.grad_q + p.query_row(bh, i) * kD);
  }
}

// ---- the one-pass backward: FlashAttention-2's, dQ by atomic adds ----
//
// grad_kv's work and dQ's in one kernel: 5 products where the two passes make 7. A block owns
// kKeys keys and walks kQueries queries a step; each step adds the step's share of dQ, dS K
// over the block's keys, into a float32 buffer by atomic adds (the delta pass clears it; a
// conversion to T follows). The adds' order varies from run to run, so dQ's last bits do:
// the library runs this form unless use_deterministic_algorithms is on.
//
// The two-pass kernels keep every product's output in the registers of the warp that made it.
// Here the block's 8 warps split each product two ways over a tile larger than one warp's
// rows, so that each fragment read from shared memory feeds more products; the price is that
// P and dS pass through shared memory between the products:
//   S^T, dP^T [kKeys x kQueries]   warp w: keys 32 (w % 4) .., queries 32 (w / 4) ..
//     (then P^T and dS^T, as T, into shared memory)
//   dV, dK    [kKeys x kD]         warp w: keys 32 (w % 4) .., columns kD / 2 (w / 4) ..
//   dQ share  [kQueries x kD]      warp w: queries 32 (w % 2) .., columns kD / 4 (w / 2) ..
template <int kD>
struct OnePassShape {
  static constexpr int kWarps = 8;
  static constexpr int kKeys = 128;
  static constexpr int kQueries = 64;
  static constexpr int kWarpTiles = 2;  // the mma tiles of 16 rows each warp's part of a product spans
};

template <int kD>
constexpr int one_pass_shared_bytes() {
  using S = OnePassShape<kD>;
  // K and V; two stages of Q, dO and the queries' L and D; P^T and dS^T.
  constexpr int kStageElements = KeyBlock<S::kKeys, S::kQueries>::template Stage<kD>::kElements;
  return (2 * S::kKeys * kD + 2 * kStageElements + 2 * S::kKeys * S::kQueries) * 2;
}

// A warp's C tile c (16 rows from row0, kN columns from col0) as T into a swizzled tile of
// kCols columns: each lane's two neighbouring columns as one 32-bit store.
template <typename T, int kCols, int kN>
__device__ void store_c_tile(const float (&c)[kN / 8][4], uint16_t* tile, int row0, int col0) {
#pragma unroll
  for (int nb = 0; nb < kN / 8; ++nb)
#pragma unroll
    for (int half = 0; half < 2; ++half)
      *reinterpret_cast<uint32_t*>(tile + mma::swizzled<kCols>(row0 + c_row(2 * half), col0 + c_col(nb, 0))) =
          mma::pack<T>(c[nb][2 * half], c[nb][2 * half + 1]);
}

// at[0] += first, at[1] += second (at 8-byte aligned), atomically: on sm_90 one instruction
// (red.global.add.v2.f32), and a warp's adds fill the 32-byte sectors they touch.
__device__ __forceinline__ void atomic_add_pair(float* at, float first, float second) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  atomicAdd(reinterpret_cast<float2*>(at), make_float2(first, second));
#else
  atomicAdd(at, first);
  atomicAdd(at + 1, second);
#endif
}

template <typename T, int kD>
__global__ void __launch_bounds__(OnePassShape<kD>::kWarps * 32, 1) attention_grad_kvq_kernel(const Params p) {
  using Shape = OnePassShape<kD>;
  constexpr int kKeys = Shape::kKeys, kQueries = Shape::kQueries, kTiles = Shape::kWarpTiles;
  constexpr int kBlockThreads = Shape::kWarps * 32;
  constexpr int kPart = kTiles * kWarpRows;  // 32: the rows (keys or queries) of a warp's part of a product
  static_assert(kKeys == 4 * kPart && kQueries == 2 * kPart && Shape::kWarps == 8,
                "the warps split the scores 4 x 2, dK and dV 4 x 2, dQ 2 x 4");
  static_assert(kPart == kQueriesPerStep, "keep_bits_key_rows covers a warp's 32 queries");
  extern __shared__ __align__(128) uint16_t shared[];
  uint16_t* const k_tile = shared;
  uint16_t* const v_tile = shared + kKeys * kD;
  using Block = KeyBlock<kKeys, kQueries>;
  using Stage = typename Block::template Stage<kD>;
  auto stage = [&](int step) { return Stage{shared + 2 * kKeys * kD + step % 2 * Stage::kElements}; };
  uint16_t* const p_tile = shared + 2 * kKeys * kD + 2 * Stage::kElements;  // P^T [kKeys x kQueries]
  uint16_t* const ds_tile = p_tile + kKeys * kQueries;                   // dS^T, likewise

  const Block block(p);
  const int b = block.b, j0 = block.j0, steps = block.steps;
  const int warp = threadIdx.x / 32;
  const int key_row0 = warp % 4 * kPart;    // scores, dK and dV: the warp's keys in the block
  const int query_col0 = warp / 4 * kPart;  // scores: the warp's queries in the step
  const int kv_col0 = warp / 4 * (kD / 2);       // dK and dV: the warp's columns
  const int dq_row0 = warp % 2 * kPart;     // dQ: the warp's queries in the step
  const int dq_col0 = warp / 2 * (kD / 4);       // dQ: the warp's columns

  block.template load_keys_and_first_queries<kD, kBlockThreads>(p, k_tile, v_tile, stage(0));

  float dk[kTiles][kD / 2 / 8][4] = {}, dv[kTiles][kD / 2 / 8][4] = {};
  auto tile = block.first();
  for (int step = 0; step < steps; ++step, tile = block.next(tile)) {
    block.template begin_step<kD, kBlockThreads>(p, step, tile, stage(step + 1));
    const int h = tile.h, q0 = tile.q0;
    const Stage staged = stage(step);
    const uint16_t *queries = staged.queries, *grads = staged.grads();
    const float *lse = staged.lse(), *delta = staged.delta();

    {
      // S^T = K Q^T and dP^T = V dO^T for the warp's 32 keys and 32 queries.
      float s[kTiles][kQueriesPerStep / 8][4] = {}, dp[kTiles][kQueriesPerStep / 8][4] = {};
      warp_product<T, kTiles, kQueriesPerStep, kD>(
          [&](int t, int k0, mma::FragA& a) { mma::load_a<kD>(k_tile, key_row0 + t * kWarpRows, k0, a); },
          [&](int k0, int n0, mma::FragB& b0, mma::FragB& b1) {
            mma::load_b_from_rows<kD>(queries, query_col0 + n0, k0, b0, b1);
          },
          s);
      warp_product<T, kTiles, kQueriesPerStep, kD>(
          [&](int t, int k0, mma::FragA& a) { mma::load_a<kD>(v_tile, key_row0 + t * kWarpRows, k0, a); },
          [&](int k0, int n0, mma::FragB& b0, mma::FragB& b1) {
            mma::load_b_from_rows<kD>(grads, query_col0 + n0, k0, b0, b1);
          },
          dp);
      const bool masking = tile_needs_masking(p, q0 + query_col0, kPart, j0 + key_row0, kPart);
#pragma unroll
      for (int t = 0; t < kTiles; ++t) {
        key_rows_gradients<T>(p, masking, b, h, j0 + key_row0 + t * kWarpRows, q0 + query_col0, lse + query_col0,
                              delta + query_col0, s[t], dp[t]);
        store_c_tile<T, kQueries, kQueriesPerStep>(s[t], p_tile, key_row0 + t * kWarpRows, query_col0);
        store_c_tile<T, kQueries, kQueriesPerStep>(dp[t], ds_tile, key_row0 + t * kWarpRows, query_col0);
      }
    }
    __syncthreads();  // P^T and dS^T of every warp in shared memory

    // dV += (Z P)^T dO and dK += scale dS^T Q for the warp's 32 keys and kD / 2 columns.
    warp_product<T, kTiles, kD / 2, kQueries>(
        [&](int t, int k0, mma::FragA& a) { mma::load_a<kQueries>(p_tile, key_row0 + t * kWarpRows, k0, a); },
        [&](int k0, int n0, mma::FragB& b0, mma::FragB& b1) {
          mma::load_b_from_columns<kD>(grads, k0, kv_col0 + n0, b0, b1);
        },
        dv);
    warp_product<T, kTiles, kD / 2, kQueries>(
        [&](int t, int k0, mma::FragA& a) { mma::load_a<kQueries>(ds_tile, key_row0 + t * kWarpRows, k0, a); },
        [&](int k0, int n0, mma::FragB& b0, mma::FragB& b1) {
          mma::load_b_from_columns<kD>(queries, k0, kv_col0 + n0, b0, b1);
        },
        dk);

    // The step's share of dQ, scale dS K over the block's keys, for the warp's 32 queries and
    // kD / 4 columns, added into grad_q_sum.
    {
      float dq[kTiles][kD / 4 / 8][4] = {};
      warp_product<T, kTiles, kD / 4, kKeys>(
          [&](int t, int k0, mma::FragA& a) {
            mma::load_a_from_columns<kQueries>(ds_tile, k0, dq_row0 + t * kWarpRows, a);
          },
          [&](int k0, int n0, mma::FragB& b0, mma::FragB& b1) {
            mma::load_b_from_columns<kD>(k_tile, k0, dq_col0 + n0, b0, b1);
          },
          dq);
#pragma unroll
      for (int t = 0; t < kTiles; ++t)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int i = q0 + dq_row0 + t * kWarpRows + c_row(2 * half);
          if (i >= p.q_len) continue;
          float* row = p.grad_q_sum + p.query_row(b * p.q_heads + h, i) * kD + dq_col0;
#pragma unroll
          for (int nb = 0; nb < kD / 4 / 8; ++nb)
            atomic_add_pair(row + c_col(nb, 0), dq[t][nb][2 * half], dq[t][nb][2 * half + 1]);
        }
    }
    __syncthreads();  // every warp is done with this stage, P^T and dS^T
  }
  mma::wait_copies<0>();

#pragma unroll
  for (int t = 0; t < kTiles; ++t)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int j = j0 + key_row0 + t * kWarpRows + c_row(2 * half);
      if (j >= p.k_len) continue;
      const int64_t row = static_cast<int64_t>(block.bkh) * p.k_len + j;
      store_row<T, kD / 2>(dk[t], half, 1.0f, p.grad_k + row * kD + kv_col0);
      store_row<T, kD / 2>(dv[t], half, 1.0f, p.grad_v + row * kD + kv_col0);
    }
}

// ---- host ----

template <typename Kernel>
void launch(Kernel kernel, int64_t blocks, int shared_bytes, const Params& p, const char* op,
            int block_threads = kThreads) {
  if (blocks == 0) return;
  MG_CHECK(blocks < (int64_t{1} << 31), "{}: {} thread blocks is more than one launch takes", op, blocks);
  allow_shared_memory(kernel, shared_bytes, op);
  kernel<<<static_cast<unsigned>(blocks), block_threads, shared_bytes, current_stream()>>>(p);
  MG_CUDA_CHECK_LAUNCH(op);
}

// The backward's kernels, after p is filled in: delta, then grad_kv (blocks of kKeyWarps
// warps) and grad_q, or with p.grad_q_sum set the one pass, grad_kvq.
template <typename T, int kD, int kKeyWarps>
void launch_backward(const Params& p, const char* op) {
  const int64_t query_rows = static_cast<int64_t>(p.batch) * p.q_heads * p.q_len;
  auto key_blocks = [&](int keys) { return static_cast<int64_t>(p.batch) * p.kv_heads() * ceil_div(p.k_len, keys); };
  launch(attention_delta_kernel<T>, (query_rows + kWarps - 1) / kWarps, 0, p, op);
  if (p.grad_q_sum != nullptr) {
    launch(attention_grad_kvq_kernel<T, kD>, key_blocks(OnePassShape<kD>::kKeys), one_pass_shared_bytes<kD>(), p, op,
           OnePassShape<kD>::kWarps * 32);
    return;
  }
  constexpr int kKeys = kKeyWarps * kWarpRows;
  const int64_t query_blocks = static_cast<int64_t>(p.batch) * p.q_heads * ceil_div(p.q_len, kBlockRows);
  launch(attention_grad_kv_kernel<T, kD, kKeyWarps>, key_blocks(kKeys), grad_kv_shared_bytes<kD, kKeys>(), p, op,
         kKeyWarps * 32);
  launch(attention_grad_q_kernel<T, kD>, query_blocks, grad_q_shared_bytes<kD>(), p, op);
}

// t, or a copy of it, whose rows the kernels may read as 16-byte chunks: the last dim
// contiguous, the other strides and the first element's address multiples of 16 bytes.
Tensor chunk_aligned(const Tensor& t) {
  bool aligned = t.stride(3) == 1 && reinterpret_cast<uintptr_t>(t.raw_data()) % 16 == 0;
  for (int d = 0; d < 3; ++d) aligned = aligned && t.stride(d) % mma::kChunkElements == 0;
  return aligned ? t : t.clone();
}

// How many heads a group of the block order holds (block_order): under is_causal, as many as
// stream at most kHeadGroupBytes between them (a third of an H100's 50 MB L2, so that the
// group's rows stay there beside what else the blocks read and write), at least one, at most
// all. 16 MiB was the best of 8, 16 and 32 over five causal shapes on an H100
// (bench/experiments/flash_block_order.cu, docs/perf-notes.md).
constexpr int64_t kHeadGroupBytes = int64_t{16} << 20;
int heads_per_group(bool causal, int64_t heads, int64_t bytes_per_head) {
  if (!causal) return 1;
  return static_cast<int>(std::clamp<int64_t>(kHeadGroupBytes / std::max<int64_t>(bytes_per_head, 1), 1,
                                              std::max<int64_t>(heads, 1)));
}

HeadRows head_rows(const Tensor& t) {
  return {static_cast<const uint16_t*>(t.raw_data()), t.stride(0), t.stride(1), t.stride(2)};
}

// The fields every kernel reads, from the inputs and the spec.
Params params_of(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionSpec& spec) {
  Params p{};
  p.q = head_rows(q);
  p.k = head_rows(k);
  p.v = head_rows(v);
  p.batch = static_cast<int>(q.size(0));
  p.q_heads = static_cast<int>(q.size(1));
  p.group = static_cast<int>(spec.group);
  p.q_len = static_cast<int>(q.size(2));
  p.k_len = static_cast<int>(k.size(2));
  p.head_dim = static_cast<int>(q.size(3));
  p.scale = static_cast<float>(spec.scale);
  p.scale_log2 = static_cast<float>(spec.scale) * kLog2e;
  p.mask_kind = MaskKind::None;
  if (spec.mask.defined()) {
    p.mask = spec.mask.raw_data();
    p.mask_kind = spec.mask.dtype() == kBool ? MaskKind::Bool : MaskKind::Additive;
    const Shape strides = broadcast_strides(spec.mask, {q.size(0), q.size(1), q.size(2), k.size(2)});
    for (int d = 0; d < 4; ++d) p.mask_strides[d] = strides[d];
  }
  p.is_causal = spec.is_causal;
  // The block order's head groups: the 16-bit rows a block streams, K and V of its head for a
  // query block, Q and dO of the group's query heads for a key block.
  const int64_t row_bytes = 2 * 2 * q.size(3);
  p.query_heads_per_group = heads_per_group(spec.is_causal, p.batch * p.q_heads, row_bytes * p.k_len);
  p.kv_heads_per_group = heads_per_group(spec.is_causal, p.batch * p.kv_heads(), row_bytes * p.q_len * p.group);
  p.drop = spec.drop;
  p.dropout = spec.dropout;
  p.keep_scale = static_cast<float>(spec.dropout.scale());
  return p;
}

void check_sizes(const char* op, const Tensor& q, const Tensor& k) {
  constexpr int64_t kMax = (int64_t{1} << 31) - 2 * kBlockRows;  // ceil_div over a block of up to 128 rows fits int
  const int64_t group = q.size(1) / std::max<int64_t>(k.size(1), 1);  // grad_kv's steps: group x query tiles
  MG_CHECK(q.size(0) * q.size(1) < kMax && q.size(2) < kMax && k.size(2) < kMax &&
               group * (q.size(2) / kQueriesPerStep + 1) < kMax,
           "{}: sizes past 2^31 are not supported by the CUDA kernels (query {}, key {})", op, shape_str(q.sizes()),
           shape_str(k.sizes()));
}

// Calls f(T{}, std::integral_constant<int, D>{}) for the inputs' dtype and head dim.
template <typename F>
void with_kernel_types(DType dtype, int64_t head_dim, F&& f) {
  auto with_dim = [&](auto tag) {
    if (head_dim == 64)
      f(tag, std::integral_constant<int, 64>{});
    else
      f(tag, std::integral_constant<int, 128>{});
  };
  if (dtype == kBFloat16)
    with_dim(BFloat16{});
  else
    with_dim(Half{});
}

// The backward's operands in p: dO (chunk-aligned, as q is), the forward's O and L, D's buffer
// (float32, L's shape), and the three gradients (contiguous, the shapes of q, k and v).
void set_backward_operands(Params& p, const Tensor& grad, const Tensor& out, const Tensor& log_sum_exp,
                           const Tensor& delta, const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v) {
  p.grad_out = head_rows(grad);
  p.saved_out = static_cast<const uint16_t*>(out.raw_data());
  p.log_sum_exp = log_sum_exp.data_ptr<float>();
  p.delta = delta.data_ptr<float>();
  p.grad_q = static_cast<uint16_t*>(grad_q.raw_data());
  p.grad_k = static_cast<uint16_t*>(grad_k.raw_data());
  p.grad_v = static_cast<uint16_t*>(grad_v.raw_data());
}

// The backward in one pass (dQ by atomic adds) or in two (grad_kv, then grad_q), with the two
// passes' grad_kv blocks of kKeyWarps warps at every head dim, or with 0 GradKvShape's choice:
// the library runs 0, bench/experiments/flash_backward_shapes.cu the others too.
template <int kKeyWarps = 0>
void backward_with_shape(const Tensor& grad_in, const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                         const Tensor& out, const Tensor& log_sum_exp, const AttentionSpec& spec, const Tensor& grad_q,
                         const Tensor& grad_k, const Tensor& grad_v, bool one_pass) {
  const char* op = "scaled_dot_product_attention_backward";
  if (q_in.numel() == 0 && k_in.numel() == 0) return;
  check_sizes(op, q_in, k_in);
  DeviceGuard guard(q_in.device().index);
  const Tensor q = chunk_aligned(q_in), k = chunk_aligned(k_in), v = chunk_aligned(v_in);
  const Tensor grad = chunk_aligned(grad_in.contiguous());
  Params p = params_of(q, k, v, spec);
  const Tensor delta = empty(log_sum_exp.sizes(), TensorOptions(kFloat32).device(q.device()));
  set_backward_operands(p, grad, out, log_sum_exp, delta, grad_q, grad_k, grad_v);
  const Tensor grad_q_sum = one_pass ? empty(grad_q.sizes(), TensorOptions(kFloat32).device(q.device())) : Tensor();
  p.grad_q_sum = one_pass ? grad_q_sum.data_ptr<float>() : nullptr;
  with_kernel_types(q.dtype(), q.size(3), [&](auto tag, auto dim) {
    constexpr int kD = decltype(dim)::value;
    launch_backward<decltype(tag), kD, kKeyWarps != 0 ? kKeyWarps : GradKvShape<kD>::kWarps>(p, op);
  });
  if (one_pass) copy_into(grad_q, grad_q_sum);
}

}  // namespace

bool flash_attention_supports(DType dtype, int64_t head_dim, int64_t value_dim) {
  return is_half(dtype) && head_dim == value_dim && (head_dim == 64 || head_dim == 128);
}

void flash_attention_forward(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, const AttentionSpec& spec,
                             const Tensor& out, const Tensor& log_sum_exp) {
  const char* op = "scaled_dot_product_attention";
  MG_CHECK(flash_attention_supports(q_in.dtype(), q_in.size(3), v_in.size(3)),
           "{}: the CUDA kernels do not run {} with head dim {}", op, q_in.dtype(), q_in.size(3));
  if (q_in.numel() == 0) return;
  check_sizes(op, q_in, k_in);
  DeviceGuard guard(q_in.device().index);
  const Tensor q = chunk_aligned(q_in), k = chunk_aligned(k_in), v = chunk_aligned(v_in);
  Params p = params_of(q, k, v, spec);
  p.out = static_cast<uint16_t*>(out.raw_data());
  p.log_sum_exp = log_sum_exp.data_ptr<float>();
  with_kernel_types(q.dtype(), q.size(3), [&](auto tag, auto dim) {
    using T = decltype(tag);
    constexpr int kD = decltype(dim)::value;
    auto launch_with = [&](auto tiles) {
      using Tiles = decltype(tiles);
      const auto kernel = attention_forward_kernel<T, kD, Tiles::kTiles, Tiles::kKeys>;
      constexpr int kShared = forward_shared_bytes<kD, Tiles::kTiles, Tiles::kKeys>();
      const int64_t blocks = q.size(0) * q.size(1) * ceil_div(p.q_len, kBlockRows * Tiles::kTiles);
      // The wide shape where its blocks fill the GPU at least kWideForwardWaves times (one
      // occupancy query; only non-causal calls ask). A wave is at least a block an SM, so a grid
      // below kWideForwardWaves blocks an SM (decoding, short sequences) is answered without it.
      if constexpr (Tiles::kTiles > 1) {
        if (blocks < kWideForwardWaves * multiprocessor_count(op)) return false;
        allow_shared_memory(kernel, kShared, op);
        if (blocks < kWideForwardWaves * blocks_per_wave(kernel, kThreads, op, kShared)) return false;
      }
      launch(kernel, blocks, kShared, p, op);
      return true;
    };
    if (!spec.is_causal && launch_with(WideForwardShape<kD>{})) return;
    launch_with(ForwardShape<kD>{});
  });
}

void flash_attention_backward(const Tensor& grad_in, const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                              const Tensor& out, const Tensor& log_sum_exp, const AttentionSpec& spec,
                              const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v) {
  backward_with_shape(grad_in, q_in, k_in, v_in, out, log_sum_exp, spec, grad_q, grad_k, grad_v,
                      !are_deterministic_algorithms_enabled());
}

}  // namespace cuda
}  // namespace minigrad
