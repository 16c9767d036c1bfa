// The indexing ops on the GPU against the CPU on the same values: gather, scatter,
// scatter_add, index_select, index_add, embedding (values and gradients, the same bits:
// both devices add in the index's order, in the same accumulator), one_hot, topk (the same
// positions: one total order), multinomial (the same draws for the same generator state);
// gradcheck and gradgradcheck in float64 on the GPU; the errors, raised on the host.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "tests/cuda_test_support.h"

using namespace minigrad;
using namespace minigrad::test;

namespace {

Tensor random_index(const Shape& sizes, int64_t bound) { return mul(rand(sizes, kFloat64), double(bound)).to(kInt64); }

const std::vector<DType> kAllDTypes = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kBool};
const std::vector<DType> kAddDTypes = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64};

}  // namespace

TEST_CASE("gather, scatter and scatter_add on the GPU give the CPU's bits in every dtype and layout" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(800);
  const Tensor base = mul(randn({5, 6, 4}, kFloat64), 3.0);
  const Tensor src_base = mul(randn({7, 7, 5}, kFloat64), 3.0);
  for (int64_t dim : {0, 1, 2}) {
    Shape index_sizes = {4, 5, 3};
    index_sizes[static_cast<size_t>(dim)] = 9;  // repeats along dim
    const Tensor index = random_index(index_sizes, base.size(dim));
    const Tensor index_t = random_index({index_sizes[2], index_sizes[1], index_sizes[0]}, base.size(dim))
                               .permute({2, 1, 0});  // the same shape, non-contiguous
    Shape src_sizes = index_sizes;
    for (int64_t& s : src_sizes) s += 1;
    for (DType dtype : kAllDTypes) {
      CAPTURE(dim);
      CAPTURE(dtype);
      const Tensor x = base.to(dtype);
      const Tensor src = randn(src_sizes, kFloat64).mul(3.0).to(dtype);
      for (const Tensor& idx : {index, index_t}) {
        const Tensor xg = x.to(kGpu), ig = idx.to(kGpu), sg = src.to(kGpu);
        CHECK(gather(xg, dim, ig).device() == kGpu);
        CHECK(same_bits(gather(xg, dim, ig), gather(x, dim, idx)));
        CHECK(same_bits(scatter(xg, dim, ig, sg), scatter(x, dim, idx, src)));
        CHECK(same_bits(scatter(xg, dim, ig, 1.0), scatter(x, dim, idx, 1.0)));
        if (dtype != kBool) CHECK(same_bits(scatter_add(xg, dim, ig, sg), scatter_add(x, dim, idx, src)));
        // A non-contiguous x on the GPU: x's values, its dims laid out in reverse.
        const Tensor x_strided = xg.transpose(0, 2).contiguous().transpose(0, 2);
        CHECK(!x_strided.is_contiguous());
        CHECK(same_bits(gather(x_strided, dim, ig), gather(x, dim, idx)));
        if (dtype != kBool) CHECK(same_bits(scatter_add(x_strided, dim, ig, sg), scatter_add(x, dim, idx, src)));
      }
    }
  }
  // Empty index.
  const Tensor xg = base.to(kGpu);
  CHECK(gather(xg, 1, empty({5, 0, 4}, TensorOptions(kInt64).device(kGpu))).sizes() == Shape{5, 0, 4});
  CHECK(same_bits(scatter_add(xg, 1, empty({5, 0, 4}, TensorOptions(kInt64).device(kGpu)),
                              empty({5, 0, 4}, TensorOptions(kFloat64).device(kGpu))),
                  base));
}

