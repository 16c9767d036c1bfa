// matmul: 1-D, 2-D, batched with broadcast batch dims, against a naive triple loop in
// double written here from the definition. gradcheck and gradgradcheck of every shape
// class run from the op table (tests/op_table.h).
#include <algorithm>
#include <optional>
#include <vector>

#include "tests/reference_indexing.h"
#include "tests/test_support.h"

using namespace minigrad;
using namespace minigrad::test;

namespace {

// Where a matrix of an operand with batch dims `own_batch` sits for the broadcast batch
// multi-index `index`: dims aligned at the right, size-1 dims reading matrix 0.
int64_t source_matrix(const Shape& index, const Shape& own_batch) {
  Shape own_index(own_batch.size());
  const size_t lead = index.size() - own_batch.size();
  for (size_t d = 0; d < own_batch.size(); ++d) own_index[d] = own_batch[d] == 1 ? 0 : index[lead + d];
  return ravel(own_index, own_batch);
}

// NumPy's matmul on doubles, from its definition: 1-D operands promoted to a row / a
// column, batch dims broadcast, then sum_p a[i][p] * b[p][j] for every matrix pair.
Tensor reference_matmul(const Tensor& a, const Tensor& b) {
  Shape a_sizes = a.sizes();
  Shape b_sizes = b.sizes();
  if (a.dim() == 1) a_sizes.insert(a_sizes.begin(), 1);
  if (b.dim() == 1) b_sizes.push_back(1);
  const int64_t m = a_sizes[a_sizes.size() - 2];
  const int64_t k = a_sizes.back();
  const int64_t n = b_sizes.back();
  const Shape a_batch(a_sizes.begin(), a_sizes.end() - 2);
  const Shape b_batch(b_sizes.begin(), b_sizes.end() - 2);
  Shape batch(std::max(a_batch.size(), b_batch.size()), 1);
  for (size_t i = 0; i < batch.size(); ++i) {
    const size_t from_right = batch.size() - 1 - i;
    const int64_t sa = from_right < a_batch.size() ? a_batch[a_batch.size() - 1 - from_right] : 1;
    const int64_t sb = from_right < b_batch.size() ? b_batch[b_batch.size() - 1 - from_right] : 1;
    batch[i] = sa == 1 ? sb : sa;
  }
  const std::vector<double> va = a.to_vector<double>();
  const std::vector<double> vb = b.to_vector<double>();
  std::vector<double> out;
  for (int64_t bi = 0; bi < reference_numel(batch); ++bi) {
    const Shape index = unravel(bi, batch);
    const int64_t a_base = source_matrix(index, a_batch) * m * k;
    const int64_t b_base = source_matrix(index, b_batch) * k * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0.0;
        for (int64_t p = 0; p < k; ++p)
          s += va[static_cast<size_t>(a_base + i * k + p)] * vb[static_cast<size_t>(b_base + p * n + j)];
        out.push_back(s);
      }
  }
  Shape result = batch;
  if (a.dim() > 1) result.push_back(m);
  if (b.dim() > 1) result.push_back(n);
  return float64_tensor(out, result);
}

struct ShapeCase {
  Shape a, b, result;
};

const std::vector<ShapeCase> kShapeCases = {
    {{3}, {3}, {}},                          // dot product
    {{3}, {3, 4}, {4}},                      // vector x matrix
    {{2, 3}, {3}, {2}},                      // matrix x vector
    {{2, 3}, {3, 4}, {2, 4}},                // matrix x matrix
    {{5, 2, 3}, {5, 3, 4}, {5, 2, 4}},       // batched
    {{2, 1, 2, 3}, {5, 3, 4}, {2, 5, 2, 4}}, // broadcast batch dims on both sides
    {{5, 2, 3}, {3, 4}, {5, 2, 4}},          // batch x matrix
    {{2, 3}, {2, 3, 4}, {2, 2, 4}},          // matrix x batch
    {{3}, {2, 3, 4}, {2, 4}},                // vector x batch
    {{2, 2, 3}, {3}, {2, 2}},                // batch x vector
};

}  // namespace

TEST_CASE("matmul matches the reference for 1-D, 2-D, batched and broadcast shapes") {
  manual_seed(10);
  for (const ShapeCase& c : kShapeCases) {
    INFO("self " << shape_str(c.a) << " other " << shape_str(c.b));
    Tensor a = randn(c.a, kFloat64);
    Tensor b = randn(c.b, kFloat64);
    Tensor out = matmul(a, b);
    CHECK(out.sizes() == c.result);
    CHECK_ALLCLOSE(out, reference_matmul(a, b), 1e-12, 1e-12);
  }
}

