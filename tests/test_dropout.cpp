// dropout and softmax_dropout on the CPU: the mask's formula against Philox read by hand, the
// fused ops against their composite twins (values and gradients, every option), gradcheck
// with a generator re-seeded per call, the kept fraction, fresh masks per call, fully masked
// rows, the cases that drop nothing, and the errors.
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <minigrad/core/generator.h>
#include <minigrad/kernels/dropout.h>
#include <minigrad/kernels/philox.h>

#include "tests/test_support.h"

using namespace minigrad;
using namespace minigrad::test;

namespace {

constexpr uint64_t kSeed = 0xd20d;

// The options of one softmax_dropout call.
struct Case {
  std::string name;
  int64_t dim = -1;
  std::optional<Tensor> mask;
  bool is_causal = false;
  std::optional<double> scale;
  bool transposed = false;  // x a transposed (non-contiguous) view
};

// A bool mask of `sizes` with column 0 always true (no fully masked row), about half true.
Tensor bool_mask(const Shape& sizes) {
  Tensor u = rand(sizes, kFloat64);
  std::vector<double> v = u.to_vector<double>();
  const int64_t cols = sizes.back();
  for (size_t i = 0; i < v.size(); ++i) v[i] = (i % static_cast<size_t>(cols) == 0 || v[i] < 0.5) ? 1.0 : 0.0;
  return from_vector(v, sizes).to(kBool);
}

std::vector<Case> cases(DType dtype) {
  std::vector<Case> out;
  const std::optional<Tensor> none;
  const std::optional<double> one;
  out.push_back({"plain", -1, none, false, one, false});
  out.push_back({"dim 0", 0, none, false, one, false});
  out.push_back({"middle dim", 1, none, false, one, false});
  out.push_back({"scale", -1, none, false, 0.125, false});
  out.push_back({"bool mask broadcast", -1, bool_mask({3, 1, 7}), false, one, false});
  out.push_back({"additive mask broadcast", -1, randn({1, 7}, dtype), false, one, false});
  out.push_back({"causal", -1, none, true, one, false});
  out.push_back({"causal, bool mask, scale", -1, bool_mask({1, 5, 7}), true, 0.5, false});
  out.push_back({"additive mask along dim 0", 0, randn({3, 1, 1}, dtype), false, 2.0, false});
  out.push_back({"transposed x", -1, none, false, one, true});
  out.push_back({"transposed x, dim 1, mask", 1, randn({5, 1}, dtype), false, one, true});
  return out;
}

// x of shape [3, 5, 7], as a contiguous tensor or a transposed view.
Tensor input(DType dtype, bool transposed) {
  if (transposed) return randn({3, 7, 5}, dtype).transpose(1, 2);
  return randn({3, 5, 7}, dtype);
}

Tensor run(bool fused, const Tensor& x, const Case& c, double p, Generator& gen) {
  return fused ? softmax_dropout(x, c.dim, p, true, c.mask, c.is_causal, c.scale, &gen)
               : composite::softmax_dropout(x, c.dim, p, true, c.mask, c.is_causal, c.scale, &gen);
}

}  // namespace

TEST_CASE("the mask formula: element 8g + k reads 16-bit half k % 2 of word k / 2 of Philox block g") {
  const uint32_t threshold = dropout_bits::threshold_of(0.3);
  CHECK(threshold == 19661);  // round(0.3 * 65536) = round(19660.8)
  CHECK(dropout_bits::threshold_of(0.0) == 0);
  CHECK(dropout_bits::threshold_of(0.99999999) == 65535);
  CHECK(dropout_bits::keep_scale(threshold) == doctest::Approx(65536.0 / (65536.0 - 19661.0)));
  int kept = 0;
  for (uint64_t i = 0; i < 64; ++i) {
    const philox::Uint4 block = philox::random_block(kSeed, 7, i / 8);
    const uint32_t words[4] = {block.x, block.y, block.z, block.w};
    const uint32_t k = static_cast<uint32_t>(i % 8);
    const uint32_t bits = k % 2 == 0 ? (words[k / 2] & 0xFFFFu) : (words[k / 2] >> 16);
    CHECK(dropout_bits::keep(kSeed, 7, i, threshold) == (bits >= threshold));
    kept += dropout_bits::keep(kSeed, 7, i, threshold);
  }
  CHECK(kept > 0);
  CHECK(kept < 64);
}

