// The elementwise ops on the GPU against the CPU reference: arithmetic with broadcasting
// and scalars (ops/binary.cpp), math (ops/unary.cpp), comparisons and where
// (ops/compare.cpp), relu and gelu (ops/relu.cpp, ops/gelu.cpp), in-place updates
// (ops/inplace.cpp).
//
// The same inputs run on both devices, in every layout the CUDA engine treats differently
// (cuda/elementwise.cuh): contiguous (16-byte vectors) with odd sizes (a tail after the
// vectors), a slice one element in (misaligned: one element per access), transposed and
// strided views, rows broadcast down and columns broadcast along rows, 0-d and empty
// tensors. float64 and float32 must agree closely: the two math libraries differ by an
// ulp or so. float16 and bfloat16 run natively on the GPU (computed in float, rounded once)
// and are compared with the CPU's float32 result on the same rounded inputs, within the
// half types' rounding. Every element is compared. Then gradients: gradcheck in float64 on
// the GPU, and backward on the GPU against backward on the CPU.
//
// Every case is skipped where no GPU is present.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <minigrad/config.h>  // MINIGRAD_WITH_CUDA
#include <minigrad/ops/cpu_loops.h>
#include "tests/elementwise_test_functors.h"
#include "tests/elementwise_test_helpers.h"
#if MINIGRAD_WITH_CUDA
#include <minigrad/cuda/runtime.h>
#endif

using namespace minigrad;
using namespace minigrad::test;

namespace {

constexpr Device kGpu = Device::cuda(0);
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

using BinaryOp = std::function<Tensor(const Tensor&, const Tensor&)>;
using ViewFn = std::function<Tensor(const Tensor&)>;

// How far the GPU's result may be from the CPU's. float64, float32: the CUDA and glibc math
// functions differ by an ulp or two (2.2e-16, 1.2e-7), more after a dozen operations whose
// terms cancel (gelu's derivative near its zero, where Phi(x) and x phi(x) meet).
// float16, bfloat16 against the CPU's float32 result: rounding to 11 (8) significant bits
// moves a value by up to half an ulp, 2^-11 = 4.9e-4 (2^-8 = 3.9e-3).
struct Agreement {
  DType dtype;
  double rtol;
  double atol;
};
const std::vector<Agreement>& agreements() {
  static const std::vector<Agreement> list = {
      {kFloat64, 1e-12, 1e-14}, {kFloat32, 1e-5, 1e-6}, {kFloat16, 1e-3, 1e-4}, {kBFloat16, 8e-3, 1e-3}};
  return list;
}

// The dtype the CPU computes the reference in: float32 for the half types.
DType reference_dtype(DType dtype) { return is_half(dtype) ? kFloat32 : dtype; }

double anywhere(double v) { return v; }
double positive(double v) { return std::abs(v) + 0.5; }
double away_from_zero(double v) { return v < 0 ? v - 0.5 : v + 0.5; }
Tensor identity(const Tensor& t) { return t; }

// ---- the ops ----

struct UnaryCase {
  const char* label;
  UnaryOp op;
  ScalarFn domain;
};

std::vector<UnaryCase> unary_cases() {
  return {
      {"neg", [](const Tensor& x) { return neg(x); }, anywhere},
      {"exp", [](const Tensor& x) { return exp(x); }, anywhere},
      {"log", [](const Tensor& x) { return log(x); }, positive},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, positive},
      {"erf", [](const Tensor& x) { return erf(x); }, anywhere},
      {"tanh", [](const Tensor& x) { return tanh(x); }, anywhere},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, anywhere},
      {"abs", [](const Tensor& x) { return abs(x); }, [](double v) { return away_from_kinks(v, {0.0}); }},
      {"pow(x, 3)", [](const Tensor& x) { return pow(x, 3.0); }, anywhere},
      {"pow(x, 2.5)", [](const Tensor& x) { return pow(x, 2.5); }, positive},
      {"pow(x, -1.5)", [](const Tensor& x) { return pow(x, -1.5); }, positive},
      {"clamp(x, -0.5, 0.5)", [](const Tensor& x) { return clamp(x, -0.5, 0.5); },
       [](double v) { return away_from_kinks(v, {-0.5, 0.5}); }},
      {"clamp_min(x, 0.2)", [](const Tensor& x) { return clamp_min(x, 0.2); },
       [](double v) { return away_from_kinks(v, {0.2}); }},
      {"x + 2.5", [](const Tensor& x) { return x + 2.5; }, anywhere},
      {"x - 2.5", [](const Tensor& x) { return x - 2.5; }, anywhere},
      {"x * -1.5", [](const Tensor& x) { return x * -1.5; }, anywhere},
      {"x / 3", [](const Tensor& x) { return x / 3.0; }, anywhere},
      {"2 - x", [](const Tensor& x) { return 2.0 - x; }, anywhere},
      {"2 / x", [](const Tensor& x) { return 2.0 / x; }, away_from_zero},
      {"relu", [](const Tensor& x) { return relu(x); }, [](double v) { return away_from_kinks(v, {0.0}); }},
      {"gelu", [](const Tensor& x) { return gelu(x); }, anywhere},
      {"gelu tanh", [](const Tensor& x) { return gelu(x, GeluApproximation::Tanh); }, anywhere},
      {"softplus", [](const Tensor& x) { return softplus(x); }, anywhere},
      {"softplus(x, 2, 3)", [](const Tensor& x) { return softplus(x, 2.0, 3.0); },
       [](double v) { return away_from_kinks(v, {1.5}); }},
      // ---- more elementwise ----
      {"square", [](const Tensor& x) { return square(x); }, anywhere},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }, positive},
      {"reciprocal", [](const Tensor& x) { return reciprocal(x); }, away_from_zero},
      {"log1p", [](const Tensor& x) { return log1p(x); }, positive},
      {"expm1", [](const Tensor& x) { return expm1(x); }, anywhere},
      {"sin", [](const Tensor& x) { return sin(x); }, anywhere},
      {"cos", [](const Tensor& x) { return cos(x); }, anywhere},
      {"sign", [](const Tensor& x) { return sign(x); }, [](double v) { return away_from_kinks(v, {0.0}); }},
      // Halfway between integers: floor's finite differences never straddle a step.
      {"floor", [](const Tensor& x) { return floor(x); }, [](double v) { return std::floor(2.0 * v) + 0.5; }},
      {"pow(2, x)", [](const Tensor& x) { return pow(2.0, x); }, anywhere},
      {"pow(0.5, x)", [](const Tensor& x) { return pow(0.5, x); }, anywhere},
      {"clamp(x, nullopt, 0.3)", [](const Tensor& x) { return clamp(x, std::nullopt, 0.3); },
       [](double v) { return away_from_kinks(v, {0.3}); }},
      {"silu", [](const Tensor& x) { return silu(x); }, anywhere},
      {"leaky_relu", [](const Tensor& x) { return leaky_relu(x); }, [](double v) { return away_from_kinks(v, {0.0}); }},
      {"leaky_relu(x, 0.2)", [](const Tensor& x) { return leaky_relu(x, 0.2); },
       [](double v) { return away_from_kinks(v, {0.0}); }},
      {"elu", [](const Tensor& x) { return elu(x); }, [](double v) { return away_from_kinks(v, {0.0}); }},
      {"elu(x, 0.5)", [](const Tensor& x) { return elu(x, 0.5); }, [](double v) { return away_from_kinks(v, {0.0}); }},
  };
}

struct BinaryCase {
  const char* label;
  BinaryOp op;
  ScalarFn domain_a;
  ScalarFn domain_b;
};

std::vector<BinaryCase> binary_cases() {
  return {
      {"add", [](const Tensor& a, const Tensor& b) { return a + b; }, anywhere, anywhere},
      {"sub", [](const Tensor& a, const Tensor& b) { return a - b; }, anywhere, anywhere},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }, anywhere, anywhere},
      {"div", [](const Tensor& a, const Tensor& b) { return a / b; }, anywhere, away_from_zero},
      {"pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); }, positive, anywhere},
      // ---- more elementwise ----
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }, anywhere, anywhere},
      {"minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); }, anywhere, anywhere},
      {"lerp(a, b, 0.3)", [](const Tensor& a, const Tensor& b) { return lerp(a, b, 0.3); }, anywhere, anywhere},
      {"lerp(a, b, 0.8)", [](const Tensor& a, const Tensor& b) { return lerp(a, b, 0.8); }, anywhere, anywhere},
  };
}