TEST_CASE("gradcheck: only one operand requiring grad; backward skips the other") {
  manual_seed(11);
  Tensor a = randn({2, 3}, kFloat64).requires_grad_();
  Tensor b = randn({3, 4}, kFloat64);
  CHECK_GRADCHECK([](const tensor_list& t) { return matmul(t[0], t[1]); }, (tensor_list{a, b}));
  CHECK_GRADCHECK([](const tensor_list& t) { return matmul(t[0], t[1]); },
                  (tensor_list{a.detach(), b.detach().requires_grad_()}));
}

TEST_CASE("a size that is no multiple of the 64-block agrees with the naive triple loop") {
  manual_seed(12);
  Tensor a = randn({70, 65}, kFloat64);
  Tensor b = randn({65, 67}, kFloat64);
  CHECK_ALLCLOSE(matmul(a, b), reference_matmul(a, b), 1e-12, 1e-12);

  Tensor batched = randn({3, 70, 65}, kFloat64);
  CHECK_ALLCLOSE(matmul(batched, b), reference_matmul(batched, b), 1e-12, 1e-12);

  // float32 accumulates in float32: 65 products of N(0,1) numbers, each rounding ~6e-8 relative.
  Tensor a32 = a.to(kFloat32);
  Tensor b32 = b.to(kFloat32);
  Tensor out32 = matmul(a32, b32);
  CHECK(out32.dtype() == kFloat32);
  CHECK_ALLCLOSE(out32, reference_matmul(a32, b32), 1e-4, 1e-4);
}

TEST_CASE("transposed and sliced operands are read through their strides") {
  manual_seed(13);
  Tensor a = randn({4, 5}, kFloat64).t();                  // [5, 4]
  Tensor b = randn({6, 4}, kFloat64).t();                  // [4, 6]
  REQUIRE(!a.is_contiguous());
  CHECK_ALLCLOSE(matmul(a, b), reference_matmul(a, b), 1e-12, 1e-12);
  Tensor batch = randn({3, 4, 2}, kFloat64).transpose(0, 2);  // [2, 4, 3]
  Tensor every_other = randn({3, 10}, kFloat64).slice(1, 0, 10, 2);  // [3, 5]
  CHECK_ALLCLOSE(matmul(batch, every_other), reference_matmul(batch, every_other), 1e-12, 1e-12);

  Tensor x = randn({4, 5}, kFloat64).requires_grad_();
  Tensor y = randn({6, 4}, kFloat64).requires_grad_();
  CHECK_GRADCHECK([](const tensor_list& t) { return matmul(t[0].t(), t[1].t()); }, (tensor_list{x, y}));
  Tensor z = randn({3, 4, 2}, kFloat64).requires_grad_();
  Tensor w = randn({3, 6}, kFloat64).requires_grad_();
  CHECK_GRADCHECK([](const tensor_list& t) { return matmul(t[0].transpose(0, 2), t[1].slice(1, 0, 6, 2)); },
                  (tensor_list{z, w}));
}

TEST_CASE("the gradient is grad_out x other^T and self^T x grad_out") {
  Tensor a = from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3}).requires_grad_();
  Tensor b = from_vector<double>({1, -1, 2, 0, 0, 3}, {3, 2}).requires_grad_();
  matmul(a, b).sum().backward();
  // With grad_out all ones: grad_a[i][p] = sum_j b[p][j], grad_b[p][j] = sum_i a[i][p].
  CHECK(a.grad().to_vector<double>() == std::vector<double>{0, 2, 3, 0, 2, 3});
  CHECK(b.grad().to_vector<double>() == std::vector<double>{5, 5, 7, 7, 9, 9});
}

TEST_CASE("float16 and bfloat16 matmul by upcasting to float32") {
  manual_seed(14);
  for (DType half : {kFloat16, kBFloat16}) {
    CAPTURE(half);
    Tensor a = randn({2, 8, 16}).to(half);
    Tensor b = randn({16, 5}).to(half);
    Tensor out = matmul(a, b);
    CHECK(out.dtype() == half);
    // Inputs are the same rounded values; only the result's rounding (8 or 11 bits) differs.
    CHECK_ALLCLOSE(out, reference_matmul(a, b), 1e-2, 5e-2);
  }
}

TEST_CASE("matmul of empty tensors") {
  CHECK(matmul(zeros({0, 3}, kFloat64), zeros({3, 4}, kFloat64)).sizes() == Shape{0, 4});
  CHECK(matmul(zeros({0, 2, 3}, kFloat64), zeros({3, 4}, kFloat64)).sizes() == Shape{0, 2, 4});
  // An empty inner dim sums nothing: zeros.
  Tensor a = ones({2, 0}, kFloat64).requires_grad_();
  Tensor b = ones({0, 3}, kFloat64).requires_grad_();
  Tensor out = matmul(a, b);
  CHECK(out.to_vector<double>() == std::vector<double>(6, 0.0));
  out.sum().backward();
  CHECK(a.grad().sizes() == Shape{2, 0});
  CHECK(b.grad().sizes() == Shape{0, 3});
  CHECK(matmul(ones({0}, kFloat64), ones({0}, kFloat64)).item<double>() == 0.0);
}

