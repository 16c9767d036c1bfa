// The indexing ops on the CPU: gather, scatter, scatter_add, index_select, index_add,
// embedding, one_hot, topk and multinomial against plain loops over to_vector() values
// (tests/reference_indexing.h's multi-indices), with repeated and empty indices and
// non-contiguous inputs; gradcheck and gradgradcheck in float64; the errors.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tests/reference_indexing.h"

using namespace minigrad;
using namespace minigrad::test;

namespace {

// Random int64 values in [0, bound): floor(uniform * bound).
Tensor random_index(const Shape& sizes, int64_t bound) { return mul(rand(sizes, kFloat64), double(bound)).to(kInt64); }

std::vector<int64_t> ints(const Tensor& t) { return t.to_vector<int64_t>(); }
std::vector<double> doubles(const Tensor& t) { return t.to_vector<double>(); }

// Reference gather: out[p] = x[p with p[dim] = index[p]].
std::vector<double> reference_gather(const Tensor& x, int64_t dim, const Tensor& index) {
  const std::vector<double> xv = doubles(x);
  const std::vector<int64_t> iv = ints(index);
  std::vector<double> out(iv.size());
  for (size_t flat = 0; flat < iv.size(); ++flat) {
    Shape at = unravel(static_cast<int64_t>(flat), index.sizes());
    at[static_cast<size_t>(dim)] = iv[flat];
    out[flat] = xv[static_cast<size_t>(ravel(at, x.sizes()))];
  }
  return out;
}

// Reference scatter / scatter_add: the index visited in row-major order; sums in double.
std::vector<double> reference_scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
                                      bool accumulate) {
  std::vector<double> out = doubles(x);
  const std::vector<int64_t> iv = ints(index);
  const std::vector<double> sv = doubles(src);
  for (size_t flat = 0; flat < iv.size(); ++flat) {
    const Shape at = unravel(static_cast<int64_t>(flat), index.sizes());
    Shape to = at;
    to[static_cast<size_t>(dim)] = iv[flat];
    const double value = sv[static_cast<size_t>(ravel(at, src.sizes()))];
    double& slot = out[static_cast<size_t>(ravel(to, x.sizes()))];
    slot = accumulate ? slot + value : value;
  }
  return out;
}

}  // namespace

TEST_CASE("gather reads x at the index along dim, for every dim, contiguous or not") {
  manual_seed(700);
  const Tensor x = randn({4, 5, 6}, kFloat64);
  for (int64_t dim : {0, 1, 2, -1}) {
    CAPTURE(dim);
    const int64_t d = dim < 0 ? dim + 3 : dim;
    Shape index_sizes = {3, 4, 5};  // smaller than x off dim
    index_sizes[static_cast<size_t>(d)] = 7;  // longer than x along dim: repeats are certain
    const Tensor index = random_index(index_sizes, x.size(d));
    const Tensor out = gather(x, dim, index);
    CHECK(out.sizes() == index.sizes());
    CHECK(doubles(out) == reference_gather(x, d, index));
  }
  // Non-contiguous x and index: a transposed x, a sliced and transposed index.
  const Tensor xt = randn({6, 5}, kFloat64).t();  // [5, 6]
  const Tensor index = random_index({8, 5}, 5).slice(0, 1, 8, 2).t();  // [5, 4], strided
  CHECK(!xt.is_contiguous());
  CHECK(!index.is_contiguous());
  CHECK(doubles(gather(xt, 0, index)) == reference_gather(xt.contiguous(), 0, index.contiguous()));
  CHECK(doubles(xt.gather(0, index)) == doubles(gather(xt, 0, index)));
  // Other dtypes move the same elements.
  for (DType dtype : {kFloat32, kFloat16, kBFloat16, kInt64, kBool}) {
    CAPTURE(dtype);
    const Tensor xd = mul(x, 3.0).to(dtype);
    const Tensor index3 = random_index({4, 5, 6}, 6);
    CHECK(doubles(gather(xd, 2, index3)) == reference_gather(xd, 2, index3));
  }
  // An empty index gives an empty result.
  CHECK(gather(x, 1, empty({4, 0, 6}, kInt64)).sizes() == Shape{4, 0, 6});
  // A 0-d x.
  const Tensor scalar = full({}, 2.5, kFloat64);
  CHECK(gather(scalar, 0, zeros({}, kInt64)).item<double>() == 2.5);
}