// ---- the layouts: views of a contiguous base, made alike on both devices ----

struct Layout {
  const char* name;
  Shape base_sizes;
  ViewFn view;
};

std::vector<Layout> unary_layouts() {
  return {
      {"7x13: vectors, then 91 % N elements one at a time", {7, 13}, identity},
      {"1000003 elements", {1000003}, identity},
      {"a slice from element 1: misaligned, one element per access", {1000004},
       [](const Tensor& t) { return t.slice(0, 1, 1000004); }},
      {"transposed", {13, 7}, [](const Tensor& t) { return t.t(); }},
      {"every other column", {7, 26}, [](const Tensor& t) { return t.slice(1, 0, 26, 2); }},
      {"4-d permuted: three outer dims to unravel", {2, 3, 4, 5},
       [](const Tensor& t) { return t.permute({3, 1, 0, 2}); }},
      {"0-d", {}, identity},
      {"empty", {0, 5}, identity},
  };
}

struct BinaryLayout {
  const char* name;
  Shape a_base;
  Shape b_base;
  ViewFn a_view;
  ViewFn b_view;
};

std::vector<BinaryLayout> binary_layouts() {
  const ViewFn transpose = [](const Tensor& t) { return t.t(); };
  const ViewFn from_element_1 = [](const Tensor& t) { return t.slice(0, 1, t.size(0)); };
  return {
      {"same shape, odd size", {7, 13}, {7, 13}, identity, identity},
      {"1000003 elements", {1000003}, {1000003}, identity, identity},
      {"a row broadcast down 257 rows", {257, 1000}, {1000}, identity, identity},
      {"rows of 1001: a tail in every row", {257, 1001}, {1001}, identity, identity},
      {"a column broadcast along each row", {257, 1000}, {257, 1}, identity, identity},
      {"the row on the left", {1000}, {257, 1000}, identity, identity},
      {"both sides stretched", {3, 1}, {1, 4}, identity, identity},
      {"0-d and 3x4", {}, {3, 4}, identity, identity},
      {"3-d and 2-d", {2, 1, 3}, {4, 1}, identity, identity},
      {"transposed and contiguous", {13, 7}, {7, 13}, transpose, identity},
      {"misaligned and aligned", {1000004}, {1000003}, from_element_1, identity},
      {"empty", {0, 3}, {3}, identity, identity},
  };
}

// ---- checks ----

// op on the GPU, in each dtype and layout, against the CPU.
void check_unary_on_gpu(const UnaryCase& c) {
  for (const Layout& layout : unary_layouts()) {
    INFO("layout: " << std::string(layout.name));
    const Tensor base = reference_map(randn64(layout.base_sizes), c.domain);
    for (const Agreement& a : agreements()) {
      INFO("dtype: " << std::string(dtype_name(a.dtype)));
      const Tensor rounded = base.to(a.dtype);
      const Tensor on_gpu = c.op(layout.view(rounded.to(kGpu)));
      CHECK(on_gpu.device() == kGpu);
      CHECK(on_gpu.dtype() == a.dtype);
      CHECK_ALLCLOSE(on_gpu, c.op(layout.view(rounded.to(reference_dtype(a.dtype)))), a.rtol, a.atol);
    }
  }
}

void check_binary_on_gpu(const BinaryOp& op, const BinaryLayout& layout, const Tensor& a_base, const Tensor& b_base) {
  INFO("layout: " << std::string(layout.name));
  for (const Agreement& a : agreements()) {
    INFO("dtype: " << std::string(dtype_name(a.dtype)));
    const Tensor ra = a_base.to(a.dtype);
    const Tensor rb = b_base.to(a.dtype);
    const Tensor on_gpu = op(layout.a_view(ra.to(kGpu)), layout.b_view(rb.to(kGpu)));
    CHECK(on_gpu.device() == kGpu);
    CHECK(on_gpu.dtype() == a.dtype);
    const DType cpu = reference_dtype(a.dtype);
    CHECK_ALLCLOSE(on_gpu, op(layout.a_view(ra.to(cpu)), layout.b_view(rb.to(cpu))), a.rtol, a.atol);
  }
}

// The gradients of op's inputs on the GPU and on the CPU, for one upstream gradient.
// Backward chains several ops, each rounding, and sums broadcast gradients (in float on the
// GPU, in double on the CPU): float32 gets more room than one op's forward needs.
void check_backward_matches(const std::function<Tensor(const tensor_list&)>& op, const tensor_list& inputs, DType dtype) {
  const double rtol = dtype == kFloat64 ? 1e-12 : 1e-4;
  const double atol = dtype == kFloat64 ? 1e-13 : 1e-4;
  tensor_list on_gpu, on_cpu;
  for (const Tensor& x : inputs) {
    on_gpu.push_back(leaf(x.to(dtype).to(kGpu)));
    on_cpu.push_back(leaf(x.to(dtype)));
  }
  const Tensor y_cpu = op(on_cpu);
  const Tensor upstream = randn64(y_cpu.sizes()).to(dtype);
  op(on_gpu).backward(upstream.to(kGpu));
  y_cpu.backward(upstream);
  for (size_t k = 0; k < inputs.size(); ++k) {
    INFO("input " << k);
    REQUIRE(on_gpu[k].grad().defined());
    CHECK(on_gpu[k].grad().device() == kGpu);
    CHECK_ALLCLOSE(on_gpu[k].grad(), on_cpu[k].grad(), rtol, atol);
  }
}

// Values that every dtype holds exactly, with many ties: whole numbers in [-3, 3].
Tensor small_integers(const Shape& sizes) {
  return reference_map(randn64(sizes), [](double v) { return std::round(std::clamp(1.5 * v, -3.0, 3.0)); });
}

const std::vector<DType>& all_dtypes() {
  static const std::vector<DType> dtypes = {kFloat64, kFloat32, kFloat16, kBFloat16, kInt64, kBool};
  return dtypes;
}

// Runs `update` on a GPU copy and a CPU copy of self (through `view` of each), and compares:
// exactly, since the values are small whole numbers, exact in every dtype.
void check_inplace_on_gpu(const Tensor& self, const ViewFn& view, const std::function<void(Tensor&)>& update) {
  Tensor on_gpu = self.to(kGpu);
  Tensor on_cpu = self.clone();
  Tensor gpu_view = view(on_gpu);
  Tensor cpu_view = view(on_cpu);
  const uint64_t version = on_gpu.version();
  update(gpu_view);
  update(cpu_view);
  CHECK(on_gpu.version() == version + 1);
  CHECK_ALLCLOSE(on_gpu, on_cpu, 0.0, 0.0);
}

}  // namespace

// ---------------------------------------------------------------------------------------
// forward values

TEST_CASE("cuda unary ops and scalar arithmetic: every dtype and layout agrees with the CPU" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(101);
  for (const UnaryCase& c : unary_cases()) {
    INFO("op: " << std::string(c.label));
    check_unary_on_gpu(c);
  }
}

TEST_CASE("cuda binary ops: broadcasting and every layout agree with the CPU, both argument orders" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(102);
  for (const BinaryCase& c : binary_cases()) {
    INFO("op: " << std::string(c.label));
    for (const BinaryLayout& layout : binary_layouts()) {
      const Tensor a = reference_map(randn64(layout.a_base), c.domain_a);
      const Tensor b = reference_map(randn64(layout.b_base), c.domain_b);
      check_binary_on_gpu(c.op, layout, a, b);
      const BinaryLayout swapped{layout.name, layout.b_base, layout.a_base, layout.b_view, layout.a_view};
      const BinaryOp flipped = [&](const Tensor& x, const Tensor& y) { return c.op(y, x); };
      check_binary_on_gpu(flipped, swapped, b, a);
    }
  }
}

