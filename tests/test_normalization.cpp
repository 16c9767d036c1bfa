// layer_norm, rms_norm and layer_norm_gelu on the CPU: values against plain double loops
// written here, values and every gradient against the composite twins (the same formulas
// from the public ops, differentiated by the tape), gradcheck, the half types, empty
// inputs, the errors, and dweight/dbias bitwise independent of the thread count.
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "tests/normalization_test_ops.h"

using namespace minigrad;
using namespace minigrad::test;

namespace {

// The op row by row in doubles: the statistics in one loop each, GELU from its definition.
Tensor reference(NormOp op, const Tensor& x, int64_t hidden, const std::optional<Tensor>& w,
                 const std::optional<Tensor>& b) {
  const std::vector<double> v = x.to_vector<double>();
  const std::vector<double> wv = w ? w->to_vector<double>() : std::vector<double>(hidden, 1.0);
  const std::vector<double> bv = b ? b->to_vector<double>() : std::vector<double>(hidden, 0.0);
  std::vector<double> out(v.size());
  for (size_t row = 0; row < v.size() / hidden; ++row) {
    const double* in = v.data() + row * hidden;
    double mean = 0.0;
    if (op != NormOp::RMSNorm) {
      for (int64_t i = 0; i < hidden; ++i) mean += in[i];
      mean /= hidden;
    }
    double square_sum = 0.0;
    for (int64_t i = 0; i < hidden; ++i) square_sum += (in[i] - mean) * (in[i] - mean);
    const double denominator = std::sqrt(square_sum / hidden + kNormEps);
    for (int64_t i = 0; i < hidden; ++i) {
      const double z = (in[i] - mean) / denominator * wv[i] + bv[i];
      double y = z;
      if (op == NormOp::GeluExact) y = 0.5 * z * (1.0 + std::erf(z / std::sqrt(2.0)));
      if (op == NormOp::GeluTanh)
        y = 0.5 * z * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (z + 0.044715 * z * z * z)));
      out[row * hidden + i] = y;
    }
  }
  return from_vector(out, x.sizes());
}

// Inputs with a mean far from 0 and a spread of 2: a wrong mean or variance shows.
Tensor sample_input(const Shape& shape, DType dtype = kFloat64) {
  return (randn(shape, kFloat64) * 2.0 + 3.0).to(dtype);
}
Tensor sample_affine(const Shape& shape, DType dtype = kFloat64) {
  return (randn(shape, kFloat64) * 0.5 + 1.0).to(dtype);
}

struct Case {
  Shape x_shape;
  Shape normalized_shape;
};
const std::vector<Case> kCases = {{{4, 1}, {1}},     {{3, 5}, {5}},         {{2, 3, 33}, {33}},
                                  {{5, 128}, {128}}, {{2, 3, 4}, {3, 4}}, {{7}, {7}}};

// Runs fused and twin with a random upstream gradient and compares values and the
// gradients of x, weight and bias.
void check_against_twin(NormOp op, const Tensor& x_values, const Shape& shape, bool affine, DType dtype, double tol,
                        const std::function<Tensor(const Tensor&)>& view = [](const Tensor& t) { return t; }) {
  const Tensor w_values = sample_affine(shape, dtype);
  const Tensor b_values = sample_affine(shape, dtype) - 1.0;
  const Tensor upstream = randn(view(x_values).sizes(), kFloat64).to(dtype);
  tensor_list grads[2];
  Tensor outputs[2];
  for (int which = 0; which < 2; ++which) {
    const Tensor x = x_values.detach().requires_grad_();
    std::optional<Tensor> w, b;
    if (affine) w = w_values.detach().requires_grad_();
    if (affine && has_bias(op)) b = b_values.detach().requires_grad_();
    outputs[which] = which == 0 ? fused(op, view(x), shape, w, b) : twin(op, view(x), shape, w, b);
    (outputs[which] * upstream).sum().backward();
    grads[which] = {x.grad(), w ? w->grad() : Tensor(), b ? b->grad() : Tensor()};
  }
  CHECK_ALLCLOSE(outputs[0], outputs[1], tol, tol);
  for (size_t i = 0; i < 3; ++i) {
    CAPTURE(i);
    REQUIRE(grads[0][i].defined() == grads[1][i].defined());
    if (grads[0][i].defined()) CHECK_ALLCLOSE(grads[0][i], grads[1][i], tol, tol);
  }
}

}  // namespace