TEST_CASE("scatter writes the last of repeated positions; scatter_add adds them all") {
  manual_seed(701);
  const Tensor x = randn({4, 5, 3}, kFloat64);
  for (int64_t dim : {0, 1, 2}) {
    CAPTURE(dim);
    Shape index_sizes = {3, 4, 2};
    index_sizes[static_cast<size_t>(dim)] = 6;
    const Tensor index = random_index(index_sizes, x.size(dim));
    Shape src_sizes = index_sizes;
    for (int64_t& s : src_sizes) s += 1;  // src may be larger than the index
    const Tensor src = randn(src_sizes, kFloat64);
    CHECK(doubles(scatter(x, dim, index, src)) == reference_scatter(x, dim, index, src, false));
    const std::vector<double> added = doubles(scatter_add(x, dim, index, src));
    const std::vector<double> expected = reference_scatter(x, dim, index, src, true);
    for (size_t i = 0; i < added.size(); ++i) CHECK(added[i] == doctest::Approx(expected[i]).epsilon(1e-14));
    // The value form writes one number.
    const Tensor filled = scatter(x, dim, index, -7.5);
    CHECK(doubles(filled) == reference_scatter(x, dim, index, full(index.sizes(), -7.5, kFloat64), false));
    CHECK(doubles(x.scatter(dim, index, src)) == doubles(scatter(x, dim, index, src)));
    CHECK(doubles(x.scatter(dim, index, -7.5)) == doubles(filled));
    CHECK(doubles(x.scatter_add(dim, index, src)) == added);
  }
  // Non-contiguous self, index and src.
  const Tensor xt = randn({5, 4}, kFloat64).t();                   // [4, 5]
  const Tensor index = random_index({5, 3}, 4).t();                // [3, 5]
  const Tensor src = randn({6, 4}, kFloat64).t();                  // [4, 6]
  CHECK(doubles(scatter_add(xt, 0, index, src)) ==
        reference_scatter(xt.contiguous(), 0, index.contiguous(), src.contiguous(), true));
  CHECK(doubles(scatter(xt, 0, index, src)) ==
        reference_scatter(xt.contiguous(), 0, index.contiguous(), src.contiguous(), false));
  // An empty index changes nothing.
  CHECK(doubles(scatter_add(x, 1, empty({4, 0, 3}, kInt64), randn({4, 0, 3}, kFloat64))) == doubles(x));
  CHECK(doubles(scatter(x, 1, empty({4, 0, 3}, kInt64), 1.0)) == doubles(x));
}

TEST_CASE("scatter_add in int64 and the half types; scatter of bool") {
  manual_seed(702);
  const Tensor index = random_index({6, 3}, 4);
  const Tensor x = mul(randn({4, 3}, kFloat64), 5.0).to(kInt64);
  const Tensor src = mul(randn({6, 3}, kFloat64), 5.0).to(kInt64);
  const std::vector<double> expected = reference_scatter(x, 0, index, src, true);
  CHECK(doubles(scatter_add(x, 0, index, src)) == expected);
  // float16 adds in float and rounds once: within a half-ulp of the float64 sum of the same values.
  for (DType dtype : {kFloat16, kBFloat16}) {
    CAPTURE(dtype);
    const Tensor xh = randn({4, 3}, kFloat64).to(dtype);
    const Tensor sh = randn({6, 3}, kFloat64).to(dtype);
    const Tensor exact = from_vector(reference_scatter(xh, 0, index, sh, true), {4, 3}, TensorOptions(kFloat64));
    CHECK_ALLCLOSE(scatter_add(xh, 0, index, sh).to(kFloat64), exact.to(dtype).to(kFloat64), 0.0, 0.0);
  }
  const Tensor flags = zeros({4, 3}, kBool);
  const Tensor set = scatter(flags, 0, index, 1.0);
  CHECK(doubles(set) == reference_scatter(flags, 0, index, ones({6, 3}, kBool), false));
}

