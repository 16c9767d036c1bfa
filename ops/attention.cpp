// scaled_dot_product_attention: O = dropout(softmax(scale * Q K^T + mask)) V, without ever
// storing the [Sq, Sk] score matrix of a head.
//
// The forward (FlashAttention's algorithm, here on the CPU): each task owns a tile of query
// rows of one head and walks the keys a tile at a time. For each key tile it scores the
// query rows against the keys (scale * q . k, plus the mask), then folds the tile into each
// row's running state, the "online softmax":
//   m   the largest score so far,
//   l   sum of exp(s - m) over the keys so far (the softmax's denominator),
//   acc sum of exp(s - m) * z_j * v_j (the numerator, z_j the dropout factor: 0 for a dropped
//       score, 1 / (1 - p) for a kept one, 1 without dropout).
// When a tile raises m, the earlier l and acc are rescaled by exp(m_old - m_new): they were
// sums of exp(s - m_old). After the last tile, O = acc / l, and the row's log-sum-exp L = m +
// log(l) is kept for the backward: one number a row instead of a row of Sk probabilities.
// A row whose every key is masked out has l = 0: O = 0 and L = +inf (so exp(s - L) = 0).
//
// The backward recomputes P = exp(s - L) tile by tile from Q, K and L, and needs, per query
// row, D_i = sum_d dO_id O_id (= sum_j P_ij z_ij dO_i . v_j, computed once up front):
//   dV_j += P_ij z_ij dO_i                 dP_ij = dO_i . v_j
//   dS_ij = P_ij (z_ij dP_ij - D_i)        dQ_i += scale dS_ij k_j,  dK_j += scale dS_ij q_i
// Here in two passes, each race-free and deterministic: one owns a tile of keys (of a
// key/value head, every query head that shares it: grouped-query attention) and sums dK and
// dV over the queries; the other owns a tile of queries and sums dQ over the keys. Each
// recomputes P, the price of no atomics and no stored scores. The GPU's kernels do the same
// under use_deterministic_algorithms; by default they make one pass over key tiles and add
// each tile's share of dQ by atomic adds, FlashAttention-2's way (cuda/flash_attention.cu).
//
// Dropout keys score (b, h, i, j) by its index in the row-major order of the [B, Hq, Sq, Sk]
// scores, from one reserved Philox stream (kernels/dropout.h), exactly as softmax_dropout
// keys its input: the composite twin, softmax_dropout(q k^T, ...) v, drops the same scores.
//
// float16 and bfloat16 inputs are computed in float32; float32 in float, float64 in double.
// The log-sum-exp is float32 (double for float64).
//
// On the GPU, float16 and bfloat16 with head dim 64 or 128 run the tensor-core kernels of
// cuda/flash_attention.cu (the same algorithm, same names); other dtypes and head dims run
// as the composite twin, which stores the scores.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <type_traits>
#include <vector>

#include <minigrad/autograd/function.h>
#include <minigrad/core/cpu_arch.h>
#include <minigrad/core/dispatch.h>
#include <minigrad/core/generator.h>
#include <minigrad/core/parallel.h>
#include <minigrad/core/shape.h>
#include <minigrad/cuda/flash_attention.h>
#include <minigrad/kernels/dropout.h>
#include <minigrad/ops/cpu_loops.h>
#include <minigrad/ops/ops.h>

