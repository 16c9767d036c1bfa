// scaled_dot_product_attention on the CPU (the tiled online-softmax forward and its two-pass
// backward, ops/attention.cpp): values and dQ, dK, dV against the composite twin
// (softmax_dropout(q k^T) v, the scores stored) for every feature and their combinations
// (lengths that are not multiples of the tiles, Sq != Sk, decoding with Sq = 1, causal with
// Sq < Sk and Sq > Sk, grouped-query heads, bool and additive masks of several broadcast
// shapes, dropout, a value head dim other than the key's); against a float64 loop written
// here from the definition; the dropout mask bit for bit softmax_dropout's; strided (B, S, H,
// D) views read in place; fully masked rows; gradcheck in float64; the half types and float32
// against float64; the errors.
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <minigrad/core/determinism.h>
#include <minigrad/core/generator.h>

#include "tests/test_support.h"

using namespace minigrad;
using namespace minigrad::test;

namespace {

enum class MaskKind { None, Padding, Additive, Full };

struct Case {
  int64_t batch, q_heads, kv_heads, q_len, k_len, head_dim, v_dim;
  bool is_causal;
  MaskKind mask;
  double p;
};

std::string describe(const Case& c) {
  return fmt::format("B {} Hq {} Hk {} Sq {} Sk {} D {} Dv {} causal {} mask {} p {}", c.batch, c.q_heads, c.kv_heads,
                     c.q_len, c.k_len, c.head_dim, c.v_dim, c.is_causal, static_cast<int>(c.mask), c.p);
}

// Padding: [B, 1, 1, Sk] bool, batch b attending to its first Sk - 2b keys. Additive: [Sq, Sk]
// random values. Full: [1, Hq, Sq, Sk] bool, a third of the scores masked out at random and
// query row 0 of head 0 masked out entirely.
std::optional<Tensor> make_mask(const Case& c) {
  switch (c.mask) {
    case MaskKind::None: return std::nullopt;
    case MaskKind::Padding: {
      std::vector<int64_t> lengths;
      for (int64_t b = 0; b < c.batch; ++b) lengths.push_back(std::max<int64_t>(1, c.k_len - 2 * b));
      return lt(arange(c.k_len).reshape({1, 1, 1, c.k_len}), from_vector(lengths, {c.batch, 1, 1, 1}));
    }
    case MaskKind::Additive: return randn({c.q_len, c.k_len}, kFloat64);
    case MaskKind::Full: {
      Tensor keep = gt(rand({1, c.q_heads, c.q_len, c.k_len}, kFloat64), 1.0 / 3.0);
      keep.select(1, 0).select(1, 0).fill_(0.0);
      return keep;
    }
  }
  return std::nullopt;
}

struct Inputs {
  Tensor q, k, v, dy;
  std::optional<Tensor> mask;
};

Inputs make_inputs(const Case& c) {
  Inputs in;
  in.q = randn({c.batch, c.q_heads, c.q_len, c.head_dim}, kFloat64);
  in.k = randn({c.batch, c.kv_heads, c.k_len, c.head_dim}, kFloat64);
  in.v = randn({c.batch, c.kv_heads, c.k_len, c.v_dim}, kFloat64);
  in.dy = randn({c.batch, c.q_heads, c.q_len, c.v_dim}, kFloat64);
  in.mask = make_mask(c);
  return in;
}

using Attention = Tensor (*)(const Tensor&, const Tensor&, const Tensor&, const std::optional<Tensor>&, double, bool,
                             std::optional<double>, bool, Generator*);

// O and dQ, dK, dV of `attention` on fresh leaves, its dropout drawn from a generator seeded
// `seed` (the same draw for both implementations).
tensor_list run(Attention attention, const Case& c, const Inputs& in, uint64_t seed) {
  const Tensor q = in.q.detach().requires_grad_(), k = in.k.detach().requires_grad_(),
               v = in.v.detach().requires_grad_();
  Generator generator(seed);
  const Tensor out = attention(q, k, v, in.mask, c.p, c.is_causal, std::nullopt, c.q_heads != c.kv_heads, &generator);
  out.backward(in.dy);
  return {out.detach(), q.grad(), k.grad(), v.grad()};
}

const Case kCases[] = {
    {2, 2, 2, 7, 7, 8, 8, false, MaskKind::None, 0.0},
    {1, 3, 3, 33, 65, 16, 16, false, MaskKind::None, 0.0},      // past one tile of queries and of keys
    {2, 2, 2, 40, 70, 8, 4, true, MaskKind::None, 0.0},        // causal, Sq < Sk; Dv != D
    {1, 2, 2, 70, 40, 8, 8, true, MaskKind::None, 0.0},        // causal, Sq > Sk
    {2, 4, 2, 9, 11, 8, 8, false, MaskKind::None, 0.0},        // grouped-query heads
    {2, 4, 1, 5, 13, 8, 8, false, MaskKind::Padding, 0.0},     // one key/value head, a padding mask
    {1, 2, 2, 1, 17, 8, 8, false, MaskKind::Additive, 0.0},    // decoding: one query
    {1, 2, 2, 20, 20, 4, 4, false, MaskKind::None, 0.5},       // dropout
    {2, 4, 2, 35, 66, 8, 8, true, MaskKind::Full, 0.25},       // all of it at once
    {1, 1, 1, 3, 0, 4, 4, false, MaskKind::None, 0.0},         // no keys: every row masked out
};

}  // namespace

