// linear, linear_gelu and mlp on the GPU, where the bias, GELU, gelu' and the bias
// gradients run in cuBLASLt's epilogues (cuda/blaslt.h): that the cases cuBLASLt serves
// take that path (no fallback), the fused path against the same layers run op by op on the
// GPU (cuBLAS + the project's kernels) in bfloat16, float16 and float32 (where float32 takes
// the bias epilogues only: the GELU ones are not precise enough for it), against the CPU in
// float64; odd shapes that fall back (in/out not multiples of 8, batch 1, 3-D inputs);
// gradcheck and gradgradcheck in float64 on the GPU. Outputs are allocated after the
// allocator's cache was filled with NaN, so an element an epilogue forgets shows.
// linear_gelu's backward computes d(pre) and the bias gradient in one kernel of its own
// (cuda/gelu_bias_backward.h): checked directly (d(pre) bit for bit gelu_backward's, the bias
// gradient against a float64 sum, the same bits on every run, the shapes it refuses), and
// through linear_gelu with every combination of gradients wanted.
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <vector>

#include "tests/cuda_test_support.h"
#include <minigrad/config.h>  // MINIGRAD_WITH_CUDA
#if MINIGRAD_WITH_CUDA
#include <minigrad/cuda/blaslt.h>
#include <minigrad/cuda/gelu_bias_backward.h>
#endif

using namespace minigrad;
using namespace minigrad::test;

namespace {

using Layer = std::function<Tensor(const tensor_list&)>;

void poison_gpu_cache(int64_t elements) {
  (void)full({elements}, std::numeric_limits<double>::quiet_NaN(), TensorOptions(kFloat32).device(kGpu));
}

std::optional<Tensor> maybe(const Tensor& t) { return t.defined() ? std::optional<Tensor>(t) : std::nullopt; }


// Every element of got within tol of want, scaled by want's largest magnitude (a GEMM's error
// grows with its inner size, not with each element's value).
void check_close_scaled(const Tensor& got, const Tensor& want, double tol) {
  REQUIRE(got.sizes() == want.sizes());
  const Tensor g = got.to(kCPU).to(kFloat64), w = want.to(kCPU).to(kFloat64);
  CHECK(!isnan(g).any().item<bool>());
  const double scale = std::max(1.0, max(abs(w)).item<double>());
  const double worst = max(abs(g - w)).item<double>();
  CHECK(worst <= tol * scale);
}

struct Inputs {
  tensor_list tensors;  // the layer's inputs, on the GPU
  Tensor dy;
};

// x [rows, in], then the layer's parameters (w [out, in], b [out]; for mlp w1, b1, w2, b2),
// drawn on the CPU in float64 and rounded to dtype on the GPU.
Inputs linear_inputs(int64_t rows, int64_t in, int64_t out, DType dtype, bool with_bias) {
  const double w_scale = 1.0 / std::sqrt(static_cast<double>(in));
  Inputs i;
  i.tensors = {randn({rows, in}, kFloat64), randn({out, in}, kFloat64) * w_scale,
               with_bias ? randn({out}, kFloat64) : Tensor()};
  for (Tensor& t : i.tensors)
    if (t.defined()) t = t.to(dtype).to(kGpu);
  i.dy = randn({rows, out}, kFloat64).to(dtype).to(kGpu);
  return i;
}

Inputs mlp_inputs(int64_t rows, int64_t in, int64_t hidden, int64_t out, DType dtype, bool with_bias) {
  Inputs i;
  i.tensors = {randn({rows, in}, kFloat64), randn({hidden, in}, kFloat64) / std::sqrt(static_cast<double>(in)),
               with_bias ? randn({hidden}, kFloat64) : Tensor(),
               randn({out, hidden}, kFloat64) / std::sqrt(static_cast<double>(hidden)),
               with_bias ? randn({out}, kFloat64) : Tensor()};
  for (Tensor& t : i.tensors)
    if (t.defined()) t = t.to(dtype).to(kGpu);
  i.dy = randn({rows, out}, kFloat64).to(dtype).to(kGpu);
  return i;
}

double tolerance_of(DType dtype) {
  if (dtype == kBFloat16) return 3e-2;
  if (dtype == kFloat16) return 4e-3;
  return 1e-4;  // float32: cuBLASLt and cuBLAS may sum in different orders
}

const GeluApproximation kTanh = GeluApproximation::Tanh;

}  // namespace