TEST_CASE("index_select and index_add, repeated and empty indices, any dim") {
  manual_seed(703);
  const Tensor x = randn({4, 5, 3}, kFloat64);
  const Tensor index = from_vector<int64_t>({2, 0, 2, 2, 4, 1}, {6});
  const Tensor out = index_select(x, 1, index);
  CHECK(out.sizes() == Shape{4, 6, 3});
  const std::vector<double> xv = doubles(x);
  const std::vector<double> ov = doubles(out);
  const std::vector<int64_t> iv = ints(index);
  for (int64_t flat = 0; flat < out.numel(); ++flat) {
    const Shape at = unravel(flat, out.sizes());
    CHECK(ov[static_cast<size_t>(flat)] == xv[static_cast<size_t>(ravel({at[0], iv[static_cast<size_t>(at[1])], at[2]}, x.sizes()))]);
  }
  CHECK(doubles(x.index_select(-2, index)) == ov);
  CHECK(index_select(x, 0, empty({0}, kInt64)).sizes() == Shape{0, 5, 3});
  CHECK(index_select(x, 2, full({}, 1.0, kInt64)).sizes() == Shape{4, 5, 1});  // a 0-d index
  // A non-contiguous x and index.
  const Tensor xt = x.transpose(0, 2);  // [3, 5, 4]
  const Tensor strided = from_vector<int64_t>({3, 9, 0, 9, 3, 9}, {6}).slice(0, 0, 6, 2);  // {3, 0, 3}
  CHECK(doubles(index_select(xt, 2, strided)) == doubles(index_select(xt.contiguous(), 2, strided.contiguous())));

  // index_add: each source slice j added into slice index[j], in the order of j.
  const Tensor source = randn({4, 6, 3}, kFloat64);
  const Tensor added = index_add(x, 1, index, source, 0.5);
  std::vector<double> expected = xv;
  const std::vector<double> sv = doubles(source);
  for (int64_t flat = 0; flat < source.numel(); ++flat) {
    const Shape at = unravel(flat, source.sizes());
    expected[static_cast<size_t>(ravel({at[0], iv[static_cast<size_t>(at[1])], at[2]}, x.sizes()))] +=
        0.5 * sv[static_cast<size_t>(flat)];
  }
  const std::vector<double> av = doubles(added);
  for (size_t i = 0; i < av.size(); ++i) CHECK(av[i] == doctest::Approx(expected[i]).epsilon(1e-14));
  CHECK(doubles(x.index_add(1, index, source, 0.5)) == av);
  CHECK(doubles(index_add(x, 0, empty({0}, kInt64), randn({0, 5, 3}, kFloat64))) == xv);
}

TEST_CASE("embedding looks up rows for any index shape; its gradient adds repeats and skips padding_idx") {
  manual_seed(704);
  const Tensor weight = randn({7, 4}, kFloat64).requires_grad_();
  const Tensor indices = from_vector<int64_t>({3, 1, 3, 6, 0, 3}, {2, 3});
  const Tensor out = embedding(weight, indices);
  CHECK(out.sizes() == Shape{2, 3, 4});
  const std::vector<double> wv = doubles(weight);
  const std::vector<double> ov = doubles(out);
  const std::vector<int64_t> iv = ints(indices);
  for (size_t t = 0; t < iv.size(); ++t)
    for (size_t c = 0; c < 4; ++c) CHECK(ov[t * 4 + c] == wv[static_cast<size_t>(iv[t]) * 4 + c]);

  const Tensor upstream = randn({2, 3, 4}, kFloat64);
  for (std::optional<int64_t> padding : {std::optional<int64_t>(), std::optional<int64_t>(3), std::optional<int64_t>(-7)}) {
    CAPTURE(padding.value_or(-100));
    const Tensor grad = autograd::grad({embedding(weight, indices, padding)}, {weight}, {upstream})[0];
    const int64_t pad = padding ? (*padding < 0 ? *padding + 7 : *padding) : -1;
    std::vector<double> expected(28, 0.0);
    const std::vector<double> uv = doubles(upstream);
    for (size_t t = 0; t < iv.size(); ++t) {
      if (iv[t] == pad) continue;
      for (size_t c = 0; c < 4; ++c) expected[static_cast<size_t>(iv[t]) * 4 + c] += uv[t * 4 + c];
    }
    CHECK(doubles(grad) == expected);
    // The padding row's lookups still read the row.
    CHECK(doubles(embedding(weight, indices, padding)) == ov);
  }
  // Deterministic: two backward passes give the same bits (float32, many repeats).
  const Tensor w32 = randn({50, 16}).requires_grad_();
  const Tensor many = random_index({4000}, 50);
  const Tensor up = randn({4000, 16});
  const Tensor g1 = autograd::grad({embedding(w32, many)}, {w32}, {up})[0];
  const Tensor g2 = autograd::grad({embedding(w32, many)}, {w32}, {up})[0];
  CHECK(g1.to_vector<float>() == g2.to_vector<float>());
  // Empty indices.
  CHECK(embedding(weight, empty({0, 2}, kInt64)).sizes() == Shape{0, 2, 4});
}