TEST_CASE("scaled_dot_product_attention: against its twin in value and dQ, dK, dV, every feature and combinations") {
  manual_seed(1200);
  for (const Case& c : kCases) {
    CAPTURE(describe(c));
    const Inputs in = make_inputs(c);
    const tensor_list fused = run(scaled_dot_product_attention, c, in, 77);
    const tensor_list twin = run(composite::scaled_dot_product_attention, c, in, 77);
    for (size_t i = 0; i < fused.size(); ++i) {
      CAPTURE(i);
      REQUIRE(fused[i].sizes() == twin[i].sizes());
      CHECK(!isnan(fused[i]).any().item<bool>());
      CHECK_ALLCLOSE(fused[i], twin[i], 1e-10, 1e-10);
    }
  }
}

TEST_CASE("scaled_dot_product_attention: against a float64 loop from the definition") {
  manual_seed(1201);
  const Case c{2, 4, 2, 6, 9, 5, 3, true, MaskKind::Additive, 0.0};
  const Inputs in = make_inputs(c);
  const double scale = 0.7;
  const Tensor out = scaled_dot_product_attention(in.q, in.k, in.v, in.mask, 0.0, true, scale, true);
  const std::vector<double> q = in.q.to_vector<double>(), k = in.k.to_vector<double>(), v = in.v.to_vector<double>();
  const std::vector<double> mask = in.mask->to_vector<double>();
  std::vector<double> expected;
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t h = 0; h < c.q_heads; ++h)
      for (int64_t i = 0; i < c.q_len; ++i) {
        const int64_t kh = h / (c.q_heads / c.kv_heads);
        std::vector<double> s(static_cast<size_t>(c.k_len), -std::numeric_limits<double>::infinity());
        double max = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j <= std::min(i, c.k_len - 1); ++j) {
          double dot = 0.0;
          for (int64_t d = 0; d < c.head_dim; ++d)
            dot += q[static_cast<size_t>(((b * c.q_heads + h) * c.q_len + i) * c.head_dim + d)] *
                   k[static_cast<size_t>(((b * c.kv_heads + kh) * c.k_len + j) * c.head_dim + d)];
          s[static_cast<size_t>(j)] = scale * dot + mask[static_cast<size_t>(i * c.k_len + j)];
          max = std::max(max, s[static_cast<size_t>(j)]);
        }
        double total = 0.0;
        for (double& x : s) total += (x = std::exp(x - max));
        for (int64_t d = 0; d < c.v_dim; ++d) {
          double o = 0.0;
          for (int64_t j = 0; j < c.k_len; ++j)
            o += s[static_cast<size_t>(j)] / total * v[static_cast<size_t>(((b * c.kv_heads + kh) * c.k_len + j) * c.v_dim + d)];
          expected.push_back(o);
        }
      }
  CHECK_ALLCLOSE(out, from_vector(expected, out.sizes()), 1e-12, 1e-12);
}

TEST_CASE("scaled_dot_product_attention: the dropped scores are softmax_dropout's, bit for bit") {
  manual_seed(1202);
  // With V the identity (Sk = Dv), O = P * keep / (1 - p): softmax_dropout's output itself.
  const int64_t batch = 2, heads = 3, q_len = 37, k_len = 70;
  const Tensor q = randn({batch, heads, q_len, 8}, kFloat64), k = randn({batch, heads, k_len, 8}, kFloat64);
  const Tensor v = eye(k_len, kFloat64).expand({batch, heads, k_len, k_len});
  for (bool is_causal : {false, true}) {
    CAPTURE(is_causal);
    Generator a(5), b(5);
    const Tensor out = scaled_dot_product_attention(q, k, v, std::nullopt, 0.3, is_causal, std::nullopt, false, &a);
    const Tensor scores = matmul(q, k.transpose(-1, -2));
    const Tensor expected = softmax_dropout(scores, -1, 0.3, true, std::nullopt, is_causal,
                                            1.0 / std::sqrt(8.0), &b);
    CHECK(equal(eq(out, 0.0), eq(expected, 0.0)));
    CHECK_ALLCLOSE(out, expected, 1e-12, 1e-12);
    // Each call draws its own stream: the next call drops other scores.
    const Tensor again = scaled_dot_product_attention(q, k, v, std::nullopt, 0.3, is_causal, std::nullopt, false, &a);
    CHECK(!equal(eq(again, 0.0), eq(out, 0.0)));
  }
}

