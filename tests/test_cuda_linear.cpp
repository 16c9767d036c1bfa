// linear, linear_gelu and mlp on the GPU, where the bias, GELU, gelu' and the bias
// gradients run in cuBLASLt's epilogues (cuda/blaslt.h): that the cases cuBLASLt serves
// take that path (no fallback), the fused path against the same layers run op by op on the
// GPU (cuBLAS + the project's kernels) in bfloat16, float16 and float32 (where float32 takes
// the bias epilogues only: the GELU ones are not precise enough for it), against the CPU in
// float64; odd shapes that fall back (in/out not multiples of 8, batch 1, 3-D inputs);
// gradcheck and gradgradcheck in float64 on the GPU. Outputs are allocated after the
// allocator's cache was filled with NaN, so an element an epilogue forgets shows.
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <vector>

#include "tests/cuda_test_support.h"
#include <minigrad/config.h>  // MINIGRAD_WITH_CUDA
#if MINIGRAD_WITH_CUDA
#include <minigrad/cuda/blaslt.h>
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