#if MINIGRAD_WITH_CUDA

namespace {

// The fused layers against the same layers op by op, for one dtype: the cases cuBLASLt serves
// take its epilogues (no fallback), and every output and gradient matches.
void check_fused_against_ops(DType dtype) {
  for (bool with_bias : {true, false}) {
    CAPTURE(dtype_name(dtype));
    CAPTURE(with_bias);
    // rows, in and out chosen so that every operand is 16-byte aligned with leading
    // dimensions that are multiples of 8: the case the epilogues exist for.
    const Inputs lin = linear_inputs(96, 64, 136, dtype, with_bias);
    const Inputs block = mlp_inputs(80, 72, 256, 40, dtype, with_bias);
    struct Case {
      const char* name;
      const Inputs& inputs;
      Layer fused, ops;
    };
    const Case cases[] = {
        {"linear", lin, [](const tensor_list& t) { return linear(t[0], t[1], maybe(t[2])); },
         [](const tensor_list& t) { return composite::linear(t[0], t[1], maybe(t[2])); }},
        {"linear_gelu", lin, [](const tensor_list& t) { return linear_gelu(t[0], t[1], maybe(t[2]), kTanh); },
         [](const tensor_list& t) { return composite::linear_gelu(t[0], t[1], maybe(t[2]), kTanh); }},
        {"mlp", block,
         [](const tensor_list& t) { return mlp(t[0], t[1], maybe(t[2]), t[3], maybe(t[4]), kTanh); },
         [](const tensor_list& t) { return composite::mlp(t[0], t[1], maybe(t[2]), t[3], maybe(t[4]), kTanh); }},
    };
    for (const Case& c : cases) {
      CAPTURE(c.name);
      // linear without a bias is a plain GEMM: nothing for an epilogue to do.
      if (std::string(c.name) == "linear" && !with_bias) continue;
      poison_gpu_cache(1 << 22);
      const int64_t fallbacks_before = cuda::gemm_with_epilogue_fallbacks();
      const tensor_list fused = value_and_grads(c.inputs.tensors, c.inputs.dy, c.fused);
      // The inputs as they are (no gradient wanted): the forward records nothing, and its GELU
      // epilogues write no pre-activation.
      const Tensor inference = c.fused(c.inputs.tensors);
      CHECK(cuda::gemm_with_epilogue_fallbacks() == fallbacks_before);
      const tensor_list ops = value_and_grads(c.inputs.tensors, c.inputs.dy, c.ops);
      CHECK(!inference.requires_grad());
      check_close_scaled(inference, ops[0], tolerance_of(dtype));
      REQUIRE(fused.size() == ops.size());
      for (size_t i = 0; i < fused.size(); ++i) {
        CAPTURE(i);
        CHECK(fused[i].dtype() == dtype);
        check_close_scaled(fused[i], ops[i], tolerance_of(dtype));
      }
    }
  }
}

}  // namespace

// Test cases whose results come from cuBLAS's half-precision kernels say so in their names:
// compute-sanitizer's initcheck and racecheck cannot follow those kernels on sm_90
// (scripts/gpu-check leaves such cases to memcheck).
TEST_CASE("linear, linear_gelu and mlp take cuBLASLt's epilogues forward and backward, and match the ops run one by "
          "one: float32" * doctest::skip(!cuda_is_available())) {
  manual_seed(1100);
  check_fused_against_ops(kFloat32);
}

TEST_CASE("linear, linear_gelu and mlp take cuBLASLt's epilogues forward and backward, and match the ops run one by "
          "one: float16 and bfloat16 (half-precision cuBLAS)" * doctest::skip(!cuda_is_available())) {
  manual_seed(1101);
  for (DType dtype : {kBFloat16, kFloat16}) check_fused_against_ops(dtype);
}