TEST_CASE("scaled_dot_product_attention: (B, S, H, D) views of one projection are read in place, same results") {
  manual_seed(1203);
  const int64_t batch = 2, len = 19, heads = 3, dim = 8;
  const Tensor qkv = randn({batch, len, 3, heads, dim}, kFloat64);
  auto head_view = [&](int64_t which) { return qkv.select(2, which).transpose(1, 2); };  // [B, H, S, D], strided
  const Tensor dy = randn({batch, heads, len, dim}, kFloat64);
  auto grads = [&](const Tensor& q, const Tensor& k, const Tensor& v) {
    const Tensor ql = q.detach().requires_grad_(), kl = k.detach().requires_grad_(), vl = v.detach().requires_grad_();
    const Tensor out = scaled_dot_product_attention(ql, kl, vl, std::nullopt, 0.0, true);
    out.backward(dy);
    return tensor_list{out.detach(), ql.grad(), kl.grad(), vl.grad()};
  };
  REQUIRE(!head_view(0).is_contiguous());
  const tensor_list strided = grads(head_view(0), head_view(1), head_view(2));
  const tensor_list packed = grads(head_view(0).contiguous(), head_view(1).contiguous(), head_view(2).contiguous());
  for (size_t i = 0; i < strided.size(); ++i) {
    CAPTURE(i);
    CHECK(equal(strided[i], packed[i]));
  }
}

TEST_CASE("scaled_dot_product_attention: a query with every key masked out gets zeros, and so do its gradients") {
  manual_seed(1204);
  const Tensor q = randn({1, 2, 4, 8}, kFloat64).requires_grad_();
  const Tensor k = randn({1, 2, 6, 8}, kFloat64).requires_grad_(), v = randn({1, 2, 6, 8}, kFloat64).requires_grad_();
  Tensor mask = ones({4, 6}, kBool);
  mask.select(0, 2).fill_(0.0);  // query 2 sees nothing
  const Tensor out = scaled_dot_product_attention(q, k, v, mask);
  CHECK(equal(out.select(2, 2), zeros({1, 2, 8}, kFloat64)));
  out.backward(randn(out.sizes(), kFloat64));
  for (const Tensor& g : {q.grad(), k.grad(), v.grad()}) CHECK(!isnan(g).any().item<bool>());
  CHECK(equal(q.grad().select(2, 2), zeros({1, 2, 8}, kFloat64)));
}

TEST_CASE("scaled_dot_product_attention: gradcheck in float64, causal + grouped-query + mask + dropout") {
  manual_seed(1205);
  const Tensor q = randn({1, 4, 5, 3}, kFloat64).requires_grad_();
  const Tensor k = randn({1, 2, 7, 3}, kFloat64).requires_grad_(), v = randn({1, 2, 7, 2}, kFloat64).requires_grad_();
  const Tensor mask = gt(rand({5, 7}, kFloat64), 0.2);
  // A generator made afresh in each call: every evaluation drops the same scores.
  const auto attention = [&](const tensor_list& t) {
    Generator generator(3);
    return scaled_dot_product_attention(t[0], t[1], t[2], mask, 0.3, true, std::nullopt, true, &generator);
  };
  CHECK_GRADCHECK(attention, (tensor_list{q, k, v}));
  const auto plain = [](const tensor_list& t) { return scaled_dot_product_attention(t[0], t[1], t[2]); };
  CHECK_GRADCHECK(plain, (tensor_list{q, k.narrow(1, 0, 1).expand({1, 4, 7, 3}).contiguous(),
                                       v.narrow(1, 0, 1).expand({1, 4, 7, 2}).contiguous()}));
}