namespace minigrad {
namespace {

constexpr int64_t kQueryTile = 32;  // query rows one task owns
constexpr int64_t kKeyTile = 64;    // keys scored at once

using cuda::AttentionSpec;  // what the kernels apply besides q, k and v (the same on both devices)

// A [B, H, S, D] tensor read a row (b, h, s) at a time: any strides, the last dim contiguous.
template <typename T>
struct HeadRows {
  T* data;
  int64_t batch_stride, head_stride, row_stride;
  T* row(int64_t b, int64_t h, int64_t s) const { return data + b * batch_stride + h * head_stride + s * row_stride; }
};

template <typename T>
HeadRows<T> head_rows(const Tensor& t) {
  return {t.data_ptr<T>(), t.stride(0), t.stride(1), t.stride(2)};
}

// ---- the tile loops ----
//
// A score is a dot product, q_i . k_j, a sum over the head dim d. Computed one key at a time,
// that sum is a reduction, and the compiler may not split it across vector lanes: that would
// reorder float additions. So each tile of keys is first copied transposed, d-major:
//   tile[d * kKeyTile + c] = k_{j0 + c, d}    (the columns past the tile's last key are 0)
// and a query row is scored against the whole tile a dimension at a time,
//   s_c += q_d * tile[d * kKeyTile + c]       for every c at once,
// a loop over the tile's keys, each lane summing its own score in the order d = 0, 1, ...
// (the dot product's own order: nothing is reassociated). The backward's dP_ij = dO_i . v_j
// reads a tile of values transposed the same way. The loops that add rows (acc += p v_j,
// dV_j += P z dO_i, dK_j += c q_i, dQ_i += c k_j) run along d and vectorize as they are.
//
// Each loop is a free function over raw pointers, compiled per instruction set
// (MG_CPU_CLONES, core/cpu_arch.h), and each call covers a row or a tile: the clone is picked
// once a row, not once a score.

// The `rows` rows (at most kKeyTile) starting at `first`, row_stride apart, dim wide, into
// tile[d * kKeyTile + c], the columns c >= rows zero.
template <typename T>
void pack_transposed(const T* first, int64_t row_stride, int64_t rows, int64_t dim, T* tile) {
  for (int64_t c = 0; c < rows; ++c)
    for (int64_t d = 0; d < dim; ++d) tile[d * kKeyTile + c] = first[c * row_stride + d];
  for (int64_t d = 0; d < dim; ++d) std::fill(tile + d * kKeyTile + rows, tile + (d + 1) * kKeyTile, T(0));
}

// out[r * kKeyTile + c] = factor * (x_r . column c of tile) for the `rows` rows x_r = x + r *
// x_stride, dim wide, and every column c of the tile. The fixed trip count over c lets the
// compiler keep a row's kKeyTile sums in vector registers while it walks d.
template <typename T>
MG_CPU_CLONES static void tile_dots(const T* x, int64_t x_stride, int64_t rows, const T* tile, int64_t dim, T factor,
                                    T* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * x_stride;
    T sum[kKeyTile] = {};
    for (int64_t d = 0; d < dim; ++d) {
      const T xd = xr[d];
      const T* column = tile + d * kKeyTile;
      for (int64_t c = 0; c < kKeyTile; ++c) sum[c] += xd * column[c];
    }
    for (int64_t c = 0; c < kKeyTile; ++c) out[r * kKeyTile + c] = factor * sum[c];
  }
}

// y += w[c] * row_c for c = 0, 1, ..., n - 1 in order, row_c = rows + c * row_stride, dim
// wide; a zero weight adds nothing (a masked-out score, or a dropped one). A row of the forward's
// numerator (acc_i += p_ij v_j) or of dQ (dQ_i += c_ij k_j) against one tile of keys.
template <typename T>
MG_CPU_CLONES static void add_weighted_rows(const T* w, int64_t n, const T* rows, int64_t row_stride, int64_t dim,
                                            T* __restrict y) {
  for (int64_t c = 0; c < n; ++c) {
    if (w[c] == T(0)) continue;
    const T wc = w[c];
    const T* row = rows + c * row_stride;
    for (int64_t d = 0; d < dim; ++d) y[d] += wc * row[d];
  }
}

// row_c += w[c] * x for c < n, row_c = rows + c * dim; a zero weight adds nothing. One query
// row's share of a tile of dK (dK_j += c_ij q_i) or dV (dV_j += P_ij z_ij dO_i).
template <typename T>
MG_CPU_CLONES static void add_to_rows(const T* w, int64_t n, const T* __restrict x, int64_t dim, T* rows) {
  for (int64_t c = 0; c < n; ++c) {
    if (w[c] == T(0)) continue;
    const T wc = w[c];
    T* row = rows + c * dim;
    for (int64_t d = 0; d < dim; ++d) row[d] += wc * x[d];
  }
}

// One attention problem, in the compute type T (float or double), with its mask of type M.
template <typename T, typename M>
struct Problem {
  HeadRows<T> q, k, v;
  int64_t batch, q_heads, q_len, k_len, head_dim, v_dim;
  const M* mask = nullptr;  // null: no mask
  Shape mask_strides;       // [B, Hq, Sq, Sk], 0 where broadcast
  AttentionSpec spec;

  int64_t kv_head(int64_t h) const { return h / spec.group; }
  // The score's index in the row-major order of [B, Hq, Sq, Sk]: its dropout decision.
  uint64_t score_index(int64_t b, int64_t h, int64_t i, int64_t j) const {
    return static_cast<uint64_t>(((b * q_heads + h) * q_len + i) * k_len + j);
  }
  // The keys row i may see: all of them, or under is_causal those up to i.
  int64_t key_end(int64_t last_row) const { return spec.is_causal ? std::min(k_len, last_row + 1) : k_len; }