namespace {

// grad and pre [rows, n] on the GPU, random (pre spread over GELU's curve), and outputs for
// gelu_backward_and_bias_grad filled with NaN, so an element it leaves unwritten shows.
struct GeluBiasCase {
  Tensor grad, pre, d_pre, d_bias;
};
GeluBiasCase gelu_bias_case(const Shape& shape, DType dtype) {
  const TensorOptions on_gpu = TensorOptions(dtype).device(kGpu);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  return {randn(shape, kFloat64).to(dtype).to(kGpu), (randn(shape, kFloat64) * 2).to(dtype).to(kGpu),
          full(shape, nan, on_gpu), full({shape[1]}, nan, on_gpu)};
}

// The relative rounding error of one operation in dtype.
double unit_roundoff(DType dtype) {
  if (dtype == kBFloat16) return std::ldexp(1.0, -8);
  if (dtype == kFloat16) return std::ldexp(1.0, -11);
  if (dtype == kFloat32) return std::ldexp(1.0, -24);
  return std::ldexp(1.0, -53);
}

}  // namespace

TEST_CASE("gelu_backward_and_bias_grad: d_pre is gelu_backward's bit for bit, d_bias the sum of its rows, the same "
          "bits on every run" * doctest::skip(!cuda_is_available())) {
  manual_seed(1105);
  // A row, rows that are a multiple of nothing, rows longer than a block's columns (1032
  // bfloat16 elements are 129 vectors), and more rows than one chunk takes.
  const Shape shapes[] = {{1, 8}, {37, 24}, {300, 1032}, {2050, 264}};
  for (DType dtype : {kBFloat16, kFloat16, kFloat32, kFloat64}) {
    for (GeluApproximation approximate : {GeluApproximation::None, kTanh}) {
      for (const Shape& shape : shapes) {
        CAPTURE(dtype_name(dtype));
        CAPTURE(static_cast<int>(approximate));
        CAPTURE(shape_str(shape));
        const GeluBiasCase c = gelu_bias_case(shape, dtype);
        REQUIRE(cuda::gelu_backward_and_bias_grad(c.grad, c.pre, approximate, c.d_pre, c.d_bias));
        CHECK(same_bits(c.d_pre, gelu_backward(c.grad, c.pre, approximate)));

        // The reference: the same rounded inputs, gelu' and the sum in float64 on the CPU. The
        // kernel computes each term in float (double for float64), sums the terms in that type
        // and rounds the sum to dtype once. Allowed: a rounding of dtype on the result, plus a
        // rounding of the accumulation type per row (and 16 for the terms' own errors) on the
        // terms' magnitudes, which |grad| (1 + |pre|) bounds (|gelu'(x)| <= 1 + |x|).
        const Tensor grad = c.grad.to(kCPU).to(kFloat64), pre = c.pre.to(kCPU).to(kFloat64);
        const Tensor want = sum(gelu_backward(grad, pre, approximate), {0});
        const Tensor magnitude = sum(abs(grad) * (abs(pre) + 1.0), {0});
        const double accumulation = unit_roundoff(dtype == kFloat64 ? kFloat64 : kFloat32);
        const Tensor allowed = abs(want) * (2 * unit_roundoff(dtype)) +
                               magnitude * (accumulation * static_cast<double>(shape[0] + 16));
        const Tensor got = c.d_bias.to(kCPU).to(kFloat64);
        CHECK(!isnan(got).any().item<bool>());
        CHECK(max(abs(got - want) - allowed).item<double>() <= 0.0);

        // Again into fresh outputs: the same bits (a fixed order of summation, no atomics).
        const GeluBiasCase again{c.grad, c.pre, full(shape, 0.5, c.d_pre.options()),
                                 full({shape[1]}, 0.5, c.d_bias.options())};
        REQUIRE(cuda::gelu_backward_and_bias_grad(again.grad, again.pre, approximate, again.d_pre, again.d_bias));
        CHECK(same_bits(again.d_pre, c.d_pre));
        CHECK(same_bits(again.d_bias, c.d_bias));
      }
    }
  }
}

