// rand and randn drawn on the GPU (cuda/random.cu) against the CPU's draw from the same
// generator state: the same formulas (kernels/random.h), so rand agrees bit for bit in every
// floating dtype, and randn (Box-Muller through log, sqrt, cos and sin in double, where the
// host's and CUDA's math libraries may differ by an ulp) within a few ulps of the double
// it rounds. The generator's offset advances by one stream per call on either device.
//
// Every case is skipped where no GPU is present.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/cuda_test_support.h"

using namespace minigrad;
using namespace minigrad::test;

namespace {

const std::vector<DType> kFloatingDTypes = {kFloat64, kFloat32, kFloat16, kBFloat16};
// Sizes that end mid-Philox-block (4 words) and mid-pair, and one over a million elements.
const std::vector<Shape> kShapes = {{1}, {3}, {37, 29}, {1000003}};
constexpr uint64_t kSeed = 20261203;

struct Draws {
  Tensor cpu, gpu;
  uint64_t cpu_offset_after, gpu_offset_after;
};

// The same draw on both devices, each from the state manual_seed(kSeed) followed by one
// earlier draw (a nonzero offset).
template <typename Draw>
Draws draw_on_both(const Draw& draw, const Shape& sizes, DType dtype) {
  Draws d;
  manual_seed(kSeed);
  (void)rand({5}, kFloat32);
  d.cpu = draw(sizes, TensorOptions(dtype));
  d.cpu_offset_after = default_generator().offset();
  manual_seed(kSeed);
  (void)rand({5}, kFloat32);
  d.gpu = draw(sizes, TensorOptions(dtype).device(kGpu));
  d.gpu_offset_after = default_generator().offset();
  return d;
}

// How many elements differ in their bits, after both are widened to double (exact).
int64_t differing_elements(const Tensor& a, const Tensor& b) {
  const std::vector<double> va = a.to_vector<double>(), vb = b.to_vector<double>();
  int64_t differing = 0;
  for (size_t i = 0; i < va.size(); ++i) differing += va[i] != vb[i];
  return differing;
}

}  // namespace

TEST_CASE("cuda rand: the same bits as the CPU's for the same generator state, every floating dtype" *
          doctest::skip(!cuda_is_available())) {
  for (DType dtype : kFloatingDTypes) {
    for (const Shape& sizes : kShapes) {
      INFO("dtype: " << std::string(dtype_name(dtype)) << ", shape: " << shape_str(sizes));
      const Draws d = draw_on_both([](const Shape& s, TensorOptions o) { return rand(s, o); }, sizes, dtype);
      CHECK(d.gpu.device() == kGpu);
      CHECK(d.gpu.dtype() == dtype);
      CHECK(d.gpu.sizes() == sizes);
      CHECK(differing_elements(d.gpu.to(kCPU), d.cpu) == 0);
      CHECK(d.gpu_offset_after == d.cpu_offset_after);
    }
  }
  // Not the same numbers for another offset: the GPU reads its stream, not a fixed one.
  manual_seed(kSeed);
  const Tensor first = rand({1000}, TensorOptions(kFloat32).device(kGpu));
  const Tensor second = rand({1000}, TensorOptions(kFloat32).device(kGpu));
  CHECK(differing_elements(first.to(kCPU), second.to(kCPU)) > 990);
}

TEST_CASE("cuda randn: the CPU's values within a few ulps, for the same generator state, every floating dtype" *
          doctest::skip(!cuda_is_available())) {
  for (DType dtype : kFloatingDTypes) {
    for (const Shape& sizes : kShapes) {
      INFO("dtype: " << std::string(dtype_name(dtype)) << ", shape: " << shape_str(sizes));
      const Draws d = draw_on_both([](const Shape& s, TensorOptions o) { return randn(s, o); }, sizes, dtype);
      CHECK(d.gpu_offset_after == d.cpu_offset_after);
      const Tensor gpu = d.gpu.to(kCPU);
      // Both round the same double formula; the libraries' log/cos/sin may move that double
      // by an ulp or two (2.2e-16 relative, plus an absolute term for the sine and cosine
      // near their zeros, where the radius carries the error). A stored float, float16 or
      // bfloat16 then differs by at most one of its own ulps, and only where the double
      // sits at a rounding boundary.
      const double rtol = dtype == kFloat64 ? 1e-15 : dtype == kFloat32 ? 1.2e-7 : dtype == kFloat16 ? 1e-3 : 8e-3;
      const double atol = dtype == kFloat64 ? 1e-15 : dtype == kFloat32 ? 1e-7 : dtype == kFloat16 ? 1e-7 : 1e-7;
      CHECK_ALLCLOSE(gpu, d.cpu, rtol, atol);
      const int64_t differing = differing_elements(gpu, d.cpu);
      MESSAGE(std::string(dtype_name(dtype)) << " " << shape_str(sizes) << ": " << differing << " of " << d.cpu.numel()
                                << " elements differ in their bits");
      // float64 may differ in the last bit or two of many elements (the libraries), and the
      // tolerance above bounds that. The narrower types round those doubles to the same
      // value but where one sits within a few double ulps of a rounding boundary: about
      // 1e-8 of the elements. A systematic difference (another formula, another word of
      // the block) would change nearly every element.
      if (dtype != kFloat64) CHECK(differing <= 2 + d.cpu.numel() / 100000);
    }
  }
}

TEST_CASE("cuda rand and randn: requires_grad and empty shapes as on the CPU" * doctest::skip(!cuda_is_available())) {
  const Tensor x = randn({4, 3}, TensorOptions(kFloat32).device(kGpu).requires_grad());
  CHECK(x.requires_grad());
  const uint64_t before = default_generator().offset();
  const Tensor e = rand({0, 3}, TensorOptions(kFloat16).device(kGpu));
  CHECK(e.numel() == 0);
  CHECK(e.device() == kGpu);
  CHECK(default_generator().offset() == before + 1);  // an empty draw still takes its stream, as on the CPU
  CHECK_THROWS_CONTAINING(randn({2}, TensorOptions(kInt64).device(kGpu)), "randn: needs a floating-point dtype");
}