  // Keys (pack_keys) or values (pack_values) j0 <= j < j1 of key/value head kh, transposed
  // into `tile` (pack_transposed).
  void pack_keys(int64_t b, int64_t kh, int64_t j0, int64_t j1, T* tile) const {
    pack_transposed(k.row(b, kh, j0), k.row_stride, j1 - j0, head_dim, tile);
  }
  void pack_values(int64_t b, int64_t kh, int64_t j0, int64_t j1, T* tile) const {
    pack_transposed(v.row(b, kh, j0), v.row_stride, j1 - j0, v_dim, tile);
  }

  // scores[r * kKeyTile + (j - j0)] = scale * q_i . k_j + mask, -inf where masked out, for the
  // query rows i0 + r < i1 of head h and the keys j0 <= j < j1, whose tile key_tile holds
  // (pack_keys).
  void score_tile(int64_t b, int64_t h, int64_t i0, int64_t i1, int64_t j0, int64_t j1, const T* key_tile,
                  T* scores) const {
    tile_dots(q.row(b, h, i0), q.row_stride, i1 - i0, key_tile, head_dim, static_cast<T>(spec.scale), scores);
    if (!mask && !spec.is_causal) return;
    const T minus_infinity = -std::numeric_limits<T>::infinity();
    for (int64_t i = i0; i < i1; ++i) {
      T* s = scores + (i - i0) * kKeyTile;
      if (mask) {
        for (int64_t j = j0; j < j1; ++j) {
          const M m = mask[b * mask_strides[0] + h * mask_strides[1] + i * mask_strides[2] + j * mask_strides[3]];
          if constexpr (std::is_same_v<M, bool>)
            s[j - j0] = m ? s[j - j0] : minus_infinity;
          else
            s[j - j0] += m;
        }
      }
      if (spec.is_causal)
        for (int64_t j = std::max(j0, i + 1); j < j1; ++j) s[j - j0] = minus_infinity;
    }
  }
};

// ---- forward ----

// O [B, Hq, Sq, Dv] and L [B, Hq, Sq] (contiguous) of one problem.
template <typename T, typename M>
void attention_forward(const Problem<T, M>& pr, T* out, T* log_sum_exp) {
  const int64_t query_tiles = (pr.q_len + kQueryTile - 1) / kQueryTile;
  const T minus_infinity = -std::numeric_limits<T>::infinity();
  const T keep_scale = static_cast<T>(pr.spec.dropout.scale());
  parallel_for(0, pr.batch * pr.q_heads * query_tiles, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> key_tile(static_cast<size_t>(pr.head_dim * kKeyTile));
    std::vector<T> scores(static_cast<size_t>(kQueryTile * kKeyTile)), weights(kKeyTile);
    std::vector<T> m(kQueryTile), l(kQueryTile), acc(static_cast<size_t>(kQueryTile * pr.v_dim));
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / (pr.q_heads * query_tiles), h = task / query_tiles % pr.q_heads;
      const int64_t i0 = task % query_tiles * kQueryTile, i1 = std::min(pr.q_len, i0 + kQueryTile);
      const int64_t kh = pr.kv_head(h);
      std::fill(m.begin(), m.end(), minus_infinity);
      std::fill(l.begin(), l.end(), T(0));
      std::fill(acc.begin(), acc.end(), T(0));
      const int64_t key_end = pr.key_end(i1 - 1);
      for (int64_t j0 = 0; j0 < key_end; j0 += kKeyTile) {
        const int64_t j1 = std::min(key_end, j0 + kKeyTile);
        pr.pack_keys(b, kh, j0, j1, key_tile.data());
        pr.score_tile(b, h, i0, i1, j0, j1, key_tile.data(), scores.data());
        for (int64_t i = i0; i < i1; ++i) {
          const int64_t r = i - i0;
          const T* s = scores.data() + r * kKeyTile;
          T tile_max = minus_infinity;
          for (int64_t j = j0; j < j1; ++j) tile_max = std::max(tile_max, s[j - j0]);
          const T m_new = std::max(m[r], tile_max);
          if (m_new == minus_infinity) continue;  // every key so far masked out: nothing to fold
          // exp(-inf) = 0: the first tile with a key rescales nothing.
          const T correction = std::exp(m[r] - m_new);
          T* a = acc.data() + r * pr.v_dim;
          l[r] *= correction;
          for (int64_t d = 0; d < pr.v_dim; ++d) a[d] *= correction;
          dropout_bits::MaskCursor keep(pr.spec.dropout);
          for (int64_t j = j0; j < j1; ++j) {
            T p = std::exp(s[j - j0] - m_new);
            l[r] += p;  // the denominator sums every probability, dropped or not
            if (pr.spec.drop) p = keep.keep(pr.score_index(b, h, i, j)) ? p * keep_scale : T(0);
            weights[static_cast<size_t>(j - j0)] = p;
          }
          add_weighted_rows(weights.data(), j1 - j0, pr.v.row(b, kh, j0), pr.v.row_stride, pr.v_dim, a);
          m[r] = m_new;
        }
      }
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t r = i - i0;
        const int64_t row = (b * pr.q_heads + h) * pr.q_len + i;
        T* o = out + row * pr.v_dim;
        const T inverse = l[r] > T(0) ? T(1) / l[r] : T(0);
        for (int64_t d = 0; d < pr.v_dim; ++d) o[d] = acc[static_cast<size_t>(r * pr.v_dim + d)] * inverse;
        log_sum_exp[row] = l[r] > T(0) ? m[r] + std::log(l[r]) : std::numeric_limits<T>::infinity();
      }
    }
  });
}