TEST_CASE("gelu_backward_and_bias_grad: rows that are not 16-byte vectors are refused untouched; no rows give a "
          "zero bias gradient" * doctest::skip(!cuda_is_available())) {
  manual_seed(1106);
  // 7 bfloat16 elements a row: not a whole number of 8-element vectors.
  const GeluBiasCase odd = gelu_bias_case({4, 7}, kBFloat16);
  CHECK(!cuda::gelu_backward_and_bias_grad(odd.grad, odd.pre, kTanh, odd.d_pre, odd.d_bias));
  CHECK(isnan(odd.d_pre).all().item<bool>());
  CHECK(isnan(odd.d_bias).all().item<bool>());

  // Rows of 8 that start one element (2 bytes) past a 16-byte boundary.
  const GeluBiasCase aligned = gelu_bias_case({4, 8}, kBFloat16);
  Tensor shifted = empty({33}, TensorOptions(kBFloat16).device(kGpu)).slice(0, 1, 33).view({4, 8});
  shifted.copy_(aligned.grad);
  REQUIRE(shifted.is_contiguous());
  CHECK(!cuda::gelu_backward_and_bias_grad(shifted, aligned.pre, kTanh, aligned.d_pre, aligned.d_bias));
  CHECK(isnan(aligned.d_pre).all().item<bool>());
  CHECK(isnan(aligned.d_bias).all().item<bool>());

  for (DType dtype : {kBFloat16, kFloat32, kFloat64}) {
    CAPTURE(dtype_name(dtype));
    const GeluBiasCase none = gelu_bias_case({0, 16}, dtype);
    REQUIRE(cuda::gelu_backward_and_bias_grad(none.grad, none.pre, GeluApproximation::None, none.d_pre, none.d_bias));
    CHECK(same_bits(none.d_bias, zeros({16}, TensorOptions(dtype).device(kGpu))));
    const GeluBiasCase empty_rows = gelu_bias_case({5, 0}, dtype);
    CHECK(cuda::gelu_backward_and_bias_grad(empty_rows.grad, empty_rows.pre, kTanh, empty_rows.d_pre,
                                            empty_rows.d_bias));
  }
}

namespace {

// linear_gelu against its composite twin on the GPU in dtype, for every non-empty set of {x,
// weight, bias} requiring a gradient: the bias's alone, the weight's alone (a bias present but
// not wanted), both, with or without x's. Where the bias's is wanted the backward takes
// gelu_backward_and_bias_grad; elsewhere gelu_backward.
void check_linear_gelu_any_grads(DType dtype) {
  const Inputs in = linear_inputs(72, 40, 56, dtype, true);
  for (GeluApproximation approximate : {GeluApproximation::None, kTanh}) {
    for (int wanted = 1; wanted < 8; ++wanted) {
      CAPTURE(dtype_name(dtype));
      CAPTURE(static_cast<int>(approximate));
      CAPTURE(wanted);
      auto run = [&](bool fused) {
        tensor_list leaves;
        for (size_t i = 0; i < in.tensors.size(); ++i)
          leaves.push_back(in.tensors[i].detach().requires_grad_((wanted >> i & 1) != 0));
        poison_gpu_cache(1 << 20);
        const Tensor y = fused ? linear_gelu(leaves[0], leaves[1], leaves[2], approximate)
                               : composite::linear_gelu(leaves[0], leaves[1], leaves[2], approximate);
        y.backward(in.dy);
        tensor_list grads;
        for (const Tensor& leaf : leaves) grads.push_back(leaf.grad());
        return grads;
      };
      const tensor_list fused = run(true), ops = run(false);
      for (size_t i = 0; i < fused.size(); ++i) {
        CAPTURE(i);
        REQUIRE(fused[i].defined() == ((wanted >> i & 1) != 0));
        if (fused[i].defined()) check_close_scaled(fused[i], ops[i], tolerance_of(dtype));
      }
    }
  }
}

}  // namespace

TEST_CASE("linear_gelu's backward on the GPU with any of its gradients wanted matches the composite twin: float32" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(1107);
  check_linear_gelu_any_grads(kFloat32);
}

TEST_CASE("linear_gelu's backward on the GPU with any of its gradients wanted matches the composite twin: bfloat16 "
          "(half-precision cuBLAS)" * doctest::skip(!cuda_is_available())) {
  manual_seed(1108);
  check_linear_gelu_any_grads(kBFloat16);
}

#endif  // MINIGRAD_WITH_CUDA