TEST_CASE("scaled_dot_product_attention: float32, float16 and bfloat16 against float64 on the same rounded inputs") {
  manual_seed(1206);
  const Case c{2, 4, 2, 35, 70, 16, 16, true, MaskKind::Padding, 0.0};
  const Inputs in = make_inputs(c);
  for (DType dtype : {kFloat32, kFloat16, kBFloat16}) {
    CAPTURE(dtype_name(dtype));
    Inputs rounded = in;
    for (Tensor* t : {&rounded.q, &rounded.k, &rounded.v, &rounded.dy}) *t = t->to(dtype);
    const tensor_list low = run(scaled_dot_product_attention, c, rounded, 1);
    for (Tensor* t : {&rounded.q, &rounded.k, &rounded.v, &rounded.dy}) *t = t->to(kFloat64);
    const tensor_list exact = run(scaled_dot_product_attention, c, rounded, 1);
    const double tol = dtype == kFloat32 ? 1e-5 : (dtype == kFloat16 ? 5e-3 : 4e-2);
    for (size_t i = 0; i < low.size(); ++i) {
      CAPTURE(i);
      CHECK(low[i].dtype() == dtype);
      CHECK_ALLCLOSE(low[i].to(kFloat64), exact[i], tol, tol);
    }
  }
}

TEST_CASE("scaled_dot_product_attention: errors name the argument") {
  const Tensor q = randn({1, 2, 3, 4}), k = randn({1, 2, 5, 4}), v = randn({1, 2, 5, 4});
  const char* op = "scaled_dot_product_attention";
  CHECK_THROWS_CONTAINING(scaled_dot_product_attention(q, randn({1, 2, 5, 8}), v),
                          fmt::format("{}: query and key must have one head dim (their last), got 4 and 8", op));
  CHECK_THROWS_CONTAINING(scaled_dot_product_attention(q, k, randn({1, 2, 6, 4})),
                          "key and value must have the same heads and length");
  CHECK_THROWS_CONTAINING(scaled_dot_product_attention(q, k, v, ones({4, 5}, kBool)),
                          "argument 'attn_mask' has shape [4, 5], which does not broadcast to the scores' shape "
                          "[1, 2, 3, 5]");
  CHECK_THROWS_CONTAINING(scaled_dot_product_attention(randn({1, 3, 3, 4}), k, v, std::nullopt, 0.0, false,
                                                       std::nullopt, true),
                          "with enable_gqa, the query heads (3) must be a positive multiple of the key/value "
                          "heads (2)");
  CHECK_THROWS_CONTAINING(scaled_dot_product_attention(randn({1, 0, 3, 4}), k, v, std::nullopt, 0.0, false,
                                                       std::nullopt, true),
                          "with enable_gqa, the query heads (0) must be a positive multiple of the key/value "
                          "heads (2)");
  CHECK_THROWS_CONTAINING(scaled_dot_product_attention(randn({1, 4, 3, 4}), k, v),
                          "query has 4 heads and key/value 2: pass enable_gqa=true");
  CHECK_THROWS_CONTAINING(scaled_dot_product_attention(randn({2, 3, 4}), k, v), "must be 4-D");
  CHECK_THROWS_CONTAINING(scaled_dot_product_attention(q, k.to(kFloat64), v), "expected one dtype");
  CHECK_THROWS_CONTAINING(scaled_dot_product_attention(q, k, v, std::nullopt, 1.0), "'dropout_p' must be in [0, 1)");
  CHECK_THROWS_CONTAINING(scaled_dot_product_attention(q, k, v, ones({3, 5}, kInt64)),
                          "argument 'attn_mask' must be bool or of the dtype of 'query'");
  CHECK_THROWS_CONTAINING(scaled_dot_product_attention(q, k, v, randn({3, 5}).requires_grad_()),
                          "argument 'attn_mask' requires grad");
  CHECK_THROWS_CONTAINING(composite::scaled_dot_product_attention(q, randn({1, 2, 5, 8}), v),
                          "query and key must have one head dim");
}

TEST_CASE("use_deterministic_algorithms: off by default, a guard restores the earlier setting") {
  CHECK_FALSE(are_deterministic_algorithms_enabled());
  {
    const DeterministicAlgorithmsGuard on;
    CHECK(are_deterministic_algorithms_enabled());
    {
      const DeterministicAlgorithmsGuard off(false);
      CHECK_FALSE(are_deterministic_algorithms_enabled());
    }
    CHECK(are_deterministic_algorithms_enabled());
  }
  CHECK_FALSE(are_deterministic_algorithms_enabled());
  use_deterministic_algorithms(true);
  CHECK(are_deterministic_algorithms_enabled());
  use_deterministic_algorithms(false);
  CHECK_FALSE(are_deterministic_algorithms_enabled());
}