TEST_CASE("cuda ops on NaN, infinities and signed zeros give what the CPU gives" *
          doctest::skip(!cuda_is_available())) {
  const Tensor specials = from_vector<double>({kNaN, kInf, -kInf, 0.0, -0.0, 1.0, -1.0, 30.0, -30.0}, {9});
  for (const UnaryCase& c : unary_cases()) {
    INFO("op: " << std::string(c.label));
    for (DType dt : {kFloat64, kFloat32}) {
      INFO("dtype: " << std::string(dtype_name(dt)));
      const Tensor x = specials.to(dt);
      CHECK_ALLCLOSE(c.op(x.to(kGpu)), c.op(x), 1e-6, 0.0);
    }
  }
  for (const BinaryCase& c : binary_cases()) {
    INFO("op: " << std::string(c.label));
    const Tensor x = specials.to(kFloat32);
    const Tensor y = from_vector<double>({1.0, kNaN, 0.0, -kInf, 2.0, 0.0, kInf, -0.0, 0.5}, {9}).to(kFloat32);
    CHECK_ALLCLOSE(c.op(x.to(kGpu), y.to(kGpu)), c.op(x, y), 1e-6, 0.0);
  }
}

TEST_CASE("cuda half types compute natively: the output is the only new memory" *
          doctest::skip(!cuda_is_available())) {
#if MINIGRAD_WITH_CUDA
  // 4M elements: 8 MiB in bfloat16, 16 MiB for a float32 copy, whole multiples of the
  // allocator's 2 MiB granule, so the peak counts exactly what was allocated.
  const int64_t n = int64_t{1} << 22;
  const size_t output_bytes = static_cast<size_t>(n) * 2;
  for (DType dt : {kBFloat16, kFloat16}) {
    INFO("dtype: " << std::string(dtype_name(dt)));
    const Tensor x = randn({n}, TensorOptions(dt).device(kGpu));
    const Tensor g = randn({n}, TensorOptions(dt).device(kGpu));
    for (const UnaryOp& op : std::vector<UnaryOp>{[](const Tensor& t) { return relu(t); },
                                                 [](const Tensor& t) { return gelu(t); },
                                                 [&](const Tensor& t) { return t * g; }}) {
      const size_t before = cuda::allocator_stats(0).allocated_bytes;
      cuda::reset_peak_stats(0);
      const Tensor y = op(x);
      CHECK(cuda::allocator_stats(0).peak_allocated_bytes - before == output_bytes);
    }
  }
#endif
}

// ---------------------------------------------------------------------------------------
// comparisons, where, in-place updates

TEST_CASE("cuda comparisons: every dtype, broadcasting, scalars, exactly the CPU's answers" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(103);
  const std::vector<std::pair<const char*, BinaryOp>> comparisons = {
      {"eq", [](const Tensor& a, const Tensor& b) { return a == b; }},
      {"ne", [](const Tensor& a, const Tensor& b) { return a != b; }},
      {"lt", [](const Tensor& a, const Tensor& b) { return a < b; }},
      {"le", [](const Tensor& a, const Tensor& b) { return a <= b; }},
      {"gt", [](const Tensor& a, const Tensor& b) { return a > b; }},
      {"ge", [](const Tensor& a, const Tensor& b) { return a >= b; }}};
  const std::vector<std::function<Tensor(const Tensor&, double)>> with_scalar = {
      [](const Tensor& a, double b) { return a == b; }, [](const Tensor& a, double b) { return a != b; },
      [](const Tensor& a, double b) { return a < b; },  [](const Tensor& a, double b) { return a <= b; },
      [](const Tensor& a, double b) { return a > b; },  [](const Tensor& a, double b) { return a >= b; }};
  for (size_t k = 0; k < comparisons.size(); ++k) {
    const auto& [name, op] = comparisons[k];
    INFO("op: " << std::string(name));
    for (const BinaryLayout& layout : binary_layouts()) {
      INFO("layout: " << std::string(layout.name));
      const Tensor a = small_integers(layout.a_base);
      const Tensor b = small_integers(layout.b_base);
      for (DType dt : all_dtypes()) {
        INFO("dtype: " << std::string(dtype_name(dt)));
        const Tensor ta = layout.a_view(a.to(dt));
        const Tensor tb = layout.b_view(b.to(dt));
        const Tensor on_gpu = op(layout.a_view(a.to(dt).to(kGpu)), layout.b_view(b.to(dt).to(kGpu)));
        CHECK(on_gpu.dtype() == kBool);
        CHECK(on_gpu.device() == kGpu);
        CHECK_ALLCLOSE(on_gpu, op(ta, tb), 0.0, 0.0);
        for (double scalar : {1.0, 0.5, -2.0}) {
          INFO("scalar: " << scalar);
          CHECK_ALLCLOSE(with_scalar[k](layout.a_view(a.to(dt).to(kGpu)), scalar), with_scalar[k](ta, scalar), 0.0,
                         0.0);
        }
      }
    }
    const Tensor with_nan = from_vector<double>({kNaN, 1.0, kInf, -kInf}, {4});
    const Tensor others = from_vector<double>({kNaN, 1.0, 2.0, -kInf}, {4});
    for (DType dt : {kFloat32, kBFloat16}) {
      CHECK_ALLCLOSE(op(with_nan.to(dt).to(kGpu), others.to(dt).to(kGpu)), op(with_nan.to(dt), others.to(dt)), 0.0,
                     0.0);
      CHECK_ALLCLOSE(with_scalar[k](with_nan.to(dt).to(kGpu), kNaN), with_scalar[k](with_nan.to(dt), kNaN), 0.0, 0.0);
    }
  }
  // A floating tensor meets the scalar in its own dtype, an integer tensor in double.
  CHECK(eq(tensor({0.1f}).to(kGpu), 0.1).item<bool>());
  CHECK(eq(from_vector<double>({0.1}, {1}).to(kBFloat16).to(kGpu), 0.1).item<bool>());
  CHECK(lt(arange(4).to(kGpu), 2.5).to_vector<double>() == std::vector<double>{1, 1, 1, 0});
}

TEST_CASE("cuda where: every dtype, all three arguments broadcast, non-contiguous condition" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(104);
  struct WhereLayout {
    const char* name;
    Shape condition, a, b;
  };
  const std::vector<WhereLayout> layouts = {{"same shape", {7, 13}, {7, 13}, {7, 13}},
                                            {"1000003 elements", {1000003}, {1000003}, {1000003}},
                                            {"all three broadcast", {3, 1}, {1, 4}, {3, 4}},
                                            {"rows", {257, 1000}, {1000}, {257, 1000}},
                                            {"a 0-d branch", {257, 1000}, {257, 1000}, {}},
                                            {"empty", {0, 1}, {4}, {1}}};
  for (const WhereLayout& layout : layouts) {
    INFO("layout: " << std::string(layout.name));
    const Tensor condition = gt(randn64(layout.condition), 0.0);
    const Tensor a = small_integers(layout.a);
    const Tensor b = small_integers(layout.b);
    for (DType dt : all_dtypes()) {
      INFO("dtype: " << std::string(dtype_name(dt)));
      const Tensor on_gpu = where(condition.to(kGpu), a.to(dt).to(kGpu), b.to(dt).to(kGpu));
      CHECK(on_gpu.dtype() == dt);
      CHECK_ALLCLOSE(on_gpu, where(condition, a.to(dt), b.to(dt)), 0.0, 0.0);
    }
  }
  const Tensor square_condition = gt(randn64({13, 7}), 0.0);
  const Tensor x = randn64({7, 13});
  const Tensor y = randn64({7, 13});
  CHECK_ALLCLOSE(where(square_condition.to(kGpu).t(), x.to(kGpu), y.to(kGpu)), where(square_condition.t(), x, y),
                 0.0, 0.0);
}