// ---- backward ----

// The gradients of one problem, dq/dk/dv contiguous [B, H, S, D]; grad_out, out and
// log_sum_exp contiguous.
template <typename T, typename M>
void attention_backward(const Problem<T, M>& pr, const T* grad_out, const T* out, const T* log_sum_exp, T* dq, T* dk,
                        T* dv) {
  const int64_t rows = pr.batch * pr.q_heads * pr.q_len;
  const T keep_scale = static_cast<T>(pr.spec.dropout.scale());
  const T scale = static_cast<T>(pr.spec.scale);
  const T minus_infinity = -std::numeric_limits<T>::infinity();
  // D_i = dO_i . O_i, once per query row.
  std::vector<T> delta(static_cast<size_t>(rows));
  parallel_for(0, rows, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(pr.v_dim, 1)),
               [&](int64_t begin, int64_t end) {
                 for (int64_t row = begin; row < end; ++row) {
                   T sum = 0;
                   for (int64_t d = 0; d < pr.v_dim; ++d) sum += grad_out[row * pr.v_dim + d] * out[row * pr.v_dim + d];
                   delta[static_cast<size_t>(row)] = sum;
                 }
               });
  // dO rows i0 .. i1 - 1 of head h (contiguous, v_dim apart).
  auto grad_rows = [&](int64_t b, int64_t h, int64_t i0) {
    return grad_out + ((b * pr.q_heads + h) * pr.q_len + i0) * pr.v_dim;
  };
  // Both passes compute, for query rows i0 <= i < i1 of head h against keys j0 <= j < j1 (their
  // packed key and value tiles), the scores s_ij and dP_ij = dO_i . v_j ...
  auto tile_scores = [&](int64_t b, int64_t h, int64_t i0, int64_t i1, int64_t j0, int64_t j1, const T* key_tile,
                         const T* value_tile, T* scores, T* dp) {
    pr.score_tile(b, h, i0, i1, j0, j1, key_tile, scores);
    tile_dots(grad_rows(b, h, i0), pr.v_dim, i1 - i0, value_tile, pr.v_dim, T(1), dp);
  };
  // ... then turn row i of them into the weights of the rows it adds:
  //   pz[j - j0] = P_ij z_ij                          (dV_j += pz dO_i)
  //   ds[j - j0] = scale P_ij (z_ij dP_ij - D_i)      (dK_j += ds q_i, dQ_i += ds k_j)
  // with P_ij = exp(s_ij - L_i), both 0 where P_ij is.
  auto row_weights = [&](int64_t b, int64_t h, int64_t i, int64_t j0, int64_t j1, const T* s, const T* dp, T* pz,
                         T* ds) {
    const int64_t row = (b * pr.q_heads + h) * pr.q_len + i;
    const T lse = log_sum_exp[row], delta_i = delta[static_cast<size_t>(row)];
    dropout_bits::MaskCursor keep(pr.spec.dropout);
    for (int64_t j = j0; j < j1; ++j) {
      const int64_t c = j - j0;
      const T p = s[c] == minus_infinity ? T(0) : std::exp(s[c] - lse);  // lse = +inf (all masked): 0
      const T z = pr.spec.drop ? (keep.keep(pr.score_index(b, h, i, j)) ? keep_scale : T(0)) : T(1);
      pz[c] = p * z;
      ds[c] = p == T(0) ? T(0) : scale * (p * (z * dp[c] - delta_i));
    }
  };

  // dK and dV: a task per tile of keys of one key/value head, over every query of every
  // query head that reads it.
  const int64_t kv_heads = pr.q_heads / pr.spec.group;
  const int64_t key_tiles = (pr.k_len + kKeyTile - 1) / kKeyTile;
  parallel_for(0, pr.batch * kv_heads * key_tiles, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> key_tile(static_cast<size_t>(pr.head_dim * kKeyTile));
    std::vector<T> value_tile(static_cast<size_t>(pr.v_dim * kKeyTile));
    std::vector<T> scores(static_cast<size_t>(kQueryTile * kKeyTile)), dp(static_cast<size_t>(kQueryTile * kKeyTile));
    std::vector<T> pz(kKeyTile), ds(kKeyTile);
    std::vector<T> dk_tile(static_cast<size_t>(kKeyTile * pr.head_dim));
    std::vector<T> dv_tile(static_cast<size_t>(kKeyTile * pr.v_dim));
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / (kv_heads * key_tiles), kh = task / key_tiles % kv_heads;
      const int64_t j0 = task % key_tiles * kKeyTile, j1 = std::min(pr.k_len, j0 + kKeyTile);
      pr.pack_keys(b, kh, j0, j1, key_tile.data());
      pr.pack_values(b, kh, j0, j1, value_tile.data());
      std::fill(dk_tile.begin(), dk_tile.end(), T(0));
      std::fill(dv_tile.begin(), dv_tile.end(), T(0));
      for (int64_t h = kh * pr.spec.group; h < (kh + 1) * pr.spec.group; ++h) {
        // Under is_causal, query i < j0 sees none of these keys.
        for (int64_t i0 = pr.spec.is_causal ? j0 / kQueryTile * kQueryTile : 0; i0 < pr.q_len; i0 += kQueryTile) {
          const int64_t i1 = std::min(pr.q_len, i0 + kQueryTile);
          tile_scores(b, h, i0, i1, j0, j1, key_tile.data(), value_tile.data(), scores.data(), dp.data());
          for (int64_t i = i0; i < i1; ++i) {
            const int64_t r = i - i0;
            row_weights(b, h, i, j0, j1, scores.data() + r * kKeyTile, dp.data() + r * kKeyTile, pz.data(), ds.data());
            add_to_rows(pz.data(), j1 - j0, grad_rows(b, h, i), pr.v_dim, dv_tile.data());
            add_to_rows(ds.data(), j1 - j0, pr.q.row(b, h, i), pr.head_dim, dk_tile.data());
          }
        }
      }
      for (int64_t j = j0; j < j1; ++j) {
        const int64_t row = (b * kv_heads + kh) * pr.k_len + j;
        std::copy_n(dk_tile.data() + (j - j0) * pr.head_dim, pr.head_dim, dk + row * pr.head_dim);
        std::copy_n(dv_tile.data() + (j - j0) * pr.v_dim, pr.v_dim, dv + row * pr.v_dim);
      }
    }
  });

  // dQ: a task per tile of query rows, over the keys they see.
  const int64_t query_tiles = (pr.q_len + kQueryTile - 1) / kQueryTile;
  parallel_for(0, pr.batch * pr.q_heads * query_tiles, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> key_tile(static_cast<size_t>(pr.head_dim * kKeyTile));
    std::vector<T> value_tile(static_cast<size_t>(pr.v_dim * kKeyTile));
    std::vector<T> scores(static_cast<size_t>(kQueryTile * kKeyTile)), dp(static_cast<size_t>(kQueryTile * kKeyTile));
    std::vector<T> pz(kKeyTile), ds(kKeyTile);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / (pr.q_heads * query_tiles), h = task / query_tiles % pr.q_heads;
      const int64_t i0 = task % query_tiles * kQueryTile, i1 = std::min(pr.q_len, i0 + kQueryTile);
      const int64_t kh = pr.kv_head(h);
      T* dq_tile = dq + ((b * pr.q_heads + h) * pr.q_len + i0) * pr.head_dim;
      std::fill(dq_tile, dq_tile + (i1 - i0) * pr.head_dim, T(0));
      const int64_t key_end = pr.key_end(i1 - 1);
      for (int64_t j0 = 0; j0 < key_end; j0 += kKeyTile) {
        const int64_t j1 = std::min(key_end, j0 + kKeyTile);
        pr.pack_keys(b, kh, j0, j1, key_tile.data());
        pr.pack_values(b, kh, j0, j1, value_tile.data());
        tile_scores(b, h, i0, i1, j0, j1, key_tile.data(), value_tile.data(), scores.data(), dp.data());
        for (int64_t i = i0; i < i1; ++i) {
          const int64_t r = i - i0;
          row_weights(b, h, i, j0, j1, scores.data() + r * kKeyTile, dp.data() + r * kKeyTile, pz.data(), ds.data());
          add_weighted_rows(ds.data(), j1 - j0, pr.k.row(b, kh, j0), pr.k.row_stride, pr.head_dim,
                            dq_tile + r * pr.head_dim);
        }
      }
    }
  });
}

