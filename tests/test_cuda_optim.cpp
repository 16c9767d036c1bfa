// The optimizers on the GPU (cuda/optim.cu's multi-tensor kernels): AdamW and SGD against
// their formulas written here in plain doubles over 10 steps, and against the CPU path bit
// for bit; clip_grad_norm_ against a float64 reference. The parameters cover every path of
// the kernels: sizes that fill 16-byte vectors and sizes that leave a tail (1, 3, 7, 769,
// 4099, 100003, a 2-D one), a view at an odd offset (misaligned: one element at a time), a
// transposed view (not contiguous: the tensor ops), a parameter whose gradient arrives at
// step 3 (SGD's first step in a later launch), one that never has a gradient, and hundreds
// of small tensors (more than one launch). float32, float64, and bfloat16 through its float32
// master copy. Parameter groups (a launch per weight decay) against an optimizer per group.
// Every element is checked, and the allocator's cache is filled with NaN first,
// so that an element a kernel forgets shows.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "tests/cuda_test_support.h"
#include "tests/optim_group_checks.h"

using namespace minigrad;
using namespace minigrad::test;

namespace {

constexpr int kSteps = 10;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Leaves blocks of these sizes filled with NaN in the GPU cache, all at once, so that
// tensors of those sizes allocated next (the caching allocator hands back a block of about
// the requested size) start as NaN.
void poison_gpu_cache(const std::vector<int64_t>& byte_sizes) {
  std::vector<Tensor> blocks;
  for (int64_t bytes : byte_sizes)
    blocks.push_back(full({(bytes + 3) / 4}, kNaN, TensorOptions(kFloat32).device(kGpu)));
}

// Every small size class up to 64 KiB: scratch buffers such as clip_grad_norm_'s partial sums.
void poison_small_blocks() {
  std::vector<int64_t> sizes;
  for (int64_t bytes = 512; bytes <= 65536; bytes += 512) sizes.push_back(bytes);
  poison_gpu_cache(sizes);
}

// How a parameter is made on the device from its values (in logical row-major order).
enum class Layout { Contiguous, OddOffset, Transposed };

struct ParamSpec {
  Shape shape;
  Layout layout = Layout::Contiguous;
  int first_grad_step = 0;  // kSteps: never has a gradient
};

int64_t numel_of(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

std::vector<ParamSpec> odd_specs() {
  return {{{1}},
          {{3}},
          {{7}},
          {{769}},
          {{4099}},
          {{100003}},
          {{33, 65}},
          {{769}, Layout::OddOffset},
          {{9, 5}, Layout::Transposed},
          {{5}, Layout::Contiguous, 3},
          {{6}, Layout::Contiguous, kSteps}};
}

// odd_specs and 300 small tensors: three launches of up to 128 tensors.
std::vector<ParamSpec> many_specs() {
  std::vector<ParamSpec> specs = odd_specs();
  for (int64_t k = 0; k < 300; ++k) specs.push_back({{1 + (k * 53) % 97}});
  return specs;
}

// Values drawn with randn and rounded to dtype, as doubles: the optimizer and the reference
// start from the same numbers.
std::vector<double> random_values(int64_t n, DType dtype) {
  return randn({n}, kFloat64).to(dtype).to_vector<double>();
}

Tensor make_param(const ParamSpec& spec, const std::vector<double>& values, DType dtype, Device device) {
  const int64_t n = numel_of(spec.shape);
  const Tensor v = from_vector(values, spec.shape).to(dtype).to(device);
  switch (spec.layout) {
    case Layout::OddOffset: {
      // One element in: the data pointer is 4 (or 2, 8) bytes past a 16-byte boundary.
      const Tensor base = zeros({n + 1}, TensorOptions(dtype).device(device));
      Tensor view = base.slice(0, 1, n + 1).view(spec.shape);
      view.copy_(v);
      return view.detach().requires_grad_();
    }
    case Layout::Transposed: return v.t().contiguous().t().detach().requires_grad_();
    case Layout::Contiguous: break;
  }
  return v.detach().requires_grad_();
}

// The values of a run: start[i], and grads[step][i] (empty before the parameter's first
// gradient).
struct Values {
  std::vector<std::vector<double>> start;
  std::vector<std::vector<std::vector<double>>> grads;
};

Values random_run(const std::vector<ParamSpec>& specs, DType dtype) {
  Values values;
  for (const ParamSpec& spec : specs) values.start.push_back(random_values(numel_of(spec.shape), dtype));
  values.grads.resize(kSteps);
  for (int s = 0; s < kSteps; ++s)
    for (const ParamSpec& spec : specs)
      values.grads[s].push_back(s >= spec.first_grad_step ? random_values(numel_of(spec.shape), dtype)
                                                          : std::vector<double>());
  return values;
}

// A step's gradients on `device` (undefined where g[i] is empty): one host-to-device copy for
// all of them, each a slice starting on a 16-byte boundary as a fresh allocation would. (A copy
// a gradient, some 3,000 a run, took most of this file's time under compute-sanitizer.)
std::vector<Tensor> step_grads(const std::vector<ParamSpec>& specs, const std::vector<std::vector<double>>& g,
                               DType dtype, Device device) {
  const int64_t align = 16 / static_cast<int64_t>(element_size(dtype));
  std::vector<int64_t> starts;
  std::vector<double> flat;
  for (const std::vector<double>& values : g) {
    starts.push_back(static_cast<int64_t>(flat.size()));
    flat.insert(flat.end(), values.begin(), values.end());
    flat.resize((flat.size() + align - 1) / align * align, 0.0);
  }
  const Tensor all = from_vector(flat, {static_cast<int64_t>(flat.size())}).to(dtype).to(device);
  std::vector<Tensor> grads;
  for (size_t i = 0; i < specs.size(); ++i)
    grads.push_back(g[i].empty() ? Tensor()
                                 : all.narrow(0, starts[i], numel_of(specs[i].shape)).view(specs[i].shape));
  return grads;
}

// The optimizer with its master copies readable.
template <typename Optimizer>
struct WithMasters : Optimizer {
  using Optimizer::Optimizer;
  Tensor master_copy(size_t i) const { return this->masters_[i]; }
};

// The parameters after kSteps steps on `device`, and their master copies (undefined where
// there is none), both on the CPU.
struct Result {
  std::vector<Tensor> params, masters;
};

template <typename Optimizer, typename Options>
Result run_steps(const std::vector<ParamSpec>& specs, const Values& values, DType dtype, Device device,
                 const Options& options) {
  std::vector<Tensor> params;
  for (size_t i = 0; i < specs.size(); ++i) params.push_back(make_param(specs[i], values.start[i], dtype, device));
  WithMasters<Optimizer> optimizer(params, options);
  for (int s = 0; s < kSteps; ++s) {
    const std::vector<Tensor> grads = step_grads(specs, values.grads[s], dtype, device);
    for (size_t i = 0; i < specs.size(); ++i) params[i].mutable_grad() = grads[i];
    // The state tensors this step allocates, for the parameters whose first gradient it is
    // (SGD's momentum buffers are written, never zeroed): in float32, float64 for float64
    // parameters.
    std::vector<int64_t> state_bytes;
    for (const ParamSpec& spec : specs)
      if (spec.first_grad_step == s) state_bytes.push_back(numel_of(spec.shape) * (dtype == kFloat64 ? 8 : 4));
    if (device.is_cuda()) poison_gpu_cache(state_bytes);
    optimizer.step();
  }
  Result result;
  for (size_t i = 0; i < specs.size(); ++i) {
    result.params.push_back(params[i].detach().to(kCPU));
    const Tensor master = optimizer.master_copy(i);
    result.masters.push_back(master.defined() ? master.to(kCPU) : Tensor());
  }
  return result;
}

// AdamW's formula on doubles (bias-corrected moments, as in the paper), one parameter.
std::vector<double> adamw_reference(const Values& values, size_t i, const optim::AdamWOptions& o) {
  std::vector<double> w = values.start[i];
  std::vector<double> m(w.size()), v(w.size());
  for (int s = 1; s <= kSteps; ++s) {
    const std::vector<double>& g = values.grads[s - 1][i];
    if (g.empty()) continue;  // the step count t still advances: it is the optimizer's
    for (size_t k = 0; k < w.size(); ++k) {
      w[k] *= 1.0 - o.lr * o.weight_decay;
      m[k] = o.beta1 * m[k] + (1.0 - o.beta1) * g[k];
      v[k] = o.beta2 * v[k] + (1.0 - o.beta2) * g[k] * g[k];
      const double m_hat = m[k] / (1.0 - std::pow(o.beta1, s));
      const double v_hat = v[k] / (1.0 - std::pow(o.beta2, s));
      w[k] -= o.lr * m_hat / (std::sqrt(v_hat) + o.eps);
    }
  }
  return w;
}

// SGD's formula on doubles (PyTorch's: the first step's buffer is g), one parameter.
std::vector<double> sgd_reference(const Values& values, size_t i, const optim::SGDOptions& o) {
  std::vector<double> w = values.start[i];
  std::vector<double> buf(w.size());
  bool first = true;
  for (int s = 0; s < kSteps; ++s) {
    const std::vector<double>& grad = values.grads[s][i];
    if (grad.empty()) continue;
    for (size_t k = 0; k < w.size(); ++k) {
      double g = grad[k] + o.weight_decay * w[k];
      if (o.momentum != 0.0) {
        buf[k] = first ? g : o.momentum * buf[k] + (1.0 - o.dampening) * g;
        g = o.nesterov ? g + o.momentum * buf[k] : buf[k];
      }
      w[k] -= o.lr * g;
    }
    first = false;
  }
  return w;
}

// A parameter against its reference. float32 and float64 directly; bfloat16 through its
// master copy (float32, checked as tightly as a float32 parameter) and the parameter itself,
// which must be that master rounded to bfloat16, and so within bfloat16's rounding (2^-8
// relative) of the reference.
void check_against_reference(const Result& result, size_t i, const std::vector<double>& expected, DType dtype) {
  const Tensor reference = from_vector(expected, result.params[i].sizes());
  const Tensor& p = result.params[i];
  CHECK(p.dtype() == dtype);
  CHECK(!isnan(p).any().item<bool>());
  if (dtype == kFloat64) {
    CHECK_ALLCLOSE(p, reference, 1e-12, 1e-12);
  } else if (dtype == kFloat32) {
    CHECK_ALLCLOSE(p.to(kFloat64), reference, 1e-5, 1e-5);
  } else {
    const Tensor& master = result.masters[i];
    REQUIRE(master.defined());
    CHECK(master.dtype() == kFloat32);
    CHECK_ALLCLOSE(master.to(kFloat64), reference, 1e-5, 1e-5);
    CHECK(same_bits(p, master.to(dtype)));
    CHECK_ALLCLOSE(p.to(kFloat64), reference, 1.0 / 256.0, 1e-5);
  }
}

const std::vector<DType> kOptimDTypes = {kFloat32, kFloat64, kBFloat16};

}  // namespace

TEST_CASE("AdamW on the GPU against its formula over 10 steps, every size and layout" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(1200);
  const std::vector<ParamSpec> specs = odd_specs();
  const optim::AdamWOptions o{3e-2, 0.8, 0.95, 1e-6, 0.1};
  for (DType dtype : kOptimDTypes) {
    CAPTURE(dtype);
    const Values values = random_run(specs, dtype);
    const Result gpu = run_steps<optim::AdamW>(specs, values, dtype, kGpu, o);
    for (size_t i = 0; i < specs.size(); ++i) {
      CAPTURE(i);
      CAPTURE(shape_str(specs[i].shape));
      if (specs[i].first_grad_step >= kSteps) {
        // Never had a gradient: left as it was, and no master copy made for it.
        CHECK(same_bits(gpu.params[i], from_vector(values.start[i], specs[i].shape).to(dtype)));
        CHECK(!gpu.masters[i].defined());
        continue;
      }
      check_against_reference(gpu, i, adamw_reference(values, i, o), dtype);
    }
  }
}

TEST_CASE("SGD on the GPU against its formula over 10 steps: momentum, dampening, Nesterov, weight decay" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(1201);
  const std::vector<ParamSpec> specs = odd_specs();
  const std::vector<optim::SGDOptions> cases = {{0.1, 0.0, 0.0, 0.0, false},
                                                {0.1, 0.9, 0.0, 0.0, false},
                                                {0.05, 0.9, 0.2, 0.01, false},
                                                {0.05, 0.8, 0.0, 0.1, true},
                                                {0.02, 0.0, 0.0, 0.05, false}};
  for (DType dtype : kOptimDTypes) {
    const Values values = random_run(specs, dtype);
    for (const optim::SGDOptions& o : cases) {
      CAPTURE(dtype);
      CAPTURE(o.momentum);
      CAPTURE(o.dampening);
      CAPTURE(o.weight_decay);
      CAPTURE(o.nesterov);
      const Result gpu = run_steps<optim::SGD>(specs, values, dtype, kGpu, o);
      for (size_t i = 0; i < specs.size(); ++i) {
        CAPTURE(i);
        CAPTURE(shape_str(specs[i].shape));
        if (specs[i].first_grad_step >= kSteps) {
          CHECK(same_bits(gpu.params[i], from_vector(values.start[i], specs[i].shape).to(dtype)));
          continue;
        }
        check_against_reference(gpu, i, sgd_reference(values, i, o), dtype);
      }
    }
  }
}

// The kernels evaluate the tensor ops' operations in the same order, each rounded once as
// the CPU rounds it (no fused multiply-add on either side; sqrt and division are correctly
// rounded on both), so the results are the same bits, not merely close. The transposed
// parameter is the exception: it takes the tensor ops on the GPU too, and the CUDA
// elementwise engine may fuse add_'s multiply-add (self + alpha * other) into one rounding.
TEST_CASE("AdamW and SGD on the GPU give the CPU's bits, over 300 tensors" * doctest::skip(!cuda_is_available())) {
  manual_seed(1202);
  const std::vector<ParamSpec> specs = many_specs();
  for (DType dtype : kOptimDTypes) {
    CAPTURE(dtype);
    const Values values = random_run(specs, dtype);
    auto check_same = [&](const Result& gpu, const Result& cpu) {
      for (size_t i = 0; i < specs.size(); ++i) {
        CAPTURE(i);
        CAPTURE(shape_str(specs[i].shape));
        const bool defined = gpu.masters[i].defined();
        CHECK(defined == cpu.masters[i].defined());
        if (specs[i].layout != Layout::Transposed) {
          CHECK(same_bits(gpu.params[i], cpu.params[i]));
          if (defined && cpu.masters[i].defined()) CHECK(same_bits(gpu.masters[i], cpu.masters[i]));
          continue;
        }
        const double tol = dtype == kFloat64 ? 1e-12 : 1e-5;
        if (defined && cpu.masters[i].defined()) CHECK_ALLCLOSE(gpu.masters[i], cpu.masters[i], tol, tol);
        // A master an ulp apart may round to neighbouring bfloat16 values.
        CHECK_ALLCLOSE(gpu.params[i].to(kFloat64), cpu.params[i].to(kFloat64), dtype == kBFloat16 ? 1.0 / 128.0 : tol,
                       tol);
      }
    };
    const optim::AdamWOptions adamw{1e-2, 0.9, 0.999, 1e-8, 0.01};
    check_same(run_steps<optim::AdamW>(specs, values, dtype, kGpu, adamw),
               run_steps<optim::AdamW>(specs, values, dtype, kCPU, adamw));
    for (const optim::SGDOptions& sgd :
         {optim::SGDOptions{0.05, 0.9, 0.2, 0.01, false}, optim::SGDOptions{0.05, 0.8, 0.0, 0.1, true}}) {
      CAPTURE(sgd.nesterov);
      check_same(run_steps<optim::SGD>(specs, values, dtype, kGpu, sgd),
                 run_steps<optim::SGD>(specs, values, dtype, kCPU, sgd));
    }
  }
}

TEST_CASE("clip_grad_norm_ on the GPU: the total norm of 300 gradients in float64; scaled only above max_norm" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(1203);
  for (DType dtype : kOptimDTypes) {
    CAPTURE(dtype);
    // 300 small gradients, a large one, a strided one (copied for the sum, scaled by the
    // tensor op) and one at an odd offset (one element at a time), and a parameter with none.
    std::vector<Shape> shapes;
    for (int64_t k = 0; k < 300; ++k) shapes.push_back({1 + (k * 37) % 211});
    shapes.push_back({100003});
    std::vector<std::vector<double>> grad_values;
    for (const Shape& shape : shapes) grad_values.push_back(random_values(numel_of(shape), dtype));
    const std::vector<double> strided_values = random_values(9 * 5, dtype);
    const std::vector<double> offset_values = random_values(769, dtype);

    double reference_square = 0.0;
    for (const std::vector<double>& g : grad_values)
      for (double x : g) reference_square += x * x;
    for (const std::vector<double>* g : {&strided_values, &offset_values})
      for (double x : *g) reference_square += x * x;
    const double reference_total = std::sqrt(reference_square);

    // The parameters (zeros: only their gradients matter) and their gradients on `device`.
    auto make = [&](Device device, std::vector<Tensor>& params) {
      params.clear();
      const TensorOptions options = TensorOptions(dtype).device(device);
      for (size_t k = 0; k < shapes.size(); ++k) {
        params.push_back(zeros(shapes[k], options).requires_grad_());
        params.back().mutable_grad() = from_vector(grad_values[k], shapes[k]).to(dtype).to(device);
      }
      params.push_back(zeros({5, 9}, options).requires_grad_());
      params.back().mutable_grad() = from_vector(strided_values, {9, 5}).to(dtype).to(device).t();
      params.push_back(zeros({769}, options).requires_grad_());
      const Tensor base = zeros({770}, options);
      Tensor view = base.slice(0, 1, 770);
      view.copy_(from_vector(offset_values, {769}).to(dtype).to(device));
      params.back().mutable_grad() = view;
      params.push_back(zeros({4}, options).requires_grad_());  // no gradient
    };
    auto grads_of = [](const std::vector<Tensor>& params) {
      std::vector<Tensor> grads;
      for (const Tensor& p : params) grads.push_back(p.grad().defined() ? p.grad().to(kCPU).clone() : Tensor());
      return grads;
    };

    std::vector<Tensor> params;
    make(kGpu, params);
    const std::vector<Tensor> before = grads_of(params);
    poison_small_blocks();  // the per-block partial sums start as NaN
    const double under = optim::clip_grad_norm_(params, 2.0 * reference_total);
    CHECK(under == doctest::Approx(reference_total).epsilon(1e-12));
    // The same bits on a second run: the partial sums are added in a fixed order.
    CHECK(optim::clip_grad_norm_(params, 2.0 * reference_total) == under);
    const std::vector<Tensor> unchanged = grads_of(params);
    for (size_t k = 0; k < params.size(); ++k) {
      CAPTURE(k);
      CHECK(unchanged[k].defined() == before[k].defined());
      if (before[k].defined()) CHECK(same_bits(unchanged[k], before[k]));
    }

    const double max_norm = reference_total / 3.0;
    const double over = optim::clip_grad_norm_(params, max_norm);
    CHECK(over == doctest::Approx(reference_total).epsilon(1e-12));
    const double coefficient = max_norm / (reference_total + 1e-6);
    const std::vector<Tensor> clipped = grads_of(params);
    // One rounding of g * coefficient in the compute type, then to the gradient's dtype.
    const double rtol = dtype == kFloat64 ? 1e-12 : dtype == kFloat32 ? 1e-6 : 1.0 / 256.0;
    std::vector<Tensor> cpu_params;
    make(kCPU, cpu_params);
    CHECK(optim::clip_grad_norm_(cpu_params, max_norm) == doctest::Approx(over).epsilon(1e-12));
    const std::vector<Tensor> cpu_clipped = grads_of(cpu_params);
    for (size_t k = 0; k < params.size(); ++k) {
      CAPTURE(k);
      if (!before[k].defined()) {
        CHECK(!clipped[k].defined());
        continue;
      }
      CHECK(!isnan(clipped[k]).any().item<bool>());
      CHECK_ALLCLOSE(clipped[k].to(kFloat64), before[k].to(kFloat64) * coefficient, rtol, 0.0);
      CHECK_ALLCLOSE(clipped[k].to(kFloat64), cpu_clipped[k].to(kFloat64), rtol, 0.0);
    }
  }
}

TEST_CASE("parameter groups on the GPU: each weight decay its own launch, the bits of an optimizer per group" *
          doctest::skip(!cuda_is_available())) {
  manual_seed(1204);
  check_groups_match_separate_optimizers<optim::AdamW>(optim::AdamWOptions{3e-2, 0.8, 0.95, 1e-6, 0.1}, kGpu, 10);
  check_groups_match_separate_optimizers<optim::SGD>(optim::SGDOptions{0.05, 0.9, 0.0, 0.1, true}, kGpu, 10);
}