TEST_CASE("one_hot: int64 rows of num_classes, inferred as max + 1") {
  const Tensor indices = from_vector<int64_t>({2, 0, 3, 2}, {2, 2});
  const Tensor hot = one_hot(indices);
  CHECK(hot.dtype() == kInt64);
  CHECK(hot.sizes() == Shape{2, 2, 4});
  const std::vector<int64_t> hv = ints(hot);
  const std::vector<int64_t> iv = ints(indices);
  for (size_t t = 0; t < 4; ++t)
    for (int64_t c = 0; c < 4; ++c) CHECK(hv[t * 4 + static_cast<size_t>(c)] == (iv[t] == c ? 1 : 0));
  CHECK(one_hot(indices, 6).sizes() == Shape{2, 2, 6});
  CHECK(one_hot(indices.t(), 4).to_vector<int64_t>() == one_hot(indices.t().contiguous(), 4).to_vector<int64_t>());
  CHECK(one_hot(empty({0}, kInt64), 3).sizes() == Shape{0, 3});
  CHECK_THROWS_CONTAINING(one_hot(empty({0}, kInt64)), "one_hot: cannot infer the number of classes");
  CHECK_THROWS_CONTAINING(one_hot(indices, 3), "one_hot: class value 3 is out of range for num_classes 3");
  CHECK_THROWS_CONTAINING(one_hot(from_vector<int64_t>({1, -2}, {2})), "one_hot: class values must be non-negative, got -2");
  CHECK_THROWS_CONTAINING(one_hot(zeros({2})), "one_hot: expected an int64 tensor");
}

namespace {
// The reference order of topk: positions sorted by value (NaN above every number), ties by position.
std::vector<int64_t> reference_topk_row(const std::vector<double>& row, int64_t k, bool largest) {
  std::vector<int64_t> order(row.size());
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    const double va = row[static_cast<size_t>(a)], vb = row[static_cast<size_t>(b)];
    if (std::isnan(va) || std::isnan(vb)) return largest ? (std::isnan(va) && !std::isnan(vb)) : (!std::isnan(va) && std::isnan(vb));
    return largest ? va > vb : va < vb;
  });
  order.resize(static_cast<size_t>(k));
  return order;
}
}  // namespace