// ---- the CPU entry points: half types through float32, dispatch on the dtype and the mask ----

// t in the compute dtype: float32 for the half types, else t itself.
Tensor in_compute_dtype(const Tensor& t) { return is_half(t.dtype()) ? copy_as(t, kFloat32, kCPU) : t; }

// t with a contiguous last dim (the kernels read each row as one run).
Tensor rows_contiguous(const Tensor& t) { return t.size(-1) <= 1 || t.stride(-1) == 1 ? t : t.contiguous(); }

template <typename T, typename M>
Problem<T, M> problem_of(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                         const AttentionSpec& spec) {
  Problem<T, M> pr{head_rows<T>(q), head_rows<T>(k), head_rows<T>(v), q.size(0), q.size(1), q.size(2), k.size(2),
                   q.size(3), v.size(3), nullptr, Shape(4, 0), spec};
  if (mask.defined()) {
    pr.mask = mask.data_ptr<M>();
    pr.mask_strides = broadcast_strides(mask, {q.size(0), q.size(1), q.size(2), k.size(2)});
  }
  return pr;
}

// Calls f(Problem<T, M>) for q's compute type and the mask's type.
template <typename F>
void with_problem(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, const AttentionSpec& spec,
                  F&& f) {
  const bool bool_mask = mask.defined() && mask.dtype() == kBool;
  if (q.dtype() == kFloat64) {
    if (bool_mask)
      f(problem_of<double, bool>(q, k, v, mask, spec));
    else
      f(problem_of<double, double>(q, k, v, mask, spec));
  } else {
    if (bool_mask)
      f(problem_of<float, bool>(q, k, v, mask, spec));
    else
      f(problem_of<float, float>(q, k, v, mask, spec));
  }
}