TEST_CASE("dropout: against its twin, values and gradients, float32 and float64") {
  manual_seed(1);
  for (DType dtype : {kFloat64, kFloat32}) {
    for (double p : {0.0, 0.1, 0.5}) {
      CAPTURE(dtype);
      CAPTURE(p);
      const Tensor base = randn({4, 6, 9}, dtype);
      for (const Tensor& x : {base, base.transpose(0, 2)}) {
        Generator g1(kSeed), g2(kSeed);
        Tensor a = x.detach().requires_grad_(), b = x.detach().requires_grad_();
        const Tensor ya = dropout(a, p, true, &g1), yb = composite::dropout(b, p, true, &g2);
        CHECK(same_bits(ya, yb));
        const Tensor dy = randn(x.sizes(), dtype);
        ya.backward(dy);
        yb.backward(dy);
        CHECK(same_bits(a.grad(), b.grad()));
        CHECK(g1.offset() == g2.offset());
      }
    }
  }
}

TEST_CASE("dropout: forward and backward drop the same elements, scaled by 1 / (1 - p_q)") {
  Generator gen(kSeed);
  const double p = 0.3;
  const double keep_scale = 65536.0 / (65536.0 - 19661.0);
  Tensor x = (rand({1000}, kFloat64) + 1.0).requires_grad_();
  Tensor y = dropout(x, p, true, &gen);
  y.backward(ones_like(y));
  const std::vector<double> xv = x.to_vector<double>(), yv = y.to_vector<double>(), gv = x.grad().to_vector<double>();
  int64_t dropped = 0;
  for (size_t i = 0; i < xv.size(); ++i) {
    if (yv[i] == 0.0) {
      ++dropped;
      CHECK(gv[i] == 0.0);
    } else {
      CHECK(yv[i] == doctest::Approx(xv[i] * keep_scale).epsilon(1e-15));
      CHECK(gv[i] == doctest::Approx(keep_scale).epsilon(1e-15));
    }
  }
  CHECK(dropped > 200);
  CHECK(dropped < 400);
}

TEST_CASE("dropout: the kept fraction is 1 - p_q within 5 sigma over 1e7 elements") {
  const int64_t n = 10000000;
  for (double p : {0.1, 0.5}) {
    CAPTURE(p);
    Generator gen(kSeed);
    const Tensor y = dropout(ones({n}, kFloat32), p, true, &gen);
    const double kept = ne(y, 0.0).to(kFloat64).sum().item<double>();
    const double p_q = dropout_bits::threshold_of(p) / 65536.0;
    const double sigma = std::sqrt(n * p_q * (1.0 - p_q));
    CHECK(std::fabs(kept - n * (1.0 - p_q)) < 5.0 * sigma);
  }
}

TEST_CASE("dropout: two calls draw different masks; one seed draws the same one") {
  Generator gen(kSeed);
  const Tensor x = ones({4096}, kFloat32);
  const Tensor first = dropout(x, 0.5, true, &gen);
  const Tensor second = dropout(x, 0.5, true, &gen);
  CHECK(!same_bits(first, second));
  gen.manual_seed(kSeed);
  CHECK(same_bits(dropout(x, 0.5, true, &gen), first));
  // The default generator when none is given.
  manual_seed(kSeed);
  const Tensor from_default = dropout(x, 0.5);
  manual_seed(kSeed);
  CHECK(same_bits(dropout(x, 0.5), from_default));
}

TEST_CASE("softmax_dropout: two calls draw different masks, each its own stream") {
  Generator gen(kSeed);
  const Tensor x = zeros({16, 256}, kFloat32);
  const Tensor first = softmax_dropout(x, -1, 0.5, true, std::nullopt, false, std::nullopt, &gen);
  const Tensor second = softmax_dropout(x, -1, 0.5, true, std::nullopt, false, std::nullopt, &gen);
  CHECK(gen.offset() == 2);
  CHECK(!same_bits(eq(first, 0.0), eq(second, 0.0)));
  CHECK(same_bits(eq(first, 0.0), eq(composite::dropout_mask(x.sizes(), 0.5, kSeed, 0, kFloat32), 0.0)));
  CHECK(same_bits(eq(second, 0.0), eq(composite::dropout_mask(x.sizes(), 0.5, kSeed, 1, kFloat32), 0.0)));
}