TEST_CASE("index_select, index_add and embedding on the GPU give the CPU's bits" * doctest::skip(!cuda_is_available())) {
  manual_seed(801);
  const Tensor index = random_index({40}, 6);  // many repeats
  for (DType dtype : kAllDTypes) {
    CAPTURE(dtype);
    const Tensor x = mul(randn({5, 6, 7}, kFloat64), 4.0).to(dtype);
    CHECK(same_bits(index_select(x.to(kGpu), 1, index.to(kGpu)), index_select(x, 1, index)));
    CHECK(same_bits(index_select(x.to(kGpu).transpose(0, 2), 1, index.slice(0, 0, 40, 3).to(kGpu)),
                    index_select(x.transpose(0, 2), 1, index.slice(0, 0, 40, 3))));
    if (dtype == kBool) continue;
    const Tensor source = mul(randn({5, 40, 7}, kFloat64), 4.0).to(dtype);
    CHECK(same_bits(index_add(x.to(kGpu), 1, index.to(kGpu), source.to(kGpu)), index_add(x, 1, index, source)));
  }
  // embedding: the lookup and the gradient, float32, a vocabulary hit many times.
  const Tensor weight = randn({100, 32});
  const Tensor tokens = random_index({64, 50}, 100);
  const Tensor upstream = randn({64, 50, 32});
  for (std::optional<int64_t> padding : {std::optional<int64_t>(), std::optional<int64_t>(7)}) {
    const Tensor cpu_leaf = weight.detach().requires_grad_();
    const Tensor cpu_out = embedding(cpu_leaf, tokens, padding);
    const Tensor cpu_grad = autograd::grad({cpu_out}, {cpu_leaf}, {upstream})[0];
    const Tensor leaf = gpu_leaf(weight);
    const Tensor out = embedding(leaf, tokens.to(kGpu), padding);
    CHECK(same_bits(out, cpu_out));
    const Tensor grad1 = autograd::grad({out}, {leaf}, {upstream.to(kGpu)})[0];
    const Tensor grad2 = autograd::grad({embedding(leaf, tokens.to(kGpu), padding)}, {leaf}, {upstream.to(kGpu)})[0];
    CHECK(grad1.device() == kGpu);
    CHECK(same_bits(grad1, grad2));     // deterministic on the GPU
    CHECK(same_bits(grad1, cpu_grad));  // and the CPU's bits
    if (padding) CHECK(grad1.select(0, *padding).abs().sum().item<double>() == 0.0);
  }
}

TEST_CASE("the backward of gather and index_select on the GPU: the CPU's bits, run after run" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(802);
  const Tensor x = randn({8, 300});
  const Tensor index = random_index({8, 2000}, 300);
  const Tensor upstream = randn({8, 2000});
  const Tensor cpu_leaf = x.detach().requires_grad_();
  const Tensor cpu_grad = autograd::grad({gather(cpu_leaf, 1, index)}, {cpu_leaf}, {upstream})[0];
  const Tensor leaf = gpu_leaf(x);
  const Tensor g1 = autograd::grad({gather(leaf, 1, index.to(kGpu))}, {leaf}, {upstream.to(kGpu)})[0];
  const Tensor g2 = autograd::grad({gather(leaf, 1, index.to(kGpu))}, {leaf}, {upstream.to(kGpu)})[0];
  CHECK(same_bits(g1, g2));
  CHECK(same_bits(g1, cpu_grad));
  const Tensor rows = random_index({500}, 8);
  const Tensor up_rows = randn({500, 300});
  const Tensor cpu_rows = autograd::grad({index_select(cpu_leaf, 0, rows)}, {cpu_leaf}, {up_rows})[0];
  const Tensor gpu_rows = autograd::grad({index_select(leaf, 0, rows.to(kGpu))}, {leaf}, {up_rows.to(kGpu)})[0];
  CHECK(same_bits(gpu_rows, cpu_rows));
}

TEST_CASE("gradcheck and gradgradcheck on the GPU in float64" * doctest::skip(!cuda_is_available())) {
  manual_seed(803);
  const TensorOptions gpu64 = TensorOptions(kFloat64).device(kGpu);
  const Tensor x = randn({4, 5}, gpu64).requires_grad_();
  const Tensor src = randn({6, 5}, gpu64).requires_grad_();
  const Tensor weight = randn({6, 3}, gpu64).requires_grad_();
  const Tensor repeated = random_index({6, 5}, 4).to(kGpu);
  const Tensor unique = std::get<1>(topk(rand({4, 5}, kFloat64), 3, 0)).to(kGpu);
  const Tensor rows = from_vector<int64_t>({1, 3, 1, 0, 1}, {5}).to(kGpu);
  const Tensor tokens = from_vector<int64_t>({2, 5, 2, 0, 4, 2}, {2, 3}).to(kGpu);
  const std::vector<std::pair<const char*, GradcheckFn>> cases = {
      {"gather", [&](const tensor_list& t) { return gather(t[0], 0, repeated.slice(0, 0, 3)); }},
      {"scatter", [&](const tensor_list& t) { return scatter(t[0], 0, unique, t[1].slice(0, 0, 3)); }},
      {"scatter_add", [&](const tensor_list& t) { return scatter_add(t[0], 0, repeated, t[1]); }},
      {"index_select", [&](const tensor_list& t) { return index_select(t[0], 1, rows); }},
      {"index_add", [&](const tensor_list& t) { return index_add(t[0], 1, rows, t[1].slice(0, 0, 4)); }},
      {"embedding", [&](const tensor_list& t) { return embedding(t[2], tokens); }},
      {"topk", [&](const tensor_list& t) { return std::get<0>(topk(t[0], 3, 1)); }},
  };
  GradcheckOptions options;
  options.allow_unused = true;
  for (const auto& [name, fn] : cases) {
    const std::string case_name = name;
    CAPTURE(case_name);
    const tensor_list inputs = {x, src, weight};
    CHECK_GRADCHECK_OPTS(fn, inputs, options);
    CHECK_GRADGRADCHECK_OPTS([&fn = fn](const tensor_list& t) { return mul(fn(t), fn(t)); }, inputs, tensor_list{},
                             options);
  }
}