TEST_CASE("topk: the k largest or smallest along any dim, ties by position, NaN largest") {
  manual_seed(705);
  // Rounded values, so that ties occur; a NaN and infinities.
  Tensor x = mul(randn({3, 9, 4}, kFloat64), 2.0).to(kInt64).to(kFloat64);
  std::vector<double> xv = doubles(x);
  xv[5] = std::nan("");
  xv[17] = std::numeric_limits<double>::infinity();
  xv[30] = -std::numeric_limits<double>::infinity();
  x = from_vector(xv, {3, 9, 4}, TensorOptions(kFloat64));
  for (int64_t dim : {0, 1, 2}) {
    for (bool largest : {true, false}) {
      for (int64_t k : {int64_t{0}, int64_t{1}, x.size(dim) / 2 + 1, x.size(dim)}) {
        CAPTURE(dim);
        CAPTURE(largest);
        CAPTURE(k);
        auto [values, indices] = topk(x, k, dim, largest);
        Shape expected_sizes = x.sizes();
        expected_sizes[static_cast<size_t>(dim)] = k;
        CHECK(values.sizes() == expected_sizes);
        CHECK(indices.dtype() == kInt64);
        const Tensor moved = x.transpose(dim, 2).contiguous();
        const Tensor moved_indices = indices.transpose(dim, 2).contiguous();
        const std::vector<double> mv = doubles(moved);
        const std::vector<int64_t> mi = ints(moved_indices);
        const int64_t n = x.size(dim);
        for (int64_t r = 0; r < moved.numel() / n; ++r) {
          const std::vector<double> row(mv.begin() + r * n, mv.begin() + (r + 1) * n);
          const std::vector<int64_t> want = reference_topk_row(row, k, largest);
          const std::vector<int64_t> got(mi.begin() + r * k, mi.begin() + (r + 1) * k);
          CHECK(got == want);
        }
        // values are x at the indices (NaN compares unequal: compare the bits).
        CHECK(test::same_bits(values, gather(x, dim, indices)));
      }
    }
  }
  // Non-contiguous input, int64 and float16 dtypes, the member form.
  const Tensor xt = randn({7, 5}, kFloat64).t();
  CHECK(ints(std::get<1>(topk(xt, 3))) == ints(std::get<1>(topk(xt.contiguous(), 3))));
  const Tensor xi = mul(randn({4, 6}, kFloat64), 100.0).to(kInt64);
  CHECK(ints(std::get<1>(topk(xi, 2, 1, false))) == ints(std::get<1>(topk(xi.to(kFloat64), 2, 1, false))));
  const Tensor xh = randn({4, 6}).to(kFloat16);
  CHECK(ints(std::get<1>(topk(xh, 4))) == ints(std::get<1>(topk(xh.to(kFloat32), 4))));
  auto [mv, mi] = xt.topk(2, 0, false);
  CHECK(ints(mi) == ints(std::get<1>(topk(xt, 2, 0, false))));
  CHECK(std::get<0>(topk(randn({3, 0}), 0)).sizes() == Shape{3, 0});
}

TEST_CASE("topk's values are differentiable: the gradient goes to the chosen positions") {
  manual_seed(706);
  const Tensor x = randn({3, 6}, kFloat64).requires_grad_();
  auto [values, indices] = topk(x, 2, 1);
  CHECK(values.requires_grad());
  CHECK(!indices.requires_grad());
  const Tensor upstream = randn({3, 2}, kFloat64);
  const Tensor grad = autograd::grad({values}, {x}, {upstream})[0];
  std::vector<double> expected(18, 0.0);
  const std::vector<int64_t> iv = ints(indices);
  const std::vector<double> uv = doubles(upstream);
  for (size_t r = 0; r < 3; ++r)
    for (size_t j = 0; j < 2; ++j) expected[r * 6 + static_cast<size_t>(iv[r * 2 + j])] = uv[r * 2 + j];
  CHECK(doubles(grad) == expected);
}