TEST_CASE("normalizations match plain double loops") {
  manual_seed(300);
  for (NormOp op : kNormOps) {
    CAPTURE(op_name(op));
    for (const Case& c : kCases) {
      CAPTURE(shape_str(c.x_shape));
      const Tensor x = sample_input(c.x_shape);
      const int64_t hidden = shape_numel(c.normalized_shape);
      CHECK_ALLCLOSE(fused(op, x, c.normalized_shape, std::nullopt, std::nullopt),
                     reference(op, x, hidden, std::nullopt, std::nullopt), 1e-12, 1e-12);
      const Tensor w = sample_affine(c.normalized_shape);
      const std::optional<Tensor> b =
          has_bias(op) ? std::optional<Tensor>(sample_affine(c.normalized_shape)) : std::nullopt;
      CHECK_ALLCLOSE(fused(op, x, c.normalized_shape, w, b), reference(op, x, hidden, w, b), 1e-12, 1e-12);
    }
  }
}

TEST_CASE("normalizations: values and the gradients of x, weight and bias agree with the composite twins") {
  manual_seed(301);
  for (NormOp op : kNormOps) {
    CAPTURE(op_name(op));
    for (const Case& c : kCases) {
      CAPTURE(shape_str(c.x_shape));
      for (bool affine : {false, true}) {
        CAPTURE(affine);
        check_against_twin(op, sample_input(c.x_shape), c.normalized_shape, affine, kFloat64, 1e-10);
        check_against_twin(op, sample_input(c.x_shape, kFloat32), c.normalized_shape, affine, kFloat32, 2e-4);
      }
    }
  }
}

TEST_CASE("normalizations read non-contiguous inputs") {
  manual_seed(302);
  for (NormOp op : kNormOps) {
    CAPTURE(op_name(op));
    // [6, 4] transposed to [4, 6], rows of 6 strided by 4; a slice with a step.
    check_against_twin(op, sample_input({6, 4}), {6}, true, kFloat64, 1e-10,
                       [](const Tensor& t) { return t.transpose(0, 1); });
    check_against_twin(op, sample_input({3, 10}), {5}, true, kFloat64, 1e-10,
                       [](const Tensor& t) { return t.slice(1, 0, 10, 2); });
  }
}

TEST_CASE("gradcheck: the normalizations with and without weight and bias") {
  manual_seed(303);
  for (NormOp op : kNormOps) {
    CAPTURE(op_name(op));
    for (const Case& c : {Case{{3, 5}, {5}}, Case{{2, 2, 3}, {2, 3}}, Case{{2, 1}, {1}}}) {
      CAPTURE(shape_str(c.x_shape));
      const Tensor x = sample_input(c.x_shape).requires_grad_();
      const Tensor w = sample_affine(c.normalized_shape).requires_grad_();
      const Tensor b = sample_affine(c.normalized_shape).requires_grad_();
      const Shape shape = c.normalized_shape;
      const auto plain = [op, shape](const tensor_list& t) {
        return fused(op, t[0], shape, std::nullopt, std::nullopt);
      };
      const auto with_affine = [op, shape](const tensor_list& t) {
        return fused(op, t[0], shape, t[1], t.size() > 2 ? std::optional<Tensor>(t[2]) : std::nullopt);
      };
      CHECK_GRADCHECK(plain, tensor_list{x});
      const tensor_list inputs = has_bias(op) ? tensor_list{x, w, b} : tensor_list{x, w};
      CHECK_GRADCHECK(with_affine, inputs);
    }
  }
}