TEST_CASE("cuda in-place updates: add_, mul_, masked_fill_, fill_, zero_ in every dtype, through views" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(105);
  const Tensor x = small_integers({13, 7});
  const Tensor row = small_integers({13});
  const Tensor column = small_integers({7, 1});
  const Tensor mask = gt(randn64({13}), 0.0);
  const std::vector<std::pair<const char*, ViewFn>> views = {
      {"whole", identity}, {"transposed", [](const Tensor& t) { return t.t(); }}};
  for (const auto& [view_name, view] : views) {
    INFO("view: " << std::string(view_name));
    for (DType dt : all_dtypes()) {
      INFO("dtype: " << std::string(dtype_name(dt)));
      const Tensor self = x.to(dt);
      // The operands fit the transposed view, [7, 13]; the whole tensor gets its own.
      const bool transposed = std::string(view_name) == "transposed";
      const Tensor other = transposed ? row.to(dt) : small_integers({7}).to(dt);
      const Tensor other_column = transposed ? column.to(dt) : small_integers({13, 1}).to(dt);
      const Tensor mask_for_view = transposed ? mask : gt(randn64({7}), 0.0);
      if (dt != kBool) {
        check_inplace_on_gpu(self, view, [&](Tensor& t) { t.add_(other.to(t.device()), 2.0); });
        check_inplace_on_gpu(self, view, [](Tensor& t) { t.add_(-3.0); });
        check_inplace_on_gpu(self, view, [&](Tensor& t) { t.mul_(other_column.to(t.device())); });
        check_inplace_on_gpu(self, view, [](Tensor& t) { t.mul_(2.0); });
      }
      check_inplace_on_gpu(self, view, [&](Tensor& t) { t.masked_fill_(mask_for_view.to(t.device()), 1.0); });
      check_inplace_on_gpu(self, view, [](Tensor& t) { t.fill_(1.0); });
      check_inplace_on_gpu(self, view, [](Tensor& t) { t.zero_(); });
    }
  }
  // Reading an operand that shares self's memory: x += x^T reads the old values.
  Tensor square = randn64({64, 64}).to(kGpu);
  const Tensor expected = square.cpu() + square.cpu().t();
  square.add_(square.t());
  CHECK_ALLCLOSE(square, expected, 1e-15, 0.0);
}

TEST_CASE("cuda ops refuse operands on another device, naming the op and both devices" *
          doctest::skip(!cuda_is_available())) {
  const Tensor on_cpu = ones({3});
  const Tensor on_gpu = ones({3}, TensorOptions(kFloat32).device(kGpu));
  CHECK_THROWS_CONTAINING(add(on_gpu, on_cpu), "add: expected all tensors on one device, but argument 'self' is on "
                                               "cuda:0 and argument 'other' is on cpu");
  CHECK_THROWS_CONTAINING(mul(on_cpu, on_gpu), "mul: expected all tensors on one device");
  CHECK_THROWS_CONTAINING(pow(on_gpu, on_cpu), "pow: ");
  CHECK_THROWS_CONTAINING(lt(on_gpu, on_cpu), "lt: expected all tensors on one device");
  CHECK_THROWS_CONTAINING(where(gt(on_cpu, 0.0), on_gpu, on_gpu), "where: expected all tensors on one device, but "
                                                                  "argument 'condition' is on cpu");
  CHECK_THROWS_CONTAINING(where(gt(on_gpu, 0.0), on_gpu, on_cpu), "argument 'other' is on cpu");
  Tensor target = zeros({3}, TensorOptions(kFloat32).device(kGpu));
  CHECK_THROWS_CONTAINING(target.add_(on_cpu), "add_: expected all tensors on one device");
  CHECK_THROWS_CONTAINING(target.mul_(on_cpu), "mul_: expected all tensors on one device");
  CHECK_THROWS_CONTAINING(target.masked_fill_(gt(on_cpu, 0.0), 1.0), "masked_fill_: expected all tensors on one device");
}

// ---------------------------------------------------------------------------------------
// gradients

TEST_CASE("cuda gradcheck in float64 on the GPU: every differentiable elementwise op" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(106);
  for (const UnaryCase& c : unary_cases()) {
    INFO("op: " << std::string(c.label));
    const Tensor x = reference_map(randn64({3, 4}), c.domain);
    auto fn = [&](const tensor_list& in) { return c.op(in[0]); };
    CHECK_GRADCHECK(fn, tensor_list{leaf(x.to(kGpu))});
    CHECK_GRADCHECK(fn, tensor_list{leaf(x.to(kGpu).t().contiguous().t())});
  }
  for (const BinaryCase& c : binary_cases()) {
    INFO("op: " << std::string(c.label));
    auto fn = [&](const tensor_list& in) { return c.op(in[0], in[1]); };
    for (const auto& [sa, sb] : std::vector<std::pair<Shape, Shape>>{{{3, 4}, {3, 4}}, {{3, 4}, {4}}, {{3, 1}, {1, 4}}, {{}, {3, 4}}}) {
      INFO("shapes: " << shape_str(sa) << " and " << shape_str(sb));
      const Tensor a = leaf(reference_map(randn64(sa), c.domain_a).to(kGpu));
      const Tensor b = leaf(reference_map(randn64(sb), c.domain_b).to(kGpu));
      CHECK_GRADCHECK(fn, (tensor_list{a, b}));
    }
  }
  const Tensor condition = gt(randn64({3, 4}), 0.0).to(kGpu);
  auto where_fn = [&](const tensor_list& in) { return where(condition, in[0], in[1]); };
  CHECK_GRADCHECK(where_fn, (tensor_list{leaf(randn64({3, 4}).to(kGpu)), leaf(randn64({4}).to(kGpu))}));
}

TEST_CASE("cuda backward agrees with CPU backward: every differentiable op, float64 and float32" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(107);
  for (DType dt : {kFloat64, kFloat32}) {
    INFO("dtype: " << std::string(dtype_name(dt)));
    for (const UnaryCase& c : unary_cases()) {
      INFO("op: " << std::string(c.label));
      check_backward_matches([&](const tensor_list& in) { return c.op(in[0]); },
                             {reference_map(randn64({257, 1001}), c.domain)}, dt);
    }
    for (const BinaryCase& c : binary_cases()) {
      INFO("op: " << std::string(c.label));
      // The broadcast input's gradient is a sum over the 257 rows.
      check_backward_matches([&](const tensor_list& in) { return c.op(in[0], in[1]); },
                             {reference_map(randn64({257, 1001}), c.domain_a),
                              reference_map(randn64({1001}), c.domain_b)},
                             dt);
    }
    const Tensor condition = gt(randn64({257, 1001}), 0.0);
    check_backward_matches([&](const tensor_list& in) { return where(condition.to(in[0].device()), in[0], in[1]); },
                           {randn64({257, 1001}), randn64({1001})}, dt);
  }
}

TEST_CASE("cuda relu and gelu backward: one kernel over (grad, x), at the kinks and in the tails" *
          doctest::skip(!cuda_is_available())) {
  const Tensor x = from_vector<double>({-8.0, -3.0, -1.0, -0.0, 0.0, 1e-3, 1.0, 3.0, 8.0, kInf, -kInf}, {11});
  const std::vector<std::pair<const char*, UnaryOp>> activations = {
      {"relu", [](const Tensor& t) { return relu(t); }},
      {"gelu", [](const Tensor& t) { return gelu(t); }},
      {"gelu tanh", [](const Tensor& t) { return gelu(t, GeluApproximation::Tanh); }}};
  manual_seed(108);
  const Tensor random = randn64({257, 1001}) * 3.0;
  for (const auto& [name, op] : activations) {
    INFO("op: " << std::string(name));
    for (DType dt : {kFloat64, kFloat32}) {
      INFO("dtype: " << std::string(dtype_name(dt)));
      Tensor x_gpu = leaf(x.to(dt).to(kGpu));
      Tensor x_cpu = leaf(x.to(dt));
      op(x_gpu).sum().backward();
      op(x_cpu).sum().backward();
      CHECK_ALLCLOSE(x_gpu.grad(), x_cpu.grad(), 1e-6, 1e-7);
    }
    // Random inputs in every dtype: the backward is one kernel, its result rounded once, so
    // the forward ops' agreement holds (the half types against the CPU's float32).
    for (const Agreement& a : agreements()) {
      INFO("dtype: " << std::string(dtype_name(a.dtype)));
      const Tensor rounded = random.to(a.dtype);
      const Tensor upstream = randn64(random.sizes()).to(a.dtype);
      Tensor x_gpu = leaf(rounded.to(kGpu));
      Tensor x_cpu = leaf(rounded.to(reference_dtype(a.dtype)));
      op(x_gpu).backward(upstream.to(kGpu));
      op(x_cpu).backward(upstream.to(reference_dtype(a.dtype)));
      CHECK_ALLCLOSE(x_gpu.grad(), x_cpu.grad(), a.rtol, a.atol);
    }
  }
  // The tutorial's example on the GPU: relu([1, -2, 3]).sum() backward gives [1, 0, 1].
  Tensor seed = tensor({1.0f, -2.0f, 3.0f}).to(kGpu).requires_grad_();
  relu(seed).sum().backward();
  CHECK(seed.grad().to_vector<double>() == std::vector<double>{1, 0, 1});
}