struct Outputs {
  Tensor out, log_sum_exp;
};

Outputs forward_cpu(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, const AttentionSpec& spec) {
  const Tensor q = rows_contiguous(in_compute_dtype(q_in)), k = rows_contiguous(in_compute_dtype(k_in)),
               v = rows_contiguous(in_compute_dtype(v_in));
  const Tensor mask = spec.mask.defined() && spec.mask.dtype() != kBool ? in_compute_dtype(spec.mask) : spec.mask;
  Tensor out = empty({q.size(0), q.size(1), q.size(2), v.size(3)}, TensorOptions(q.dtype()));
  const Tensor log_sum_exp = empty({q.size(0), q.size(1), q.size(2)}, TensorOptions(q.dtype()));
  with_problem(q, k, v, mask, spec, [&](const auto& pr) {
    using T = std::remove_cv_t<std::remove_pointer_t<decltype(pr.q.data)>>;
    attention_forward(pr, out.data_ptr<T>(), log_sum_exp.data_ptr<T>());
  });
  return {is_half(q_in.dtype()) ? copy_as(out, q_in.dtype(), kCPU) : out, log_sum_exp};
}

tensor_list backward_cpu(const Tensor& grad_in, const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                         const Tensor& out_in, const Tensor& log_sum_exp, const AttentionSpec& spec) {
  const Tensor q = rows_contiguous(in_compute_dtype(q_in)), k = rows_contiguous(in_compute_dtype(k_in)),
               v = rows_contiguous(in_compute_dtype(v_in));
  const Tensor grad = in_compute_dtype(grad_in).contiguous(), out = in_compute_dtype(out_in).contiguous();
  const Tensor mask = spec.mask.defined() && spec.mask.dtype() != kBool ? in_compute_dtype(spec.mask) : spec.mask;
  const TensorOptions options(q.dtype());
  Tensor dq = empty(q.sizes(), options), dk = empty(k.sizes(), options), dv = empty(v.sizes(), options);
  with_problem(q, k, v, mask, spec, [&](const auto& pr) {
    using T = std::remove_cv_t<std::remove_pointer_t<decltype(pr.q.data)>>;
    attention_backward(pr, grad.data_ptr<T>(), out.data_ptr<T>(), log_sum_exp.data_ptr<T>(), dq.data_ptr<T>(),
                       dk.data_ptr<T>(), dv.data_ptr<T>());
  });
  if (!is_half(q_in.dtype())) return {dq, dk, dv};
  return {copy_as(dq, q_in.dtype(), kCPU), copy_as(dk, q_in.dtype(), kCPU), copy_as(dv, q_in.dtype(), kCPU)};
}