TEST_CASE("topk on the GPU picks the CPU's positions: ties, NaN, long rows, every dtype" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(804);
  // Rounded values give ties; a NaN and infinities in some rows.
  std::vector<double> values = mul(randn({6, 37}, kFloat64), 3.0).to(kInt64).to(kFloat64).to_vector<double>();
  values[3] = std::nan("");
  values[40] = std::numeric_limits<double>::infinity();
  values[41] = -std::numeric_limits<double>::infinity();
  values[80] = std::nan("");
  const Tensor small = from_vector(values, {6, 37}, TensorOptions(kFloat64));
  const Tensor long_rows = randn({3, 5000}, kFloat64);  // padded to 8192
  for (const Tensor& x : {small, long_rows, small.t()}) {
    for (DType dtype : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64}) {  // int64: NaN becomes 0, inf saturates
      for (bool largest : {true, false}) {
        const Tensor xd = x.to(dtype);
        const int64_t n = x.size(1);
        for (int64_t k : {int64_t{0}, int64_t{1}, std::min<int64_t>(7, n), n}) {
          CAPTURE(dtype);
          CAPTURE(largest);
          CAPTURE(n);
          CAPTURE(k);
          auto [cpu_values, cpu_indices] = topk(xd, k, 1, largest);
          auto [values, indices] = topk(xd.to(kGpu), k, 1, largest);
          CHECK(indices.device() == kGpu);
          CHECK(indices.cpu().to_vector<int64_t>() == cpu_indices.to_vector<int64_t>());
          CHECK(same_bits(values, cpu_values));
        }
      }
    }
  }
  // Along dim 0 of a 3-D tensor, and the gradient of the values.
  const Tensor cube = randn({9, 4, 3}, kFloat64);
  auto [cv, ci] = topk(cube, 4, 0, false);
  auto [gv, gi] = topk(cube.to(kGpu), 4, 0, false);
  CHECK(gi.cpu().to_vector<int64_t>() == ci.to_vector<int64_t>());
  const Tensor leaf = gpu_leaf(cube);
  const Tensor upstream = randn({9, 4, 3}, kFloat64).slice(0, 0, 4);
  const Tensor grad = autograd::grad({std::get<0>(topk(leaf, 4, 0, false))}, {leaf}, {upstream.to(kGpu)})[0];
  const Tensor cpu_leaf = cube.detach().requires_grad_();
  const Tensor cpu_grad = autograd::grad({std::get<0>(topk(cpu_leaf, 4, 0, false))}, {cpu_leaf}, {upstream})[0];
  CHECK(same_bits(grad, cpu_grad));
}

TEST_CASE("one_hot on the GPU" * doctest::skip(!cuda_is_available())) {
  manual_seed(805);
  const Tensor indices = random_index({5, 7}, 9);
  CHECK(one_hot(indices.to(kGpu)).cpu().to_vector<int64_t>() == one_hot(indices).to_vector<int64_t>());
  CHECK(one_hot(indices.to(kGpu), 12).cpu().to_vector<int64_t>() == one_hot(indices, 12).to_vector<int64_t>());
  CHECK_THROWS_CONTAINING(one_hot(from_vector<int64_t>({1, -3}, {2}).to(kGpu)),
                          "one_hot: class values must be non-negative, got -3");
}