TEST_CASE("dropout: p = 0 and training = false return x and draw nothing") {
  Generator gen(kSeed);
  const Tensor x = randn({3, 4}, kFloat32).requires_grad_();
  CHECK(dropout(x, 0.0, true, &gen).is_same(x));
  CHECK(dropout(x, 0.5, false, &gen).is_same(x));
  CHECK(gen.offset() == 0);
  (void)dropout(x, 0.5, true, &gen);
  CHECK(gen.offset() == 1);
}

TEST_CASE("softmax_dropout: against its twin in value and gradient, every option, float32 and float64") {
  manual_seed(2);
  for (DType dtype : {kFloat64, kFloat32}) {
    const double tol = dtype == kFloat64 ? 1e-12 : 2e-6;
    for (const Case& c : cases(dtype)) {
      for (double p : {0.0, 0.1, 0.5}) {
        CAPTURE(dtype);
        CAPTURE(c.name);
        CAPTURE(p);
        const Tensor x = input(dtype, c.transposed);
        Tensor a = x.detach().requires_grad_(), b = x.detach().requires_grad_();
        Generator g1(kSeed), g2(kSeed);
        const Tensor ya = run(true, a, c, p, g1);
        const Tensor yb = run(false, b, c, p, g2);
        CHECK(g1.offset() == g2.offset());
        CHECK(ya.sizes() == x.sizes());
        CHECK_ALLCLOSE(ya, yb, tol, tol);
        const Tensor dy = randn(x.sizes(), dtype);
        ya.backward(dy);
        yb.backward(dy);
        CHECK_ALLCLOSE(a.grad(), b.grad(), tol, tol);
      }
    }
  }
}

TEST_CASE("softmax_dropout: the dropped elements are those of x's row-major order, whatever dim and layout") {
  manual_seed(3);
  const Tensor x = randn({4, 6, 8}, kFloat64);
  Generator gen(kSeed);
  const Tensor keep = composite::dropout_mask(x.sizes(), 0.5, gen.seed(), 0, TensorOptions(kFloat64));
  for (int64_t dim : {0, 1, 2}) {
    for (bool transposed : {false, true}) {
      CAPTURE(dim);
      CAPTURE(transposed);
      const Tensor in = transposed ? x.transpose(0, 2).contiguous().transpose(0, 2) : x;
      gen.manual_seed(kSeed);
      const Tensor y = softmax_dropout(in, dim, 0.5, true, std::nullopt, false, std::nullopt, &gen);
      CHECK(same_bits(ne(y, 0.0), ne(keep, 0.0)));
    }
  }
}

TEST_CASE("softmax_dropout: gradcheck in float64 with a generator re-seeded per call") {
  manual_seed(4);
  const Tensor x = randn({2, 3, 5}, kFloat64).requires_grad_();
  const Tensor additive = randn({3, 1}, kFloat64);
  const Tensor keep = bool_mask({2, 1, 5});
  for (double p : {0.0, 0.3}) {
    CAPTURE(p);
    for (int64_t dim : {-1, 0}) {
      CAPTURE(dim);
      CHECK_GRADCHECK(
          [&](const tensor_list& t) {
            Generator gen(kSeed);
            return softmax_dropout(t[0], dim, p, true, additive, false, 0.7, &gen);
          },
          tensor_list{x});
    }
    CHECK_GRADCHECK(
        [&](const tensor_list& t) {
          Generator gen(kSeed);
          return softmax_dropout(t[0], -1, p, true, keep, true, std::nullopt, &gen);
        },
        tensor_list{x.transpose(1, 2).contiguous().transpose(1, 2).detach().requires_grad_()});
    CHECK_GRADCHECK(
        [&](const tensor_list& t) {
          Generator gen(kSeed);
          return dropout(t[0], p, true, &gen);
        },
        tensor_list{x});
  }
}