TEST_CASE("cuda gelu at the infinities and in the far tails: the CPU's limits, not NaN, in every dtype" *
          doctest::skip(!cuda_is_available())) {
  // gelu(-inf) = 0, gelu'(-inf) = 0, gelu'(inf) = 1; the tanh form's derivative where exp(-2u)
  // overflows (x below -10.7 in float, -21.5 in double) and where x * u'(x) does (|x| ~ 1e12
  // in float). The GPU's float formulas flush denormals to 0, the CPU's keep them: an
  // absolute tolerance far below any normal float.
  const std::vector<double> xs = {-kInf, -1e30, -1e13, -1e5, -60.0, -30.0, -21.6, -21.4, -15.0, -10.8,
                                  -10.6, -10.0, 10.0,  15.0, 30.0,  1e5,   1e13,  1e30,  kInf,  kNaN};
  const Tensor x = from_vector<double>(xs, {static_cast<int64_t>(xs.size())});
  const std::vector<std::pair<const char*, UnaryOp>> forms = {
      {"gelu", [](const Tensor& t) { return gelu(t); }},
      {"gelu tanh", [](const Tensor& t) { return gelu(t, GeluApproximation::Tanh); }}};
  for (const auto& [name, op] : forms) {
    INFO("op: " << std::string(name));
    for (DType dt : {kFloat64, kFloat32, kFloat16, kBFloat16}) {
      INFO("dtype: " << std::string(dtype_name(dt)));
      Tensor x_gpu = leaf(x.to(dt).to(kGpu));
      Tensor x_cpu = leaf(x.to(dt).to(reference_dtype(dt)));
      const Tensor y_gpu = op(x_gpu);
      const Tensor y_cpu = op(x_cpu);
      y_gpu.sum().backward();
      y_cpu.sum().backward();
      // A half-type result is the float result rounded once: compared with the CPU's float
      // result rounded the same way, within an ulp (the GPU's exp2 is approximate). Tiny
      // tail values become 0 in float16 on both sides.
      const double rtol = dt == kBFloat16 ? 1e-2 : dt == kFloat16 ? 2e-3 : 1e-5;
      CHECK_ALLCLOSE(y_gpu, is_half(dt) ? y_cpu.to(dt) : y_cpu, rtol, 1e-30);
      CHECK_ALLCLOSE(x_gpu.grad(), is_half(dt) ? x_cpu.grad().to(dt) : x_cpu.grad(), rtol, 1e-30);
      const std::vector<double> y = y_gpu.to_vector<double>();
      const std::vector<double> slope = x_gpu.grad().to_vector<double>();
      CHECK(y.front() == 0.0);
      CHECK(slope.front() == 0.0);
      CHECK(y[y.size() - 2] == kInf);
      CHECK(slope[slope.size() - 2] == 1.0);
      for (size_t i = 0; i + 1 < xs.size(); ++i) CHECK(std::isfinite(slope[i]));
      CHECK(std::isnan(y.back()));
      CHECK(std::isnan(slope.back()));
    }
  }
}

TEST_CASE("cuda relu backward: a NaN input passes the gradient, as on the CPU" * doctest::skip(!cuda_is_available())) {
  for (DType dt : {kFloat64, kFloat32, kFloat16, kBFloat16}) {
    INFO("dtype: " << std::string(dtype_name(dt)));
    Tensor x = leaf(from_vector<double>({kNaN, -1.0, 0.0, 2.0, kInf, -kInf}, {6}).to(dt).to(kGpu));
    relu(x).backward(full({6}, 3.0, TensorOptions(dt).device(kGpu)));
    CHECK(x.grad().to_vector<double>() == std::vector<double>{3, 0, 0, 3, 3, 0});
  }
}

TEST_CASE("cuda double backward: relu, gelu and every differentiable elementwise op by gradgradcheck" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(109);
  for (const UnaryCase& c : unary_cases()) {
    INFO("op: " << std::string(c.label));
    const Tensor x = reference_map(randn64({3, 4}), c.domain);
    auto fn = [&](const tensor_list& in) { return c.op(in[0]); };
    CHECK_GRADGRADCHECK(fn, tensor_list{leaf(x.to(kGpu))});
    CHECK_GRADGRADCHECK(fn, tensor_list{leaf(x.to(kGpu).t().contiguous().t())});
  }
  for (const BinaryCase& c : binary_cases()) {
    INFO("op: " << std::string(c.label));
    auto fn = [&](const tensor_list& in) { return c.op(in[0], in[1]); };
    const Tensor a = leaf(reference_map(randn64({3, 4}), c.domain_a).to(kGpu));
    const Tensor b = leaf(reference_map(randn64({4}), c.domain_b).to(kGpu));
    CHECK_GRADGRADCHECK(fn, (tensor_list{a, b}));
  }
  const Tensor condition = gt(randn64({3, 4}), 0.0).to(kGpu);
  auto where_fn = [&](const tensor_list& in) { return where(condition, in[0] * in[0], in[1]); };
  CHECK_GRADGRADCHECK(where_fn, (tensor_list{leaf(randn64({3, 4}).to(kGpu)), leaf(randn64({4}).to(kGpu))}));
}

TEST_CASE("cuda double backward of relu and gelu agrees with the CPU's in every dtype" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(110);
  const std::vector<std::pair<const char*, UnaryOp>> activations = {
      {"relu", [](const Tensor& t) { return relu(t); }},
      {"gelu", [](const Tensor& t) { return gelu(t); }},
      {"gelu tanh", [](const Tensor& t) { return gelu(t, GeluApproximation::Tanh); }}};
  const Tensor values = reference_map(randn64({33, 65}) * 3.0, [](double v) { return away_from_kinks(v, {0.0}); });
  for (const auto& [name, op] : activations) {
    INFO("op: " << std::string(name));
    for (DType dt : {kFloat64, kFloat32, kFloat16, kBFloat16}) {
      INFO("dtype: " << std::string(dtype_name(dt)));
      auto second = [&](const Tensor& x_in) {
        Tensor x = leaf(x_in);
        const Tensor g = autograd::grad({op(x).sum()}, {x}, {}, std::nullopt, /*create_graph=*/true)[0];
        return autograd::grad({(g * g).sum()}, {x})[0];
      };
      const bool half = is_half(dt);
      CHECK_ALLCLOSE(second(values.to(dt).to(kGpu)), second(values.to(dt)), half ? 2e-2 : 1e-5,
                     half ? 2e-2 : 1e-6);
    }
  }
}