TEST_CASE("gradcheck and gradgradcheck in float64: gather, scatter, scatter_add, index_select, index_add, embedding, topk") {
  manual_seed(707);
  const Tensor x = randn({4, 5}, kFloat64).requires_grad_();
  const Tensor src = randn({6, 5}, kFloat64).requires_grad_();
  const Tensor repeated = random_index({6, 5}, 4);                              // dim 0, repeats
  const Tensor unique = std::get<1>(topk(rand({4, 5}, kFloat64), 3, 0));       // [3, 5], distinct per column
  const Tensor src_unique = randn({3, 5}, kFloat64).requires_grad_();
  const Tensor rows = from_vector<int64_t>({1, 3, 1, 0, 1}, {5});
  const Tensor weight = randn({6, 3}, kFloat64).requires_grad_();
  const Tensor tokens = from_vector<int64_t>({2, 5, 2, 0, 4, 2}, {2, 3});
  const Tensor xt = randn({5, 4}, kFloat64).t().requires_grad_();  // a non-contiguous leaf
  const Tensor wide = random_index({4, 7}, 5);

  const std::vector<std::pair<const char*, GradcheckFn>> cases = {
      {"gather", [&](const tensor_list& t) { return gather(t[0], 0, repeated.slice(0, 0, 3)); }},
      {"gather of a transposed x", [&](const tensor_list& t) { return gather(t[3], 1, wide); }},
      {"scatter", [&](const tensor_list& t) { return mul(scatter(t[0], 0, unique, t[2]), scatter(t[0], 0, unique, t[2])); }},
      {"scatter value", [&](const tensor_list& t) { return scatter(t[0], 0, unique, 2.0); }},
      {"scatter_add", [&](const tensor_list& t) { return scatter_add(t[0], 0, repeated, t[1]); }},
      {"index_select", [&](const tensor_list& t) { return index_select(t[0], 1, rows); }},
      {"index_add, a sliced source", [&](const tensor_list& t) { return index_add(t[0], 1, rows.slice(0, 0, 4), t[1].slice(0, 0, 4).slice(1, 0, 4), 1.5); }},
      {"embedding", [&](const tensor_list& t) { return embedding(t[4], tokens); }},
      {"topk", [&](const tensor_list& t) { return std::get<0>(topk(t[0], 3, 1)); }},
  };
  // Leaves: x, src, src_unique, xt, weight; each case uses some (allow_unused for the rest).
  GradcheckOptions options;
  options.allow_unused = true;
  for (const auto& [name, fn] : cases) {
    const std::string case_name = name;
    CAPTURE(case_name);
    const tensor_list inputs = {x, src, src_unique, xt, weight};
    CHECK_GRADCHECK_OPTS(fn, inputs, options);
    CHECK_GRADGRADCHECK_OPTS([&fn = fn](const tensor_list& t) { return mul(fn(t), fn(t)); }, inputs, tensor_list{},
                             options);
  }
  // With padding_idx the gradient is not the derivative (the padding row is read but gets
  // none), so only its own derivative is checked: the backward is linear in the gradient.
  CHECK_GRADGRADCHECK([&](const tensor_list& t) { return mul(embedding(t[0], tokens, 2), embedding(t[0], tokens, 2)); },
                      tensor_list{weight});
}