TEST_CASE("softmax_dropout: a fully masked row gives zeros forward and backward, no NaN") {
  manual_seed(5);
  Tensor x = randn({2, 3, 4}, kFloat32).requires_grad_();
  std::vector<double> m(24, 1.0);
  for (int j = 0; j < 4; ++j) m[static_cast<size_t>(4 + j)] = 0.0;  // row (0, 1) fully masked
  const Tensor mask = from_vector(m, {2, 3, 4}).to(kBool);
  const Tensor additive = where(mask, 0.0, full({}, -std::numeric_limits<double>::infinity(), kFloat32));
  for (const Tensor& mk : {mask, additive}) {
    for (double p : {0.0, 0.2}) {
      CAPTURE(p);
      x.mutable_grad() = Tensor();
      Generator gen(kSeed);
      const Tensor y = softmax_dropout(x, -1, p, true, mk, false, std::nullopt, &gen);
      y.backward(randn(y.sizes(), kFloat32));
      CHECK(isfinite(y).all().item<bool>());
      CHECK(isfinite(x.grad()).all().item<bool>());
      CHECK(eq(y.select(0, 0).select(0, 1), 0.0).all().item<bool>());
      CHECK(eq(x.grad().select(0, 0).select(0, 1), 0.0).all().item<bool>());
      // The other rows are the twin's.
      Generator twin_gen(kSeed);
      const Tensor twin = composite::softmax_dropout(x.detach(), -1, p, true, mk, false, std::nullopt, &twin_gen);
      CHECK(isnan(twin.select(0, 0).select(0, 1)).all().item<bool>());
      CHECK_ALLCLOSE(y.select(0, 1), twin.select(0, 1), 1e-6, 1e-7);
    }
  }
}

TEST_CASE("softmax_dropout: x and the mask are saved; changed in place before the backward, they are an error") {
  manual_seed(8);
  const Tensor leaf = randn({3, 5}, kFloat32).requires_grad_();
  {
    Tensor h = leaf * 2.0;
    const Tensor y = softmax_dropout(h, -1, 0.1);
    {
      NoGradGuard no_grad;  // an update of a tensor with history, made outside the tape
      h.mul_(3.0);
    }
    CHECK_THROWS_CONTAINING(y.sum().backward(), "was modified by an in-place op after it was saved");
  }
  {
    Tensor mask = randn({5}, kFloat32);
    const Tensor y = softmax_dropout(leaf, -1, 0.1, true, mask);
    mask.mul_(3.0);
    CHECK_THROWS_CONTAINING(y.sum().backward(), "was modified by an in-place op after it was saved");
  }
}

TEST_CASE("softmax_dropout: p = 0 and training = false equal softmax of scale * x + mask and draw nothing") {
  manual_seed(6);
  const Tensor x = randn({3, 4, 6}, kFloat64);
  const Tensor additive = randn({6}, kFloat64);
  Generator gen(kSeed);
  const Tensor expected = softmax(x * 0.5 + additive, -1);
  CHECK_ALLCLOSE(softmax_dropout(x, -1, 0.0, true, additive, false, 0.5, &gen), expected, 1e-14, 1e-15);
  CHECK_ALLCLOSE(softmax_dropout(x, -1, 0.4, false, additive, false, 0.5, &gen), expected, 1e-14, 1e-15);
  CHECK_ALLCLOSE(softmax_dropout(x, 1, 0.0, false), softmax(x, 1), 1e-14, 1e-15);
  CHECK(gen.offset() == 0);
  (void)softmax_dropout(x, -1, 0.4, true, std::nullopt, false, std::nullopt, &gen);
  CHECK(gen.offset() == 1);
}

TEST_CASE("softmax_dropout: float16 and bfloat16 on the CPU against float64") {
  manual_seed(7);
  const Tensor x = randn({4, 33}, kFloat64);
  const Tensor mask = bool_mask({4, 33});
  for (DType dtype : {kFloat16, kBFloat16}) {
    CAPTURE(dtype);
    Generator g1(kSeed), g2(kSeed);
    const Tensor low = softmax_dropout(x.to(dtype), -1, 0.2, true, mask, false, 0.5, &g1);
    const Tensor high = softmax_dropout(x.to(dtype).to(kFloat64), -1, 0.2, true, mask, false, 0.5, &g2);
    CHECK(low.dtype() == dtype);
    CHECK_ALLCLOSE(low.to(kFloat64), high, 2e-2, 1e-3);
  }
}