TEST_CASE("cuda in-place int64 arithmetic wraps around on overflow, as on the CPU" *
          doctest::skip(!cuda_is_available())) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  const Tensor base = from_vector<int64_t>({kMax, kMin, int64_t{1} << 62, -3}, {4});
  const Tensor other = from_vector<int64_t>({1, -1, 3, kMax}, {4});
  const std::vector<std::function<void(Tensor&)>> updates = {
      [](Tensor& t) { t.add_(1.0); }, [](Tensor& t) { t.add_(-1.0); }, [](Tensor& t) { t.mul_(2.0); },
      [&](Tensor& t) { t.add_(other.to(t.device())); }, [&](Tensor& t) { t.add_(other.to(t.device()), 4.0); },
      [&](Tensor& t) { t.mul_(other.to(t.device())); }};
  for (const auto& update : updates) {
    Tensor on_gpu = base.to(kGpu);
    Tensor on_cpu = base.clone();
    update(on_gpu);
    update(on_cpu);
    const Tensor back = on_gpu.to(kCPU);
    for (int64_t i = 0; i < 4; ++i) CHECK(back.data_ptr<int64_t>()[i] == on_cpu.data_ptr<int64_t>()[i]);
  }
  Tensor t = base.to(kGpu);
  t.add_(1.0);
  CHECK(t.to(kCPU).data_ptr<int64_t>()[0] == kMin);
}

// ---- the functor conventions on the GPU: the output's index, four inputs, two outputs ----
// The same map on both devices (ops/cpu_loops.h's elementwise_map sends it to the CPU loop
// or the CUDA engine by the output's device), in the layouts the engine treats differently:
// contiguous with a tail (vectors), rows broadcast (the vector rows kernel), a transposed
// and a strided view (one element per access), a misaligned slice. The test functors and
// their CUDA instantiations: tests/elementwise_test_functors.h, tests/elementwise_test_kernels.cu.

namespace {

// Each view has shape [37, 29] (an odd row: a tail after the vectors).
std::vector<Layout> map_layouts() {
  return {
      {"contiguous", {37, 29}, identity},
      {"transposed", {29, 37}, [](const Tensor& t) { return t.t(); }},
      {"every other column", {37, 58}, [](const Tensor& t) { return t.slice(1, 0, 58, 2); }},
      {"a slice from element 1: misaligned", {37 * 29 + 1},
       [](const Tensor& t) { return t.slice(0, 1, 37 * 29 + 1).view({37, 29}); }},
  };
}
const Shape kMapShape = {37, 29};

// x's layout on the GPU: the same view of the same base values.
struct Pair {
  Tensor cpu, gpu;
};
Pair make_operand(const Layout& layout, DType dtype, ScalarFn domain = anywhere) {
  const Tensor base = reference_map(randn(layout.base_sizes, kFloat64), domain).to(dtype);
  return {layout.view(base), layout.view(base.to(kGpu))};
}
Pair make_plain(const Shape& sizes, DType dtype, ScalarFn domain = anywhere) {
  const Tensor base = reference_map(randn(sizes, kFloat64), domain).to(dtype);
  return {base, base.to(kGpu)};
}
Tensor empty_on(DType dtype, Device device) { return empty(kMapShape, TensorOptions(dtype).device(device)); }

const std::vector<DType> kFloatingDTypes = {kFloat64, kFloat32, kFloat16, kBFloat16};

}  // namespace

TEST_CASE("cuda maps: a kTakesIndex functor gets the output's row-major index, as on the CPU" *
          doctest::skip(!cuda_is_available())) {
  for (DType dtype : kFloatingDTypes) {
    INFO("dtype: " << dtype_name(dtype));
    dispatch_floating(dtype, [&](auto tag) {
      using T = decltype(tag);
      for (const Layout& layout : map_layouts()) {
        INFO("layout: " << layout.name);
        const Pair x = make_operand(layout, dtype);
        Tensor cpu = empty_on(dtype, kCPU), gpu = empty_on(dtype, kGpu);
        elementwise_map<T, T>("add_index", cpu, x.cpu, test::AddIndex{});
        elementwise_map<T, T>("add_index", gpu, x.gpu, test::AddIndex{});
        CHECK_ALLCLOSE(gpu.to(kCPU), cpu, 0.0, 0.0);  // one float addition, one rounding: the same bits
      }
      // A transposed output: the index is its row-major position, not its memory offset.
      const Pair x = make_plain(kMapShape, dtype);
      Tensor cpu = empty({29, 37}, dtype).t();
      Tensor gpu = empty({29, 37}, TensorOptions(dtype).device(kGpu)).t();
      elementwise_map<T, T>("add_index", cpu, x.cpu, test::AddIndex{});
      elementwise_map<T, T>("add_index", gpu, x.gpu, test::AddIndex{});
      CHECK_ALLCLOSE(gpu.to(kCPU), cpu, 0.0, 0.0);
    });
  }
}

TEST_CASE("cuda maps: four inputs, broadcast and strided, agree with the CPU" * doctest::skip(!cuda_is_available())) {
  for (const Agreement& agreement : agreements()) {
    const DType dtype = agreement.dtype;
    INFO("dtype: " << dtype_name(dtype));
    dispatch_floating(dtype, [&](auto tag) {
      using T = decltype(tag);
      for (const Layout& layout : map_layouts()) {
        INFO("layout: " << layout.name);
        const Pair p = make_operand(layout, dtype);
        const Pair g = make_plain({29}, dtype);     // broadcast down the rows
        const Pair m = make_plain({37, 1}, dtype);  // broadcast along each row
        const Pair v = make_operand(layout, dtype, positive);
        const test::FourInputStep step{0.3};
        Tensor cpu = empty_on(dtype, kCPU), gpu = empty_on(dtype, kGpu);
        elementwise_map<T, T, T, T, T>("step", cpu, p.cpu, g.cpu, m.cpu, v.cpu, step);
        elementwise_map<T, T, T, T, T>("step", gpu, p.gpu, g.gpu, m.gpu, v.gpu, step);
        // sqrt and division are correctly rounded on both: the same value, up to the
        // contraction of a multiply and a subtraction into one fma on the GPU.
        CHECK_ALLCLOSE(gpu.to(kCPU), cpu, agreement.rtol, agreement.atol);
      }
    });
  }
}

TEST_CASE("cuda maps: two outputs from one pass agree with the CPU" * doctest::skip(!cuda_is_available())) {
  for (const Agreement& agreement : agreements()) {
    const DType dtype = agreement.dtype;
    INFO("dtype: " << dtype_name(dtype));
    dispatch_floating(dtype, [&](auto tag) {
      using T = decltype(tag);
      for (const Layout& layout : map_layouts()) {
        INFO("layout: " << layout.name);
        const Pair x = make_operand(layout, dtype);
        Tensor s_cpu = empty_on(dtype, kCPU), c_cpu = empty_on(dtype, kCPU);
        Tensor s_gpu = empty_on(dtype, kGpu), c_gpu = empty_on(dtype, kGpu);
        elementwise_map2<T, T, T>("sincos", s_cpu, c_cpu, x.cpu, test::SinCos{});
        elementwise_map2<T, T, T>("sincos", s_gpu, c_gpu, x.gpu, test::SinCos{});
        CHECK_ALLCLOSE(s_gpu.to(kCPU), s_cpu, agreement.rtol, agreement.atol);
        CHECK_ALLCLOSE(c_gpu.to(kCPU), c_cpu, agreement.rtol, agreement.atol);

        // Two inputs (one broadcast), two outputs, and the index.
        const Pair b = make_plain({29}, dtype);
        Tensor sum_cpu = empty_on(dtype, kCPU), product_cpu = empty_on(dtype, kCPU);
        Tensor sum_gpu = empty_on(dtype, kGpu), product_gpu = empty_on(dtype, kGpu);
        elementwise_map2<T, T, T, T>("sum_index_product", sum_cpu, product_cpu, x.cpu, b.cpu,
                                     test::SumWithIndexAndProduct{});
        elementwise_map2<T, T, T, T>("sum_index_product", sum_gpu, product_gpu, x.gpu, b.gpu,
                                     test::SumWithIndexAndProduct{});
        CHECK_ALLCLOSE(sum_gpu.to(kCPU), sum_cpu, agreement.rtol, agreement.atol);
        CHECK_ALLCLOSE(product_gpu.to(kCPU), product_cpu, 0.0, 0.0);  // one product, one rounding
      }
    });
  }
  // Outputs of two dtypes (and of two element sizes: the vector width follows the widest).
  for (DType dtype : {kFloat64, kFloat32, kBFloat16}) {
    INFO("dtype: " << dtype_name(dtype));
    dispatch_floating(dtype, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (!std::is_same_v<T, Half>) {
        for (const Layout& layout : map_layouts()) {
          INFO("layout: " << layout.name);
          const Pair x = make_operand(layout, dtype);
          Tensor scaled_cpu = empty_on(dtype, kCPU), mask_cpu = empty_on(kBool, kCPU);
          Tensor scaled_gpu = empty_on(dtype, kGpu), mask_gpu = empty_on(kBool, kGpu);
          elementwise_map2<T, bool, T>("scale_and_mask", scaled_cpu, mask_cpu, x.cpu, test::ScaleAndMask{-1.5});
          elementwise_map2<T, bool, T>("scale_and_mask", scaled_gpu, mask_gpu, x.gpu, test::ScaleAndMask{-1.5});
          CHECK_ALLCLOSE(scaled_gpu.to(kCPU), scaled_cpu, 0.0, 0.0);
          CHECK(mask_gpu.to(kCPU).to(kInt64).to_vector<int64_t>() == mask_cpu.to(kInt64).to_vector<int64_t>());
        }
      }
    });
  }
}