TEST_CASE("the errors name the op, the index value and the size") {
  const Tensor x = randn({3, 4});
  const Tensor good = zeros({3, 2}, kInt64);
  CHECK_THROWS_CONTAINING(gather(x, 1, from_vector<int64_t>({0, 4, 1, 2, 3, 0}, {3, 2})),
                          "gather: index 4 is out of range for dimension 1 with size 4");
  CHECK_THROWS_CONTAINING(gather(x, 1, from_vector<int64_t>({0, -1, 1, 2, 3, 0}, {3, 2})),
                          "gather: index -1 is out of range for dimension 1 with size 4");
  CHECK_THROWS_CONTAINING(gather(x, 1, zeros({3, 2})), "gather: expected an int64 tensor for argument 'index', got float32");
  CHECK_THROWS_CONTAINING(gather(x, 2, good), "gather: dim 2 is out of range");
  CHECK_THROWS_CONTAINING(gather(x, 1, zeros({3}, kInt64)), "gather: 'index' has 1 dims but 'self' has 2");
  CHECK_THROWS_CONTAINING(gather(x, 1, zeros({4, 2}, kInt64)), "gather: 'index' (shape [4, 2]) is larger than 'self'");
  CHECK_THROWS_CONTAINING(scatter(x, 0, good, randn({3, 1})), "scatter: 'index' (shape [3, 2]) is larger than 'src'");
  CHECK_THROWS_CONTAINING(scatter(x, 0, full({3, 2}, 3.0, kInt64), randn({3, 2})),
                          "scatter: index 3 is out of range for dimension 0 with size 3");
  CHECK_THROWS_CONTAINING(scatter_add(x, 0, good, randn({3, 2}, kFloat64)), "scatter_add: expected one dtype");
  CHECK_THROWS_CONTAINING(scatter_add(zeros({3, 4}, kBool), 0, good, zeros({3, 2}, kBool)), "scatter_add: bool");
  CHECK_THROWS_CONTAINING(scatter(zeros({3, 4}, kInt64), 0, good, 0.5), "full");
  CHECK_THROWS_CONTAINING(index_select(x, 0, from_vector<int64_t>({0, 3}, {2})),
                          "index_select: index 3 is out of range for dimension 0 with size 3");
  CHECK_THROWS_CONTAINING(index_select(x, 0, zeros({2, 1}, kInt64)), "index_select: 'index' must be 1-D");
  CHECK_THROWS_CONTAINING(index_select(x, -3, zeros({2}, kInt64)), "index_select: dim -3 is out of range");
  CHECK_THROWS_CONTAINING(index_add(x, 0, zeros({2}, kInt64), randn({3, 4})), "index_add: 'source' has shape [3, 4], expected [2, 4]");
  CHECK_THROWS_CONTAINING(index_add(x, 0, full({1}, 5.0, kInt64), randn({1, 4})),
                          "index_add: index 5 is out of range for dimension 0 with size 3");
  CHECK_THROWS_CONTAINING(embedding(x, from_vector<int64_t>({1, 7}, {2})),
                          "embedding: index 7 is out of range for dimension 0 with size 3");
  CHECK_THROWS_CONTAINING(embedding(x, zeros({2})), "embedding: expected an int64 tensor for argument 'indices'");
  CHECK_THROWS_CONTAINING(embedding(randn({3}), zeros({2}, kInt64)), "embedding: 'weight' must be 2-D");
  CHECK_THROWS_CONTAINING(embedding(x, zeros({2}, kInt64), 3), "embedding: padding_idx 3 is out of range for 3 embeddings");
  CHECK_THROWS_CONTAINING(topk(x, 5, 1), "topk: k 5 is out of range for dimension 1 with size 4");
  CHECK_THROWS_CONTAINING(topk(x, 1, 2), "topk: dim 2 is out of range");
  CHECK_THROWS_CONTAINING(topk(zeros({3}, kBool), 1), "topk: expected a floating-point or int64 tensor, got bool");
}

namespace {
// Counts of each category among the draws of one row.
std::vector<double> category_counts(const std::vector<int64_t>& draws, int64_t categories) {
  std::vector<double> counts(static_cast<size_t>(categories), 0.0);
  for (int64_t c : draws) counts[static_cast<size_t>(c)] += 1.0;
  return counts;
}
// Each count within 5 standard deviations of its binomial expectation.
void check_counts(const std::vector<double>& counts, const std::vector<double>& weights, double draws) {
  const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
  for (size_t c = 0; c < weights.size(); ++c) {
    CAPTURE(c);
    const double p = weights[c] / total;
    const double sigma = std::sqrt(draws * p * (1.0 - p));
    CHECK(std::abs(counts[c] - draws * p) <= 5.0 * sigma + 1e-9);
  }
}
}  // namespace

TEST_CASE("multinomial with replacement: counts within 5 sigma; weight-0 categories never drawn") {
  manual_seed(708);
  const std::vector<double> weights = {0.5, 0.0, 2.0, 1.0, 0.25, 3.0};  // need not sum to 1
  const Tensor probs = from_vector(weights, {6}, TensorOptions(kFloat64));
  const int64_t draws = 60000;
  const Tensor samples = multinomial(probs, draws, /*replacement=*/true);
  CHECK(samples.dtype() == kInt64);
  CHECK(samples.sizes() == Shape{draws});
  const std::vector<double> counts = category_counts(ints(samples), 6);
  CHECK(counts[1] == 0.0);
  check_counts(counts, weights, double(draws));
  // 2-D, float32, a non-contiguous probs (each column is a row of weights).
  const Tensor table = from_vector<float>({1, 4, 0, 1, 3, 2}, {3, 2}).t();  // rows {1, 0, 3}, {4, 1, 2}
  const Tensor two = multinomial(table, 30000, true);
  CHECK(two.sizes() == Shape{2, 30000});
  const std::vector<int64_t> tv = ints(two);
  check_counts(category_counts({tv.begin(), tv.begin() + 30000}, 3), {1, 0, 3}, 30000.0);
  check_counts(category_counts({tv.begin() + 30000, tv.end()}, 3), {4, 1, 2}, 30000.0);
  CHECK(probs.multinomial(5, true).sizes() == Shape{5});
}