// The GPU's kernels (cuda/flash_attention.h) work in the inputs' dtype; L is float32.
Outputs forward_cuda(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionSpec& spec) {
  const TensorOptions on_device = TensorOptions(q.dtype()).device(q.device());
  Outputs o{empty({q.size(0), q.size(1), q.size(2), v.size(3)}, on_device),
            empty({q.size(0), q.size(1), q.size(2)}, on_device.dtype(kFloat32))};
  cuda::flash_attention_forward(q, k, v, spec, o.out, o.log_sum_exp);
  return o;
}

tensor_list backward_cuda(const Tensor& grad, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                          const Tensor& log_sum_exp, const AttentionSpec& spec) {
  const TensorOptions on_device = TensorOptions(q.dtype()).device(q.device());
  Tensor dq = empty(q.sizes(), on_device), dk = empty(k.sizes(), on_device), dv = empty(v.sizes(), on_device);
  cuda::flash_attention_backward(grad, q, k, v, out, log_sum_exp, spec, dq, dk, dv);
  return {dq, dk, dv};
}

struct ScaledDotProductAttention : Function<ScaledDotProductAttention> {
  static constexpr bool is_once_differentiable = true;
  struct State {
    AttentionSpec spec;
  };
  static Tensor forward(Context& ctx, const Tensor& q, const Tensor& k, const Tensor& v, const AttentionSpec& spec) {
    ctx.state<State>().spec = spec;
    const Outputs o = q.device().is_cuda() ? forward_cuda(q, k, v, spec) : forward_cpu(q, k, v, spec);
    // The mask too: a mask modified in place before the backward is then an error, not a
    // silently different gradient.
    ctx.save_for_backward({q, k, v, o.out, o.log_sum_exp, spec.mask});
    return o.out;
  }
  static tensor_list backward(Context& ctx, tensor_list grads) {
    const tensor_list s = ctx.saved_tensors();
    const AttentionSpec& spec = ctx.state<State>().spec;
    const tensor_list g = s[0].device().is_cuda() ? backward_cuda(grads[0], s[0], s[1], s[2], s[3], s[4], spec)
                                                  : backward_cpu(grads[0], s[0], s[1], s[2], s[3], s[4], spec);
    return {ctx.needs_input_grad(0) ? g[0] : Tensor(), ctx.needs_input_grad(1) ? g[1] : Tensor(),
            ctx.needs_input_grad(2) ? g[2] : Tensor(), Tensor()};
  }
};