// ---------------------------------------------------------------------------------------
// more elementwise: the three-input ops, the bool ops, masked_fill and where with scalars

namespace {

struct TripleLayout {
  const char* name;
  Shape a, b, c;
};
std::vector<TripleLayout> triple_layouts() {
  return {{"same shape", {7, 13}, {7, 13}, {7, 13}},
          {"1000003 elements", {1000003}, {1000003}, {1000003}},
          {"all three broadcast", {3, 1}, {1, 4}, {3, 4}},
          {"rows", {257, 1000}, {1000}, {257, 1000}},
          {"a 0-d operand", {257, 1000}, {}, {257, 1000}},
          {"empty", {0, 1}, {4}, {1}}};
}

using TernaryOp = std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)>;

}  // namespace

TEST_CASE("cuda clamp with tensor bounds and lerp with a tensor weight: every dtype and layout, gradients" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(111);
  const std::vector<std::pair<const char*, TernaryOp>> ops = {
      {"clamp", [](const Tensor& x, const Tensor& lo, const Tensor& hi) { return clamp(x, lo, hi); }},
      {"clamp(x, min, nullopt)",
       [](const Tensor& x, const Tensor& lo, const Tensor&) { return clamp(x, lo, std::nullopt); }},
      {"lerp", [](const Tensor& s, const Tensor& e, const Tensor& w) { return lerp(s, e, w); }}};
  for (const auto& [name, op] : ops) {
    INFO("op: " << std::string(name));
    for (const TripleLayout& layout : triple_layouts()) {
      INFO("layout: " << std::string(layout.name));
      const Tensor a = randn64(layout.a) * 2.0;
      const Tensor b = randn64(layout.b) - 0.5;
      const Tensor c = randn64(layout.c) + 0.5;
      for (const Agreement& agreement : agreements()) {
        INFO("dtype: " << std::string(dtype_name(agreement.dtype)));
        const Tensor ra = a.to(agreement.dtype), rb = b.to(agreement.dtype), rc = c.to(agreement.dtype);
        const Tensor on_gpu = op(ra.to(kGpu), rb.to(kGpu), rc.to(kGpu));
        CHECK(on_gpu.device() == kGpu);
        CHECK(on_gpu.dtype() == agreement.dtype);
        const DType cpu = reference_dtype(agreement.dtype);
        CHECK_ALLCLOSE(on_gpu, op(ra.to(cpu), rb.to(cpu), rc.to(cpu)), agreement.rtol, agreement.atol);
      }
    }
    // A transposed first operand.
    const Tensor x = randn64({13, 7});
    const Tensor lo = randn64({7}) - 0.5;
    const Tensor hi = randn64({13, 1}) + 0.5;
    CHECK_ALLCLOSE(op(x.to(kGpu).t(), lo.to(kGpu).unsqueeze(1), hi.to(kGpu).t()), op(x.t(), lo.unsqueeze(1), hi.t()),
                   1e-12, 1e-14);
    // Gradients: backward on the GPU against the CPU, gradcheck and gradgradcheck in float64.
    const Tensor lo4 = randn64({4}) - 1.0;
    const Tensor hi31 = randn64({3, 1}) + 1.0;
    const Tensor away =
        reference_map(randn64({3, 4}) * 2.0, [](double v) { return std::round(v * 4.0) / 4.0 + 0.125; });
    // The one-sided clamp takes no third input.
    const bool one_sided = std::string(name) == "clamp(x, min, nullopt)";
    auto fn = [&](const tensor_list& in) { return op(in[0], in[1], one_sided ? in[1] : in[2]); };
    for (DType dt : {kFloat64, kFloat32}) {
      INFO("dtype: " << std::string(dtype_name(dt)));
      check_backward_matches(fn, one_sided ? tensor_list{away, lo4} : tensor_list{away, lo4, hi31}, dt);
    }
    // Inputs on a grid of quarters offset by 1/8, min on the grid, max offset by 1/16: no two
    // of x, min and max are equal (min == max is a kink too), so no finite difference
    // crosses one.
    const Tensor grid_lo = reference_map(lo4, [](double v) { return std::round(v * 4.0) / 4.0; });
    const Tensor grid_hi = reference_map(hi31, [](double v) { return std::round(v * 4.0) / 4.0 + 0.0625; });
    tensor_list inputs = {leaf(away.to(kGpu)), leaf(grid_lo.to(kGpu))};
    if (!one_sided) inputs.push_back(leaf(grid_hi.to(kGpu)));
    CHECK_GRADCHECK(fn, inputs);
    CHECK_GRADGRADCHECK(fn, inputs);
  }
}

TEST_CASE("cuda new activations and math ops: backward on the GPU agrees with the CPU" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(112);
  for (const UnaryCase& c : unary_cases()) {
    INFO("op: " << std::string(c.label));
    const Tensor x = reference_map(randn64({257, 33}), c.domain);
    for (DType dt : {kFloat64, kFloat32}) {
      INFO("dtype: " << std::string(dtype_name(dt)));
      check_backward_matches([&](const tensor_list& in) { return c.op(in[0]); }, {x}, dt);
    }
  }
}

TEST_CASE("cuda logical and bitwise ops: every dtype, broadcasting, exactly the CPU's answers" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(113);
  const std::vector<std::pair<const char*, BinaryOp>> logical = {
      {"logical_and", [](const Tensor& a, const Tensor& b) { return logical_and(a, b); }},
      {"logical_or", [](const Tensor& a, const Tensor& b) { return logical_or(a, b); }},
      {"logical_xor", [](const Tensor& a, const Tensor& b) { return logical_xor(a, b); }}};
  const std::vector<std::pair<const char*, BinaryOp>> bitwise = {
      {"&", [](const Tensor& a, const Tensor& b) { return a & b; }},
      {"|", [](const Tensor& a, const Tensor& b) { return a | b; }},
      {"^", [](const Tensor& a, const Tensor& b) { return a ^ b; }}};
  for (const BinaryLayout& layout : binary_layouts()) {
    INFO("layout: " << std::string(layout.name));
    const Tensor a = small_integers(layout.a_base);
    const Tensor b = small_integers(layout.b_base);
    for (DType dt : all_dtypes()) {
      INFO("dtype: " << std::string(dtype_name(dt)));
      const Tensor ta = layout.a_view(a.to(dt));
      const Tensor tb = layout.b_view(b.to(dt));
      const Tensor ga = layout.a_view(a.to(dt).to(kGpu));
      const Tensor gb = layout.b_view(b.to(dt).to(kGpu));
      for (const auto& [name, op] : logical) {
        INFO("op: " << std::string(name));
        const Tensor on_gpu = op(ga, gb);
        CHECK(on_gpu.dtype() == kBool);
        CHECK(on_gpu.device() == kGpu);
        CHECK_ALLCLOSE(on_gpu, op(ta, tb), 0.0, 0.0);
      }
      // Mixed dtypes: the second operand as float32.
      CHECK_ALLCLOSE(logical_and(ga, gb.to(kFloat32)), logical_and(ta, tb.to(kFloat32)), 0.0, 0.0);
      CHECK_ALLCLOSE(logical_not(ga), logical_not(ta), 0.0, 0.0);
      if (dt == kBool || dt == kInt64) {
        // Larger int64 values, negative ones included, so that every bit pattern matters.
        const Tensor wa = dt == kInt64 ? layout.a_view((a * 1000.0 + 7.0).to(dt)) : ta;
        const Tensor wb = dt == kInt64 ? layout.b_view((b * 333.0 - 5.0).to(dt)) : tb;
        for (const auto& [name, op] : bitwise) {
          INFO("op: " << std::string(name));
          const Tensor on_gpu = op(wa.to(kGpu), wb.to(kGpu));
          CHECK(on_gpu.dtype() == dt);
          CHECK(on_gpu.to(kCPU).to_vector<int64_t>() == op(wa, wb).to_vector<int64_t>());
        }
        CHECK((~wa.to(kGpu)).to(kCPU).to_vector<int64_t>() == (~wa).to_vector<int64_t>());
      }
    }
  }
  // NaN is true.
  const Tensor with_nan = from_vector<double>({kNaN, 0.0, -0.0, kInf}, {4});
  for (DType dt : {kFloat32, kBFloat16}) {
    const Tensor x = with_nan.to(dt);
    CHECK_ALLCLOSE(logical_not(x.to(kGpu)), logical_not(x), 0.0, 0.0);
    CHECK_ALLCLOSE(logical_or(x.to(kGpu), x.to(kGpu)), logical_or(x, x), 0.0, 0.0);
  }
}