TEST_CASE("normalizations: only the wanted gradients are computed") {
  manual_seed(304);
  const Tensor x = sample_input({3, 4});
  const Tensor w = sample_affine({4}).requires_grad_();
  const Tensor b = sample_affine({4});
  layer_norm(x, {4}, w, b).sum().backward();
  REQUIRE(w.grad().defined());
  CHECK(!b.grad().defined());
  const Tensor w_twin = w.detach().requires_grad_();
  composite::layer_norm(x, {4}, w_twin, b).sum().backward();
  CHECK_ALLCLOSE(w.grad(), w_twin.grad(), 1e-10, 1e-12);
}

TEST_CASE("normalizations are once differentiable, naming their Function") {
  manual_seed(305);
  const Tensor x = sample_input({2, 3}).requires_grad_();
  const std::vector<std::pair<std::function<Tensor(const Tensor&)>, std::string>> ops = {
      {[](const Tensor& t) { return layer_norm(t, {3}); }, "LayerNorm"},
      {[](const Tensor& t) { return layer_norm_gelu(t, {3}); }, "LayerNormGelu"},
      {[](const Tensor& t) { return rms_norm(t, {3}); }, "RMSNorm"}};
  for (const auto& [op, name] : ops) {
    CAPTURE(name);
    const Tensor y = op(x);
    const tensor_list first = autograd::grad({(y * y).sum()}, {x}, {}, std::nullopt, /*create_graph=*/true);
    CHECK_THROWS_CONTAINING(first[0].sum().backward(), name + ".backward is once differentiable");
  }
}

TEST_CASE("rms_norm's default eps is float's machine epsilon (double's for float64)") {
  // A row of zeros: x / sqrt(0 + eps) = 0, but the gradient is 1 / sqrt(eps).
  for (DType dtype : {kFloat64, kFloat32}) {
    CAPTURE(dtype);
    const Tensor x = zeros({1, 2}, dtype).requires_grad_();
    rms_norm(x, {2}).sum().backward();
    const double eps = dtype == kFloat64 ? std::numeric_limits<double>::epsilon()
                                         : static_cast<double>(std::numeric_limits<float>::epsilon());
    CHECK(x.grad().to_vector<double>()[0] == doctest::Approx(1.0 / std::sqrt(eps)).epsilon(1e-6));
  }
}

TEST_CASE("normalizations in float32, float16 and bfloat16 against float64") {
  manual_seed(306);
  for (NormOp op : kNormOps) {
    CAPTURE(op_name(op));
    const Tensor x = sample_input({6, 40});
    const Tensor w = sample_affine({40});
    const Tensor b = sample_affine({40});
    const Tensor upstream = randn({6, 40}, kFloat64);
    const std::optional<Tensor> bias = has_bias(op) ? std::optional<Tensor>(b) : std::nullopt;
    for (DType dtype : {kFloat32, kFloat16, kBFloat16}) {
      CAPTURE(dtype);
      const double tol = dtype == kFloat32 ? 1e-5 : dtype == kFloat16 ? 1e-2 : 5e-2;
      // The low-precision inputs, and float64 on the same rounded values.
      const Tensor xl = x.to(dtype).requires_grad_(), x64 = x.to(dtype).to(kFloat64).requires_grad_();
      const Tensor wl = w.to(dtype).requires_grad_(), w64 = w.to(dtype).to(kFloat64).requires_grad_();
      const std::optional<Tensor> bl = bias ? std::optional<Tensor>(bias->to(dtype)) : std::nullopt;
      const std::optional<Tensor> b64 = bias ? std::optional<Tensor>(bias->to(dtype).to(kFloat64)) : std::nullopt;
      const Tensor yl = fused(op, xl, {40}, wl, bl);
      const Tensor y64 = fused(op, x64, {40}, w64, b64);
      CHECK(yl.dtype() == dtype);
      CHECK_ALLCLOSE(yl.to(kFloat64), y64, tol, tol);
      (yl * upstream.to(dtype)).sum().backward();
      (y64 * upstream.to(dtype).to(kFloat64)).sum().backward();
      CHECK(xl.grad().dtype() == dtype);
      CHECK_ALLCLOSE(xl.grad().to(kFloat64), x64.grad(), tol, 10 * tol);
      // dweight sums 6 rows: an absolute tolerance of its magnitude.
      CHECK_ALLCLOSE(wl.grad().to(kFloat64), w64.grad(), tol, 10 * tol);
    }
  }
}