TEST_CASE("softmax_dropout and dropout: 0-d and empty inputs") {
  Generator gen(kSeed);
  CHECK(softmax_dropout(full({}, 3.0, kFloat64), 0, 0.0).item<double>() == 1.0);
  const Tensor empty_rows = softmax_dropout(zeros({0, 5}, kFloat32), -1, 0.5, true, std::nullopt, false,
                                            std::nullopt, &gen);
  CHECK(empty_rows.sizes() == Shape{0, 5});
  CHECK(dropout(zeros({0, 5}, kFloat32), 0.5, true, &gen).sizes() == Shape{0, 5});
  CHECK(gen.offset() == 0);
}

TEST_CASE("dropout and softmax_dropout: errors name the op and the argument") {
  const Tensor x = randn({2, 3, 4}, kFloat32);
  CHECK_THROWS_CONTAINING(dropout(x, 1.0), "dropout: argument 'p' must be in [0, 1), got 1");
  CHECK_THROWS_CONTAINING(dropout(x, -0.1), "dropout: argument 'p' must be in [0, 1)");
  CHECK_THROWS_CONTAINING(dropout(ones({3}, kInt64), 0.5),
                          "dropout: expected a floating-point tensor for argument 'self'");
  CHECK_THROWS_CONTAINING(softmax_dropout(x, -1, 1.5), "softmax_dropout: argument 'p' must be in [0, 1), got 1.5");
  CHECK_THROWS_CONTAINING(softmax_dropout(ones({3}, kInt64), -1, 0.5),
                          "softmax_dropout: expected a floating-point tensor for argument 'self'");
  CHECK_THROWS_CONTAINING(softmax_dropout(x, -1, 0.5, true, ones({2, 4}, kFloat32)),
                          "softmax_dropout: argument 'mask' has shape [2, 4], which does not broadcast");
  CHECK_THROWS_CONTAINING(softmax_dropout(x, -1, 0.5, true, ones({5, 2, 3, 4}, kFloat32)),
                          "softmax_dropout: argument 'mask' has shape [5, 2, 3, 4]");
  CHECK_THROWS_CONTAINING(softmax_dropout(x, -1, 0.5, true, ones({4}, kInt64)),
                          "softmax_dropout: argument 'mask' must be bool or of the dtype of 'self'");
  CHECK_THROWS_CONTAINING(softmax_dropout(x, -1, 0.5, true, ones({4}, kFloat64)),
                          "softmax_dropout: argument 'mask' must be bool or of the dtype of 'self'");
  CHECK_THROWS_CONTAINING(softmax_dropout(x, -1, 0.5, true, ones({4}, kFloat32).requires_grad_()),
                          "softmax_dropout: argument 'mask' requires grad");
  CHECK_THROWS_CONTAINING(softmax_dropout(x, 1, 0.5, true, std::nullopt, true), "softmax_dropout: is_causal");
  CHECK_THROWS_CONTAINING(softmax_dropout(randn({4}, kFloat32), 0, 0.5, true, std::nullopt, true),
                          "softmax_dropout: is_causal");
  CHECK_THROWS_CONTAINING(composite::softmax_dropout(x, 1, 0.5, true, std::nullopt, true),
                          "softmax_dropout: is_causal");
  // A second backward through the fused ops is an error naming the Function.
  Tensor a = x.detach().requires_grad_();
  Generator gen(kSeed);
  const Tensor y = softmax_dropout(a, -1, 0.5, true, std::nullopt, false, std::nullopt, &gen);
  const tensor_list first = autograd::grad({y}, {a}, {ones_like(y)}, std::nullopt, /*create_graph=*/true);
  CHECK_THROWS_CONTAINING(autograd::grad({first[0].sum()}, {a}), "SoftmaxDropout.backward is once differentiable");
}