// The checks the op and its twin share; returns the spec without its dropout stream.
AttentionSpec check_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                              const std::optional<Tensor>& attn_mask, double dropout_p, bool is_causal,
                              std::optional<double> scale, bool enable_gqa) {
  const char* op = "scaled_dot_product_attention";
  check_defined(op, "query", q);
  check_defined(op, "key", k);
  check_defined(op, "value", v);
  check_floating(op, "query", q);
  check_same_dtype(op, "query", q, "key", k);
  check_same_dtype(op, "query", q, "value", v);
  check_same_device(op, "query", q, "key", k);
  check_same_device(op, "query", q, "value", v);
  MG_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4,
           "{}: query, key and value must be 4-D [batch, heads, length, head_dim], got shapes {}, {} and {}", op,
           shape_str(q.sizes()), shape_str(k.sizes()), shape_str(v.sizes()));
  MG_CHECK(q.size(0) == k.size(0) && q.size(0) == v.size(0),
           "{}: query, key and value must have one batch size, got shapes {}, {} and {}", op, shape_str(q.sizes()),
           shape_str(k.sizes()), shape_str(v.sizes()));
  MG_CHECK(q.size(3) == k.size(3), "{}: query and key must have one head dim (their last), got {} and {}", op,
           q.size(3), k.size(3));
  MG_CHECK(k.size(1) == v.size(1) && k.size(2) == v.size(2),
           "{}: key and value must have the same heads and length, got shapes {} and {}", op, shape_str(k.sizes()),
           shape_str(v.sizes()));
  const int64_t q_heads = q.size(1), kv_heads = k.size(1);
  if (enable_gqa)
    MG_CHECK(kv_heads > 0 && q_heads > 0 && q_heads % kv_heads == 0,
             "{}: with enable_gqa, the query heads ({}) must be a positive multiple of the key/value heads ({})", op,
             q_heads, kv_heads);
  else
    MG_CHECK(q_heads == kv_heads,
             "{}: query has {} heads and key/value {}: pass enable_gqa=true for grouped-query attention", op, q_heads,
             kv_heads);
  MG_CHECK(dropout_p >= 0.0 && dropout_p < 1.0, "{}: argument 'dropout_p' must be in [0, 1), got {}", op, dropout_p);
  AttentionSpec spec;
  spec.scale = scale.value_or(1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(q.size(3), 1))));
  spec.is_causal = is_causal;
  spec.group = kv_heads > 0 ? q_heads / kv_heads : 1;
  if (attn_mask) {
    const Tensor& m = *attn_mask;
    check_defined(op, "attn_mask", m);
    MG_CHECK(m.dtype() == kBool || m.dtype() == q.dtype(),
             "{}: argument 'attn_mask' must be bool or of the dtype of 'query' ({}), got {}", op, q.dtype(), m.dtype());
    check_same_device(op, "query", q, "attn_mask", m);
    const Shape scores = {q.size(0), q_heads, q.size(2), k.size(2)};
    MG_CHECK(broadcasts_to(m.sizes(), scores),
             "{}: argument 'attn_mask' has shape {}, which does not broadcast to the scores' shape {}", op,
             shape_str(m.sizes()), shape_str(scores));
    MG_CHECK(!m.requires_grad(),
             "{}: argument 'attn_mask' requires grad, and no gradient is computed for the mask (pass "
             "attn_mask.detach())",
             op);
    spec.mask = m;
  }
  return spec;
}

// k or v [B, Hk, S, D] with each head repeated `group` times: [B, Hk * group, S, D], query
// head h reading head h / group.
Tensor repeat_heads(const Tensor& t, int64_t group) {
  if (group == 1) return t;
  return t.unsqueeze(2).expand({t.size(0), t.size(1), group, t.size(2), t.size(3)})
      .reshape({t.size(0), t.size(1) * group, t.size(2), t.size(3)});
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const std::optional<Tensor>& attn_mask, double dropout_p, bool is_causal,
                                    std::optional<double> scale, bool enable_gqa, Generator* generator) {
  AttentionSpec spec = check_attention(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa);
  // What the GPU's kernels do not run runs as the twin (its scores stored): same arguments,
  // same draws.
  if (q.device().is_cuda() && !cuda::flash_attention_supports(q.dtype(), q.size(3), v.size(3)))
    return composite::scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa,
                                                   generator);
  // As softmax_dropout decides for the [B, Hq, Sq, Sk] scores: a stream only if any is drawn.
  spec.drop = dropout_p > 0.0 && q.size(0) * q.size(1) * q.size(2) * k.size(2) > 0;
  if (spec.drop) {
    const Generator::Stream stream = (generator ? *generator : default_generator()).reserve();
    spec.dropout = dropout_bits::Mask{stream.seed, stream.offset, dropout_bits::threshold_of(dropout_p)};
  }
  return ScaledDotProductAttention::apply(q, k, v, spec);
}

namespace composite {

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const std::optional<Tensor>& attn_mask, double dropout_p, bool is_causal,
                                    std::optional<double> scale, bool enable_gqa, Generator* generator) {
  const AttentionSpec spec = check_attention(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa);
  const Tensor keys = repeat_heads(k, spec.group), values = repeat_heads(v, spec.group);
  const Tensor scores = matmul(q, keys.transpose(-1, -2));
  const Tensor p =
      minigrad::softmax_dropout(scores, -1, dropout_p, /*training=*/true, attn_mask, is_causal, spec.scale, generator);
  return matmul(p, values);
}

}  // namespace composite

}  // namespace minigrad