TEST_CASE("multinomial without replacement: distinct categories, first draws distributed as the weights") {
  manual_seed(709);
  const std::vector<double> weights = {1.0, 0.0, 2.0, 4.0, 3.0};
  const int64_t rows = 20000;
  std::vector<double> table;
  for (int64_t r = 0; r < rows; ++r) table.insert(table.end(), weights.begin(), weights.end());
  const Tensor probs = from_vector(table, {rows, 5}, TensorOptions(kFloat64));
  const Tensor samples = multinomial(probs, 4);  // every positive category, in the order drawn
  const std::vector<int64_t> sv = ints(samples);
  std::vector<int64_t> firsts;
  for (int64_t r = 0; r < rows; ++r) {
    const std::set<int64_t> row(sv.begin() + r * 4, sv.begin() + (r + 1) * 4);
    CHECK(row == std::set<int64_t>{0, 2, 3, 4});
    firsts.push_back(sv[static_cast<size_t>(r * 4)]);
  }
  check_counts(category_counts(firsts, 5), weights, double(rows));
}

TEST_CASE("multinomial draws from the generator it is given, reproducibly, and checks the weights") {
  const Tensor probs = from_vector<double>({0.2, 0.3, 0.5, 1.0}, {2, 2});
  Generator a(42), b(42);
  CHECK(ints(multinomial(probs, 50, true, &a)) == ints(multinomial(probs, 50, true, &b)));
  CHECK(ints(multinomial(probs, 2, false, &a)) == ints(multinomial(probs, 2, false, &b)));
  CHECK(a.offset() == 2);
  manual_seed(5);
  const std::vector<int64_t> first = ints(multinomial(probs, 40, true));
  manual_seed(5);
  CHECK(ints(multinomial(probs, 40, true)) == first);

  const uint64_t before = default_generator().offset();
  CHECK_THROWS_CONTAINING(multinomial(from_vector<double>({0.5, -0.1}, {2}), 1), "multinomial: row 0 of 'probs' has a negative weight");
  CHECK_THROWS_CONTAINING(multinomial(from_vector<double>({1, 0, 0, std::nan("")}, {2, 2}), 1),
                          "multinomial: row 1 of 'probs' has a NaN weight");
  CHECK_THROWS_CONTAINING(multinomial(from_vector<double>({1, std::numeric_limits<double>::infinity()}, {2}), 1),
                          "multinomial: row 0 of 'probs' has an infinite weight");
  CHECK_THROWS_CONTAINING(multinomial(zeros({3}, kFloat64), 1, true), "do not sum to a positive finite number");
  CHECK_THROWS_CONTAINING(multinomial(from_vector<double>({1, 0, 2}, {3}), 3),
                          "cannot draw 3 samples without replacement from row 0 of 'probs', which has 2 categories");
  CHECK_THROWS_CONTAINING(multinomial(from_vector<double>({1, 2}, {2}), 3), "cannot draw 3 samples without replacement from 2 categories");
  CHECK_THROWS_CONTAINING(multinomial(from_vector<double>({1, 2}, {2}), 0), "multinomial: num_samples must be positive");
  CHECK_THROWS_CONTAINING(multinomial(zeros({2}, kInt64), 1), "multinomial: expected a floating-point tensor");
  CHECK_THROWS_CONTAINING(multinomial(ones({2, 2, 2}), 1), "multinomial: 'probs' must be 1-D or 2-D");
  CHECK(default_generator().offset() == before);  // a call that fails draws nothing
  CHECK(multinomial(ones({0, 3}), 2).sizes() == Shape{0, 2});
}