TEST_CASE("multinomial on the GPU draws what the CPU draws from the same generator state" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(806);
  const Tensor probs = rand({16, 50}, kFloat64);
  const Tensor sparse = where(gt(probs, 0.5), probs, zeros({}, kFloat64));  // about 25 positive per row
  for (DType dtype : {kFloat32, kFloat64, kFloat16}) {
    CAPTURE(dtype);
    const Tensor p = probs.to(dtype);
    Generator a(123), b(123);
    CHECK(multinomial(p.to(kGpu), 300, true, &a).cpu().to_vector<int64_t>() ==
          multinomial(p, 300, true, &b).to_vector<int64_t>());
    // Without replacement the keys go through log1p, whose host and CUDA versions may differ
    // in the last bit: the draws differ only if two keys of a row lie within that bit.
    const Tensor s = sparse.to(dtype);
    CHECK(multinomial(s.to(kGpu), 8, false, &a).cpu().to_vector<int64_t>() ==
          multinomial(s, 8, false, &b).to_vector<int64_t>());
    CHECK(a.offset() == b.offset());
  }
  // 1-D, and a non-contiguous probs.
  Generator a(7), b(7);
  CHECK(multinomial(probs.select(1, 3).to(kGpu), 20, true, &a).cpu().to_vector<int64_t>() ==
        multinomial(probs.select(1, 3), 20, true, &b).to_vector<int64_t>());
  CHECK(multinomial(probs.t().to(kGpu), 5, false, &a).cpu().to_vector<int64_t>() ==
        multinomial(probs.t(), 5, false, &b).to_vector<int64_t>());
}

TEST_CASE("multinomial on the GPU: counts within 5 sigma, the checks on the host" * doctest::skip(!cuda_is_available())) {
  manual_seed(807);
  const std::vector<double> weights = {0.5, 0.0, 2.0, 1.0, 0.25, 3.0};
  const int64_t draws = 100000;
  const Tensor samples = multinomial(from_vector(weights, {6}, TensorOptions(kFloat64)).to(kGpu), draws, true);
  CHECK(samples.device() == kGpu);
  std::vector<double> counts(6, 0.0);
  for (int64_t c : samples.cpu().to_vector<int64_t>()) counts[static_cast<size_t>(c)] += 1.0;
  const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
  for (size_t c = 0; c < 6; ++c) {
    CAPTURE(c);
    const double p = weights[c] / total;
    CHECK(std::abs(counts[c] - draws * p) <= 5.0 * std::sqrt(draws * p * (1.0 - p)) + 1e-9);
  }
  CHECK_THROWS_CONTAINING(multinomial(from_vector<double>({0.5, -0.1}, {2}).to(kGpu), 1),
                          "multinomial: row 0 of 'probs' has a negative weight");
  CHECK_THROWS_CONTAINING(multinomial(from_vector<double>({1, 0, 0, std::nan("")}, {2, 2}).to(kGpu), 1),
                          "multinomial: row 1 of 'probs' has a NaN weight");
  CHECK_THROWS_CONTAINING(multinomial(zeros({3}, TensorOptions(kFloat64).device(kGpu)), 1, true),
                          "do not sum to a positive finite number");
  CHECK_THROWS_CONTAINING(multinomial(from_vector<double>({1, 0, 2}, {3}).to(kGpu), 3),
                          "which has 2 categories of positive weight");
}

TEST_CASE("index errors on the GPU are raised on the host, naming the op, the value and the size" *
          doctest::skip(!cuda_is_available())) {
  const Tensor x = randn({3, 4}, TensorOptions(kFloat32).device(kGpu));
  CHECK_THROWS_CONTAINING(gather(x, 1, from_vector<int64_t>({0, 4, 1, 2, 3, 0}, {3, 2}).to(kGpu)),
                          "gather: index 4 is out of range for dimension 1 with size 4");
  CHECK_THROWS_CONTAINING(scatter_add(x, 0, from_vector<int64_t>({-2}, {1, 1}).to(kGpu), x),
                          "scatter_add: index -2 is out of range for dimension 0 with size 3");
  CHECK_THROWS_CONTAINING(index_select(x, 0, from_vector<int64_t>({0, 3}, {2}).to(kGpu)),
                          "index_select: index 3 is out of range for dimension 0 with size 3");
  CHECK_THROWS_CONTAINING(embedding(x, from_vector<int64_t>({9}, {1}).to(kGpu)),
                          "embedding: index 9 is out of range for dimension 0 with size 3");
  CHECK_THROWS_CONTAINING(gather(x, 1, zeros({3, 2}, kInt64)), "gather: expected all tensors on one device");
  // The device is still usable after the errors.
  CHECK(gather(x, 1, zeros({3, 2}, TensorOptions(kInt64).device(kGpu))).sizes() == Shape{3, 2});
}