TEST_CASE("cuda isnan, isinf, isfinite, isclose, allclose, equal: the CPU's answers" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(114);
  const Tensor specials = from_vector<double>({kNaN, kInf, -kInf, 0.0, -0.0, 1e300, -2.5, 1e-300}, {2, 4});
  for (DType dt : all_dtypes()) {
    INFO("dtype: " << std::string(dtype_name(dt)));
    const Tensor x = is_floating(dt) ? specials.to(dt) : small_integers({2, 4}).to(dt);
    for (const UnaryOp& test : std::vector<UnaryOp>{[](const Tensor& t) { return isnan(t); },
                                                   [](const Tensor& t) { return isinf(t); },
                                                   [](const Tensor& t) { return isfinite(t); }}) {
      const Tensor on_gpu = test(x.to(kGpu));
      CHECK(on_gpu.dtype() == kBool);
      CHECK(on_gpu.device() == kGpu);
      CHECK_ALLCLOSE(on_gpu, test(x), 0.0, 0.0);
      CHECK_ALLCLOSE(test(x.to(kGpu).t()), test(x.t()), 0.0, 0.0);
    }
  }
  // isclose of random pairs, with tolerances that make some elements close and some not.
  for (const BinaryLayout& layout : binary_layouts()) {
    INFO("layout: " << std::string(layout.name));
    const Tensor a = randn64(layout.a_base);
    const Tensor b = randn64(layout.b_base);
    for (DType dt : {kFloat64, kFloat32, kFloat16, kBFloat16}) {
      INFO("dtype: " << std::string(dtype_name(dt)));
      const Tensor ta = layout.a_view(a.to(dt));
      const Tensor tb = layout.b_view(b.to(dt));
      for (double rtol : {1e-5, 0.5, 2.0}) {
        CHECK_ALLCLOSE(isclose(ta.to(kGpu), tb.to(kGpu), rtol, 0.1), isclose(ta, tb, rtol, 0.1), 0.0, 0.0);
        CHECK(allclose(ta.to(kGpu), tb.to(kGpu), rtol, 0.1) == allclose(ta, tb, rtol, 0.1));
      }
    }
  }
  const Tensor a = from_vector<double>({1.0, kNaN, kInf, kInf, 0.0}, {5});
  const Tensor b = from_vector<double>({1.0 + 1e-6, kNaN, kInf, -kInf, 1e-9}, {5});
  for (bool equal_nan : {false, true}) {
    CHECK_ALLCLOSE(isclose(a.to(kGpu), b.to(kGpu), 1e-5, 1e-8, equal_nan), isclose(a, b, 1e-5, 1e-8, equal_nan), 0.0,
                   0.0);
  }
  CHECK(allclose(a.to(kGpu).slice(0, 0, 1), b.to(kGpu).slice(0, 0, 1)));
  CHECK_FALSE(allclose(a.to(kGpu), b.to(kGpu)));
  const Tensor x = randn64({257, 1000});
  CHECK(equal(x.to(kGpu), x.to(kGpu).clone()));
  CHECK(equal(x.to(kGpu).t(), x.t().contiguous().to(kGpu)));
  CHECK_FALSE(equal(x.to(kGpu), (x + 1e-9).to(kGpu)));
  CHECK_FALSE(equal(x.to(kGpu), x.to(kGpu).reshape({1000, 257})));
  CHECK(x.to(kGpu).equal(x.to(kGpu)));
}

TEST_CASE("cuda masked_fill out of place and where with scalars: every dtype, broadcasting, gradients" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(115);
  struct FillLayout {
    const char* name;
    Shape x, mask;
  };
  const std::vector<FillLayout> layouts = {{"same shape", {7, 13}, {7, 13}},
                                           {"1000003 elements", {1000003}, {1000003}},
                                           {"a row mask", {257, 1000}, {1000}},
                                           {"the mask larger than x", {3, 1}, {2, 3, 4}},
                                           {"empty", {0, 4}, {4}}};
  for (const FillLayout& layout : layouts) {
    INFO("layout: " << std::string(layout.name));
    const Tensor values = small_integers(layout.x);
    const Tensor mask = gt(randn64(layout.mask), 0.0);
    for (DType dt : all_dtypes()) {
      INFO("dtype: " << std::string(dtype_name(dt)));
      const Tensor x = values.to(dt);
      const Tensor on_gpu = masked_fill(x.to(kGpu), mask.to(kGpu), 2.0);
      CHECK(on_gpu.dtype() == dt);
      CHECK(on_gpu.device() == kGpu);
      CHECK_ALLCLOSE(on_gpu, masked_fill(x, mask, 2.0), 0.0, 0.0);
      const Tensor value = full({}, -1.0, dt);
      CHECK_ALLCLOSE(masked_fill(x.to(kGpu), mask.to(kGpu), value.to(kGpu)), masked_fill(x, mask, value), 0.0, 0.0);
      const Tensor condition = gt(randn64(layout.x), 0.0);
      CHECK_ALLCLOSE(where(condition.to(kGpu), 1.0, x.to(kGpu)), where(condition, 1.0, x), 0.0, 0.0);
      CHECK_ALLCLOSE(where(condition.to(kGpu), x.to(kGpu), -3.0), where(condition, x, -3.0), 0.0, 0.0);
    }
  }
  const Tensor condition = gt(randn64({13, 7}), 0.0);
  const Tensor both = where(condition.to(kGpu), 1.5, -2.0);
  CHECK(both.dtype() == kFloat32);
  CHECK(both.device() == kGpu);
  CHECK_ALLCLOSE(both, where(condition, 1.5, -2.0), 0.0, 0.0);
  // A transposed x; gradients to x and to a 0-d value, GPU against CPU.
  const Tensor x = randn64({7, 13});
  const Tensor mask = condition.t();
  CHECK_ALLCLOSE(masked_fill(x.to(kGpu).t(), condition.to(kGpu), 0.5), masked_fill(x.t(), condition, 0.5), 0.0, 0.0);
  auto fn = [&](const tensor_list& in) {
    return masked_fill(masked_fill(in[0], mask.to(in[0].device()), 0.25), lt(in[0], -1.0), in[1]);
  };
  for (DType dt : {kFloat64, kFloat32}) check_backward_matches(fn, {x, scalar_tensor(0.5, kFloat64)}, dt);
  CHECK_GRADGRADCHECK([&](const tensor_list& in) { return masked_fill(in[0] * in[0], mask.to(kGpu), in[1]); },
                      (tensor_list{leaf(x.to(kGpu)), leaf(scalar_tensor(0.5, TensorOptions(kFloat64).device(kGpu)))}));
}