namespace {

// linear_gelu and mlp in dtype on the GPU against float64 on the CPU, over odd shapes.
void check_against_float64(DType dtype) {
  struct Shape3 {
    Shape x;
    int64_t hidden, out;
  };
  // in and out not multiples of 8, a batch of 1, a 3-D input, a 1-D one.
  const Shape3 shapes[] = {{{96, 64}, 128, 64}, {{7, 13}, 11, 5}, {{1, 24}, 40, 16}, {{2, 5, 16}, 24, 8}, {{9}, 8, 3}};
  for (GeluApproximation approximate : {GeluApproximation::None, kTanh}) {
    for (const Shape3& s : shapes) {
      CAPTURE(dtype_name(dtype));
      CAPTURE(shape_str(s.x));
      CAPTURE(static_cast<int>(approximate));
      const int64_t in = s.x.back();
      const Tensor x = randn(s.x, kFloat64).to(dtype);
      const Tensor w1 = (randn({s.hidden, in}, kFloat64) / std::sqrt(static_cast<double>(in))).to(dtype);
      const Tensor b1 = randn({s.hidden}, kFloat64).to(dtype);
      const Tensor w2 = (randn({s.out, s.hidden}, kFloat64) / std::sqrt(static_cast<double>(s.hidden))).to(dtype);
      const Tensor b2 = randn({s.out}, kFloat64).to(dtype);
      Shape hidden_shape = s.x, out_shape = s.x;
      hidden_shape.back() = s.hidden;
      out_shape.back() = s.out;
      const Tensor dy_hidden = randn(hidden_shape, kFloat64).to(dtype);
      const Tensor dy_out = randn(out_shape, kFloat64).to(dtype);
      const Layer layer = [approximate](const tensor_list& t) { return linear_gelu(t[0], t[1], t[2], approximate); };
      const Layer block = [approximate](const tensor_list& t) {
        return mlp(t[0], t[1], t[2], t[3], t[4], approximate);
      };
      auto on = [](const tensor_list& t, Device d, DType dt) {
        tensor_list out;
        for (const Tensor& v : t) out.push_back(v.to(dt).to(d));
        return out;
      };
      poison_gpu_cache(1 << 20);
      // The reference: the same rounded inputs, in float64 on the CPU.
      const tensor_list layer_gpu = value_and_grads(on({x, w1, b1}, kGpu, dtype), dy_hidden.to(kGpu), layer);
      const tensor_list layer_ref = value_and_grads(on({x, w1, b1}, kCPU, kFloat64), dy_hidden.to(kFloat64), layer);
      const tensor_list block_gpu = value_and_grads(on({x, w1, b1, w2, b2}, kGpu, dtype), dy_out.to(kGpu), block);
      const tensor_list block_ref =
          value_and_grads(on({x, w1, b1, w2, b2}, kCPU, kFloat64), dy_out.to(kFloat64), block);
      for (size_t i = 0; i < layer_gpu.size(); ++i) {
        CAPTURE(i);
        check_close_scaled(layer_gpu[i], layer_ref[i], tolerance_of(dtype));
      }
      for (size_t i = 0; i < block_gpu.size(); ++i) {
        CAPTURE(i);
        check_close_scaled(block_gpu[i], block_ref[i], tolerance_of(dtype));
      }
    }
  }
}

}  // namespace

TEST_CASE("linear_gelu and mlp on the GPU against float64 on the CPU, odd shapes included: float32" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(1102);
  check_against_float64(kFloat32);
}

TEST_CASE("linear_gelu and mlp on the GPU against float64 on the CPU, odd shapes included: bfloat16 "
          "(half-precision cuBLAS)" * doctest::skip(!cuda_is_available())) {
  manual_seed(1103);
  check_against_float64(kBFloat16);
}

TEST_CASE("linear_gelu and mlp: gradcheck and gradgradcheck in float64 on the GPU" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(1104);
  auto leaf = [](const Shape& s) { return randn(s, TensorOptions(kFloat64).device(kGpu)).requires_grad_(); };
  const Tensor x = leaf({3, 8}), w1 = leaf({8, 8}), b1 = leaf({8}), w2 = leaf({8, 8}), b2 = leaf({8});
  for (GeluApproximation approximate : {GeluApproximation::None, kTanh}) {
    CAPTURE(static_cast<int>(approximate));
    const auto layer = [approximate](const tensor_list& t) { return linear_gelu(t[0], t[1], t[2], approximate); };
    const auto block = [approximate](const tensor_list& t) { return mlp(t[0], t[1], t[2], t[3], t[4], approximate); };
    CHECK_GRADCHECK(layer, (tensor_list{x, w1, b1}));
    CHECK_GRADGRADCHECK(layer, (tensor_list{x, w1, b1}));
    CHECK_GRADCHECK(block, (tensor_list{x, w1, b1, w2, b2}));
    CHECK_GRADGRADCHECK(block, (tensor_list{x, w1, b1, w2, b2}));
  }
}