TEST_CASE("dweight and dbias do not depend on the thread count") {
  manual_seed(307);
  const int threads = get_num_threads();
  // Enough rows for several chunks of rows (each about 32768 elements).
  const Tensor x = sample_input({700, 100}, kFloat32);
  const Tensor upstream = randn({700, 100});
  tensor_list grads[2];
  for (int run = 0; run < 2; ++run) {
    set_num_threads(run == 0 ? 1 : 3);
    manual_seed(308);
    const Tensor wl = (randn({100}) + 1.0).requires_grad_(), bl = randn({100}).requires_grad_();
    const Tensor xl = x.detach().requires_grad_();
    (layer_norm_gelu(xl, {100}, wl, bl) * upstream).sum().backward();
    grads[run] = {xl.grad(), wl.grad(), bl.grad()};
  }
  set_num_threads(threads);
  for (size_t i = 0; i < 3; ++i) CHECK(same_bits(grads[0][i], grads[1][i]));
}

TEST_CASE("normalizations of empty inputs") {
  for (NormOp op : kNormOps) {
    CAPTURE(op_name(op));
    // No rows: an empty output, and zero dweight and dbias.
    const Tensor x = zeros({0, 4}, kFloat64).requires_grad_();
    const Tensor w = ones({4}, kFloat64).requires_grad_();
    const Tensor b = ones({4}, kFloat64).requires_grad_();
    const std::optional<Tensor> bias = has_bias(op) ? std::optional<Tensor>(b) : std::nullopt;
    const Tensor y = fused(op, x, {4}, w, bias);
    CHECK(y.sizes() == Shape{0, 4});
    y.sum().backward();
    CHECK(x.grad().sizes() == Shape{0, 4});
    CHECK(same_bits(w.grad(), zeros({4}, kFloat64)));
    if (bias) CHECK(same_bits(b.grad(), zeros({4}, kFloat64)));
    // Rows of no elements: an empty output too.
    CHECK(fused(op, zeros({3, 0}, kFloat64), {0}, std::nullopt, std::nullopt).sizes() == Shape{3, 0});
  }
}

TEST_CASE("normalization errors name the op and the argument") {
  const Tensor x = zeros({2, 3});
  CHECK_THROWS_CONTAINING(layer_norm(x, {}), "layer_norm: argument 'normalized_shape' is empty");
  CHECK_THROWS_CONTAINING(layer_norm(x, {2}), "layer_norm: argument 'normalized_shape' is [2]");
  CHECK_THROWS_CONTAINING(rms_norm(x, {2, 2, 3}), "rms_norm: argument 'normalized_shape' is [2, 2, 3]");
  CHECK_THROWS_CONTAINING(layer_norm(zeros({2, 3}, kInt64), {3}),
                          "layer_norm: expected a floating-point tensor for argument 'input'");
  CHECK_THROWS_CONTAINING(layer_norm(Tensor(), {3}), "layer_norm: argument 'input' is an undefined tensor");
  CHECK_THROWS_CONTAINING(layer_norm(x, {3}, zeros({2})), "layer_norm: argument 'weight' has shape [2]");
  CHECK_THROWS_CONTAINING(layer_norm_gelu(x, {3}, std::nullopt, zeros({1, 3})),
                          "layer_norm_gelu: argument 'bias' has shape [1, 3]");
  CHECK_THROWS_CONTAINING(rms_norm(x, {3}, zeros({3}, kFloat64)),
                          "rms_norm: expected one dtype, but argument 'weight' is float64");
  CHECK_THROWS_CONTAINING(layer_norm(x, {3}, Tensor()), "layer_norm: argument 'weight' is an undefined tensor");
  CHECK_THROWS_CONTAINING(composite::layer_norm(x, {4}), "layer_norm: argument 'normalized_shape' is [4]");
}