TEST_CASE("matmul errors name the op and the arguments") {
  CHECK_THROWS_CONTAINING(matmul(zeros({2, 3}), zeros({4, 5})),
                          "matmul: size mismatch, 'self' is [2, 3] and 'other' is [4, 5] (3 != 4)");
  CHECK_THROWS_CONTAINING(matmul(zeros({3}), zeros({4})), "matmul: size mismatch, 'self' is [3] and 'other' is [4]");
  CHECK_THROWS_CONTAINING(matmul(scalar_tensor(1.0), zeros({3})), "matmul: both arguments need at least one dimension");
  CHECK_THROWS_CONTAINING(matmul(zeros({2, 3}), zeros({3, 2}, kFloat64)), "matmul: expected one dtype");
  CHECK_THROWS_CONTAINING(matmul(zeros({2, 3}, kInt64), zeros({3, 2}, kInt64)),
                          "matmul: expected a floating-point tensor for argument 'self'");
  CHECK_THROWS_CONTAINING(matmul(zeros({2, 2, 3}), zeros({3, 3, 4})), "matmul: shapes [2] and [3] do not broadcast");
  CHECK_THROWS_CONTAINING(matmul(Tensor(), zeros({3})), "matmul: argument 'self' is an undefined tensor");
}

TEST_CASE("the weight gradient of a batched input folds the batch: values match the per-batch sum") {
  manual_seed(15);
  // a [B, T, k] times a weight [k, n]: grad_b = sum over the batch of a[i]^T x grad[i],
  // computed as one product of [k, B*T] x [B*T, n].
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{3, 5, 4}, {4, 6}},        // activations x weight
      {{2, 3, 5, 4}, {4, 6}},     // two batch dims
      {{3, 5, 4}, {4}},           // a vector 'other'
      {{3, 5, 4}, {1, 4, 6}},     // 'other' with a batch dim of size 1
      {{1, 5, 4}, {4, 6}},        // a batch of one
  };
  for (const auto& [a_sizes, b_sizes] : cases) {
    INFO("self " << shape_str(a_sizes) << " other " << shape_str(b_sizes));
    Tensor a = randn(a_sizes, kFloat64).requires_grad_();
    Tensor b = randn(b_sizes, kFloat64).requires_grad_();
    Tensor out = matmul(a, b);
    Tensor grad_out = randn(out.sizes(), kFloat64);
    out.backward(grad_out);
    // The unfolded formula, one matrix of the batch at a time.
    const Tensor b_matrix = b.detach().dim() == 1 ? b.detach().unsqueeze(1) : b.detach().reshape({4, -1});
    const int64_t n = b_matrix.size(1);
    const Tensor a_batch = a.detach().reshape({-1, a_sizes[a_sizes.size() - 2], 4});
    const Tensor g_batch = grad_out.reshape({a_batch.size(0), a_batch.size(1), n});
    Tensor expected = zeros({4, n}, kFloat64);
    for (int64_t i = 0; i < a_batch.size(0); ++i)
      expected = expected + reference_matmul(a_batch.select(0, i).t(), g_batch.select(0, i));
    CHECK(b.grad().sizes() == b.sizes());
    CHECK_ALLCLOSE(b.grad(), expected.reshape(b_sizes), 1e-12, 1e-12);
    CHECK_GRADCHECK([](const tensor_list& t) { return matmul(t[0], t[1]); }, (tensor_list{a, b}));
  }
  // A non-contiguous batched input: the fold reads it through a copy.
  Tensor base = randn({5, 3, 4}, kFloat64).requires_grad_();
  Tensor w = randn({4, 2}, kFloat64).requires_grad_();
  CHECK_GRADCHECK([](const tensor_list& t) { return matmul(t[0].transpose(0, 1), t[1]); }, (tensor_list{base, w}));
  // An expanded (stride 0) incoming gradient, as sum() gives.
  matmul(base.transpose(0, 1), w).sum().backward();
  CHECK_ALLCLOSE(w.grad(), reference_matmul(base.detach().reshape({15, 4}).t(), ones({15, 2}, kFloat64)), 1e-12,
                 1e-12);
}

TEST_CASE("double backward: transposed operands, and only one operand requiring grad") {
  manual_seed(16);
  Tensor x = randn({4, 5}, kFloat64).requires_grad_();
  Tensor y = randn({6, 4}, kFloat64).requires_grad_();
  CHECK_GRADGRADCHECK([](const tensor_list& t) { return matmul(t[0].t(), t[1].t()); }, (tensor_list{x, y}));
  CHECK_GRADGRADCHECK([](const tensor_list& t) { return matmul(t[0].t(), t[1].t()); },
                      (tensor_list{x, y.detach()}));
}
