// Runs the row kernels (cuda/softmax_dropout.cu, cuda/softmax.cu, cuda/cross_entropy.cu and
// cuda/normalization.cu as rewrite.py turns them into host code) under emu.h, on the CPU, and
// compares their outputs with the CPU ops on the same inputs: softmax_dropout's y, and dx for a
// random dy, on the same generator state; softmax's and log_softmax's; cross_entropy's per-row
// loss and gradient; the normalizations' y, dx, dweight and dbias.
// Built and run by ./run-rows, which see.
//
// The softmax_dropout cases cover each kernel (a warp a row, a block a row of 2 to 8 warps, whole powers of two
// or not, rows staged in shared memory, the two-pass kernel; vectors of 8, 4 and 2 elements and the
// one-element kernel), the masks read in vectors and element by
// element (a view whose rows start at odd offsets), causal rows (square and wide, where most
// of a row's vectors are skipped), the scale folded into the exponent (positive) or not
// (negative), dropout on and off. A kernel that forgets an output element shows: the outputs
// start as NaN.
//
//   rows_driver    every case; exit status 0 when all pass with no emulator error, else 1
#define softmax_dropout_rows emu_softmax_dropout_rows
#define softmax_dropout_backward_rows emu_softmax_dropout_backward_rows
#define softmax_rows emu_softmax_rows
#define softmax_backward_rows emu_softmax_backward_rows
#define cross_entropy_rows emu_cross_entropy_rows
#define cross_entropy_count_targets emu_cross_entropy_count_targets
#define cross_entropy_scale_grad emu_cross_entropy_scale_grad

#include "emu.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

// The runtime calls of the kernels' host code, answered without a GPU.
#include "host_calls.h"

#include "softmax_dropout.inc"
#include "softmax.inc"
#include "cross_entropy.inc"

#undef cudaGetDevice
#undef cudaFuncSetAttribute
#undef cudaDeviceGetAttribute
#undef cudaOccupancyMaxActiveBlocksPerMultiprocessor
#undef cudaGetLastError
#undef DeviceGuard
#undef current_stream
#undef current_device

// After the kernels: the ops' log and exp of tensors would hide the kernels' ::log and ::exp.
#include <minigrad/minigrad.h>
#include <minigrad/kernels/normalization.h>

// The normalization kernels, emulated in a translation unit of their own
// (normalization_kernels.cpp: their anonymous namespace's names would clash with
// softmax_dropout's here).
namespace minigrad {
namespace cuda {
void emu_normalization_forward(const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias,
                               int64_t hidden, normalization::NormKind kind, normalization::Epilogue epilogue,
                               double eps, const Tensor& y, const Tensor& mean, const Tensor& rstd);
void emu_normalization_backward(const char* op, const Tensor& grad, const Tensor& x, const Tensor& weight,
                                const Tensor& bias, const Tensor& mean, const Tensor& rstd, int64_t hidden,
                                normalization::NormKind kind, normalization::Epilogue epilogue,
                                const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias);
}  // namespace cuda
}  // namespace minigrad

using namespace minigrad;

namespace {

constexpr uint64_t kSeed = 0x5eed;

enum class MaskKind { None, Bool, BoolBroadcast, BoolLengths, BoolLeftPadding, BoolOddView, Additive, AdditiveOddView };

struct Case {
  const char* name;
  Shape sizes;
  double p;
  MaskKind mask;
  bool causal;
  std::optional<double> scale;
};

const Case kCases[] = {
    {"warp rows of 64, p 0.1", {2, 3, 64}, 0.1, MaskKind::None, false, std::nullopt},
    {"warp rows of 1000, no dropout", {2, 3, 1000}, 0.0, MaskKind::None, false, std::nullopt},
    {"block rows of 1024, p 0.1", {2, 3, 1024}, 0.1, MaskKind::None, false, std::nullopt},
    {"block rows of 4096, p 0.3, scale 0.125", {1, 2, 4096}, 0.3, MaskKind::None, false, 0.125},
    {"block rows of 1536 (3 warps: a combine over a span of 4)", {2, 2, 1536}, 0.1, MaskKind::None, false, std::nullopt},
    {"block rows of 3072 (6 warps)", {1, 2, 3072}, 0.1, MaskKind::Additive, false, std::nullopt},
    {"rows of 4104 (past 4096, staged or two-pass), p 0.1", {1, 2, 4104}, 0.1, MaskKind::None, false, std::nullopt},
    {"one element a time, rows of 1001", {2, 2, 1001}, 0.1, MaskKind::Bool, true, std::nullopt},
    {"bool mask in vectors", {2, 3, 1024}, 0.1, MaskKind::Bool, false, std::nullopt},
    {"bool padding mask [2, 1, n], in vectors", {2, 3, 1024}, 0.2, MaskKind::BoolBroadcast, false, std::nullopt},
    {"bool mask, a view at odd offsets", {2, 3, 1024}, 0.1, MaskKind::BoolOddView, false, std::nullopt},
    {"padding of lengths n/2 + 3 and 0 (vectors hidden)", {2, 3, 1024}, 0.1, MaskKind::BoolLengths, false, std::nullopt},
    {"padding of lengths n/2 + 3 and 0, warp rows", {2, 5, 256}, 0.1, MaskKind::BoolLengths, false, std::nullopt},
    {"padding of lengths n/2 + 3 and 0, rows of 8200", {2, 2, 8200}, 0.1, MaskKind::BoolLengths, false, std::nullopt},
    {"left padding from columns 5 and n - 3", {2, 3, 1024}, 0.1, MaskKind::BoolLeftPadding, false, std::nullopt},
    {"left padding from columns 5 and n - 3, warp rows", {2, 5, 256}, 0.1, MaskKind::BoolLeftPadding, false, 2.0},
    {"additive mask in vectors, scale 2", {2, 3, 512}, 0.1, MaskKind::Additive, false, 2.0},
    {"additive mask, a view at odd offsets", {2, 3, 512}, 0.1, MaskKind::AdditiveOddView, false, 0.5},
    {"causal square 64 x 64", {2, 64, 64}, 0.1, MaskKind::None, true, std::nullopt},
    {"causal square 128 x 128, negative scale", {1, 128, 128}, 0.1, MaskKind::None, true, -0.5},
    {"causal wide 6 x 2048 (block rows, most vectors skipped)", {1, 6, 2048}, 0.1, MaskKind::None, true, std::nullopt},
    {"causal wide 5 x 8200 (staged or two-pass)", {1, 5, 8200}, 0.1, MaskKind::None, true, std::nullopt},
    {"causal with a bool padding mask", {2, 40, 512}, 0.2, MaskKind::BoolBroadcast, true, std::nullopt},
    {"causal with padding of lengths n/2 + 3 and 0", {2, 40, 512}, 0.2, MaskKind::BoolLengths, true, std::nullopt},
    {"causal with an additive mask", {2, 40, 512}, 0.0, MaskKind::Additive, true, 0.25},
    {"staged rows of 10240, p 0.1", {1, 2, 10240}, 0.1, MaskKind::None, false, std::nullopt},
    {"staged rows of 12000, padding n/2 + 3 and 0", {2, 1, 12000}, 0.1, MaskKind::BoolLengths, false, std::nullopt},
    {"staged rows of 9216, additive mask, scale -0.5", {1, 2, 9216}, 0.2, MaskKind::Additive, false, -0.5},
    {"staged causal wide 3 x 9000", {1, 3, 9000}, 0.1, MaskKind::None, true, std::nullopt},
};

int failures = 0;

// The mask of a case for x of `sizes` and dtype, or none.
std::optional<Tensor> make_mask(MaskKind kind, const Shape& sizes, DType dtype) {
  const int64_t n = sizes.back();
  const Tensor first_column = eq(arange(n, TensorOptions(kFloat64)), 0.0);  // kept: no row fully masked
  switch (kind) {
    case MaskKind::None:
      return std::nullopt;
    case MaskKind::Bool:
      return logical_or(rand(sizes, kFloat64) < 0.7, first_column);
    case MaskKind::BoolBroadcast:
      return logical_or(rand({sizes[0], 1, n}, kFloat64) < 0.8, first_column);
    case MaskKind::BoolLengths: {
      // Batch 0 attends to its first n/2 + 3 columns (a vector in part, the rest hidden whole),
      // batch 1 to none: its rows are fully masked (zeros forward and backward).
      const Tensor lengths = from_vector<double>({static_cast<double>(n / 2 + 3), 0.0}, {2, 1, 1});
      return lt(arange(n, TensorOptions(kFloat64)).view({1, 1, n}), lengths);
    }
    case MaskKind::BoolLeftPadding: {
      // Batch 1 attends to its last 3 columns only: the vector holding them starts with masked
      // bytes (a whole first word of them for bfloat16's 8), and each of the 3 has P near 1/3.
      const Tensor starts = from_vector<double>({5.0, static_cast<double>(n - 3)}, {2, 1, 1});
      return ge(arange(n, TensorOptions(kFloat64)).view({1, 1, n}), starts);
    }
    case MaskKind::BoolOddView: {
      const Tensor wide = rand({sizes[1], n + 1}, kFloat64) < 0.7;
      return logical_or(wide.narrow(1, 1, n), first_column);  // a new tensor: narrowed again below
    }
    case MaskKind::Additive:
      return randn({sizes[1], n}, dtype);
    case MaskKind::AdditiveOddView:
      return randn({sizes[1], n + 1}, dtype).narrow(1, 1, n);
  }
  return std::nullopt;
}

// For the odd views: the same values, in a tensor whose rows start one element into a wider
// one (logical_or above made it contiguous again).
Tensor as_odd_view(const Tensor& mask) {
  const int64_t rows = mask.size(0), n = mask.size(1);
  Tensor wide = zeros({rows, n + 1}, TensorOptions(mask.dtype()));
  wide.narrow(1, 1, n).copy_(mask);
  return wide.narrow(1, 1, n);
}

double max_abs_difference(const Tensor& a, const Tensor& b, long* nonfinite) {
  const std::vector<double> u = a.to_vector<double>(), v = b.to_vector<double>();
  double worst = 0;
  for (size_t i = 0; i < u.size(); ++i) {
    if (!std::isfinite(u[i]) || !std::isfinite(v[i])) {
      ++*nonfinite;
      continue;
    }
    worst = std::max(worst, std::fabs(u[i] - v[i]));
  }
  return worst;
}

void run_case(const Case& c, DType dtype) {
  const long errors_before = emu::errors;
  manual_seed(11);
  const Tensor x = (randn(c.sizes, kFloat64) * 3.0).to(dtype);
  const Tensor dy = randn(c.sizes, kFloat64).to(dtype);
  std::optional<Tensor> mask = make_mask(c.mask, c.sizes, dtype);
  if (c.mask == MaskKind::BoolOddView) mask = as_odd_view(*mask);

  // The CPU op: y, and dx for dy.
  Generator cpu_generator(kSeed);
  Tensor leaf = x.detach().requires_grad_();
  const Tensor y_cpu = softmax_dropout(leaf, -1, c.p, true, mask, c.causal, c.scale, &cpu_generator);
  y_cpu.backward(dy);
  const Tensor dx_cpu = leaf.grad();

  // The kernels, emulated, on the same generator state.
  Generator kernel_generator(kSeed);
  const Generator::Stream stream = kernel_generator.reserve();
  cuda::SoftmaxDropoutRows rows;
  rows.sizes = c.sizes;
  rows.index_strides = contiguous_strides(c.sizes);
  if (mask) {
    rows.mask = *mask;
    rows.mask_strides = broadcast_strides(*mask, c.sizes);
  }
  rows.scale = c.scale.value_or(1.0);  // as the op's default
  rows.is_causal = c.causal;
  rows.drop = c.p > 0;
  rows.dropout = dropout_bits::Mask(stream.seed, stream.offset, dropout_bits::threshold_of(c.p));
  const int64_t lanes = x.numel() / c.sizes.back();
  const DType lse_dtype = dtype == kFloat64 ? kFloat64 : kFloat32;
  const Tensor y = full(c.sizes, std::numeric_limits<double>::quiet_NaN(), TensorOptions(dtype));
  const Tensor lse = full({lanes}, std::numeric_limits<double>::quiet_NaN(), TensorOptions(lse_dtype));
  const Tensor dx = full(c.sizes, std::numeric_limits<double>::quiet_NaN(), TensorOptions(dtype));
  // The staged kernels copy x's rows (and the backward's dy's) by cp.async: all of x and dy may be read.
  emu::before_launch = [&x, &dy](const void*) {
    emu::add_readable(x.raw_data(), x.numel() * x.element_size());
    emu::add_readable(dy.raw_data(), dy.numel() * dy.element_size());
  };
  cuda::emu_softmax_dropout_rows(x, rows, y, lse);
  cuda::emu_softmax_dropout_backward_rows(dy, x, lse, rows, dx);
  emu::before_launch = nullptr;

  long nonfinite = 0;
  const double y_error = max_abs_difference(y, y_cpu, &nonfinite);
  const double dx_error = max_abs_difference(dx, dx_cpu, &nonfinite);
  // float64: the same formulas in another order; float32: the GPU's exp2 of scaled logits
  // against the CPU's (each a few ulps); the half types round y and dx once, after a float
  // computation on each side (|dx| up to about 4 |dy|).
  const double tolerance = dtype == kFloat64 ? 1e-12 : dtype == kFloat32 ? 2e-5 : 2e-2;
  const bool ok = nonfinite == 0 && y_error <= tolerance && dx_error <= 4 * tolerance && emu::errors == errors_before;
  printf("%-4s %-58s %-9s y %.2e  dx %.2e%s\n", ok ? "ok" : "FAIL", c.name, dtype_name(dtype), y_error,
         dx_error, nonfinite ? "  (non-finite elements)" : "");
  if (!ok) ++failures;
}

// softmax / log_softmax (cuda/softmax.cu) over rows of n, forward and backward, against the
// CPU op.
void run_softmax_case(int64_t rows, int64_t n, bool take_log, DType dtype) {
  const long errors_before = emu::errors;
  manual_seed(12);
  const Tensor x = (randn({rows, n}, kFloat64) * 3.0).to(dtype);
  const Tensor dy = randn({rows, n}, kFloat64).to(dtype);
  Tensor leaf = x.detach().requires_grad_();
  const Tensor y_cpu = take_log ? log_softmax(leaf, -1) : softmax(leaf, -1);
  y_cpu.backward(dy);
  const Tensor y = full({rows, n}, std::numeric_limits<double>::quiet_NaN(), TensorOptions(dtype));
  const Tensor dx = full({rows, n}, std::numeric_limits<double>::quiet_NaN(), TensorOptions(dtype));
  cuda::emu_softmax_rows(x, y, take_log);
  cuda::emu_softmax_backward_rows(dy, y, dx, take_log);
  long nonfinite = 0;
  const double y_error = max_abs_difference(y, y_cpu, &nonfinite);
  const double dx_error = max_abs_difference(dx, leaf.grad(), &nonfinite);
  const double tolerance = dtype == kFloat64 ? 1e-12 : dtype == kFloat32 ? 2e-5 : 6e-2;
  const bool ok = nonfinite == 0 && y_error <= tolerance && dx_error <= 4 * tolerance && emu::errors == errors_before;
  const std::string name = fmt::format("{} rows of {}", take_log ? "log_softmax" : "softmax", n);
  printf("%-4s %-58s %-9s y %.2e  dx %.2e%s\n", ok ? "ok" : "FAIL", name.c_str(), dtype_name(dtype), y_error, dx_error,
         nonfinite ? "  (non-finite elements)" : "");
  if (!ok) ++failures;
}

// What cross_entropy_kernel may read by cp.async: its logits (the emulator checks each copy's
// source against it).
template <typename T>
void allow_reading_logits() {
  emu::before_launch = [](const void* params) {
    const auto& a = *static_cast<const cuda::CrossEntropyArgs<T>*>(params);
    emu::add_readable(a.logits, static_cast<size_t>(a.rows * a.classes) * sizeof(T));
  };
}

// cross_entropy's fused kernel (cuda/cross_entropy.cu): each row's loss and its gradient for
// dy = 1 (weight 1: the Sum reduction's), a few targets ignored, against the CPU op.
void run_cross_entropy_case(int64_t rows, int64_t classes, double smoothing, DType dtype) {
  const long errors_before = emu::errors;
  manual_seed(13);
  const Tensor logits = (randn({rows, classes}, kFloat64) * 2.0).to(dtype);
  std::vector<int64_t> target_values(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) target_values[static_cast<size_t>(i)] = i % 5 == 3 ? -100 : (i * 7919) % classes;
  const Tensor targets = from_vector<int64_t>(target_values, {rows});
  Tensor leaf = logits.detach().requires_grad_();
  const Tensor loss_cpu = cross_entropy(leaf, targets, -100, smoothing, Reduction::None);
  cross_entropy(leaf, targets, -100, smoothing, Reduction::Sum).backward();
  const Tensor loss = full({rows}, std::numeric_limits<double>::quiet_NaN(),
                           TensorOptions(dtype == kFloat64 ? kFloat64 : kFloat32));
  const Tensor grad = full({rows, classes}, std::numeric_limits<double>::quiet_NaN(), TensorOptions(dtype));
  cuda::CrossEntropyRows options;
  options.label_smoothing = smoothing;
  if (dtype == kFloat32) allow_reading_logits<float>();
  if (dtype == kBFloat16) allow_reading_logits<BFloat16>();
  if (dtype == kFloat64) allow_reading_logits<double>();
  cuda::emu_cross_entropy_rows(logits, targets, options, loss, grad);
  emu::before_launch = nullptr;
  long nonfinite = 0;
  const double loss_error = max_abs_difference(loss, loss_cpu, &nonfinite);
  const double grad_error = max_abs_difference(grad, leaf.grad(), &nonfinite);
  const double tolerance = dtype == kFloat64 ? 1e-12 : dtype == kFloat32 ? 2e-5 : 1e-2;
  const bool ok =
      nonfinite == 0 && loss_error <= 10 * tolerance && grad_error <= tolerance && emu::errors == errors_before;
  const std::string name = fmt::format("cross_entropy {} x {}, smoothing {}", rows, classes, smoothing);
  printf("%-4s %-58s %-9s y %.2e  dx %.2e%s\n", ok ? "ok" : "FAIL", name.c_str(), dtype_name(dtype), loss_error,
         grad_error, nonfinite ? "  (non-finite elements)" : "");
  if (!ok) ++failures;
}

// The normalizations (cuda/normalization.cu): y, dx, dweight and dbias against the CPU op on
// the same inputs (rows x n, weight and bias or none), for every kernel: a warp a row, a block a
// row, the backward's blocks looping over rows (emu.h's 2 SMs of one block each), the forward's
// long rows staged in shared memory or read three times, the one-element kernels.
enum class NormCase { LayerNorm, LayerNormGelu, LayerNormGeluTanh, RMSNorm };

void run_normalization_case(NormCase which, int64_t rows, int64_t n, bool affine, DType dtype) {
  const long errors_before = emu::errors;
  manual_seed(14);
  const Tensor x = (randn({rows, n}, kFloat64) * 2.0 + 1.0).to(dtype);
  const Tensor dy = randn({rows, n}, kFloat64).to(dtype);
  const Tensor w = (randn({n}, kFloat64) * 0.5 + 1.0).to(dtype), b = (randn({n}, kFloat64) * 0.5).to(dtype);
  const bool layer = which != NormCase::RMSNorm;
  const double eps = 1e-5;
  Tensor leaf = x.detach().requires_grad_();
  Tensor w_leaf = w.detach().requires_grad_(), b_leaf = b.detach().requires_grad_();
  const std::optional<Tensor> weight = affine ? std::optional<Tensor>(w_leaf) : std::nullopt;
  const std::optional<Tensor> bias = affine && layer ? std::optional<Tensor>(b_leaf) : std::nullopt;
  normalization::Epilogue epilogue = normalization::Epilogue::Identity;
  Tensor y_cpu;
  switch (which) {
    case NormCase::LayerNorm:
      y_cpu = layer_norm(leaf, {n}, weight, bias, eps);
      break;
    case NormCase::LayerNormGelu:
      y_cpu = layer_norm_gelu(leaf, {n}, weight, bias, eps);
      epilogue = normalization::Epilogue::GeluExact;
      break;
    case NormCase::LayerNormGeluTanh:
      y_cpu = layer_norm_gelu(leaf, {n}, weight, bias, eps, GeluApproximation::Tanh);
      epilogue = normalization::Epilogue::GeluTanh;
      break;
    case NormCase::RMSNorm:
      y_cpu = rms_norm(leaf, {n}, weight, eps);
      break;
  }
  y_cpu.backward(dy);
  const TensorOptions stats(dtype == kFloat64 ? kFloat64 : kFloat32);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor y = full({rows, n}, nan, TensorOptions(dtype));
  const Tensor mean = layer ? full({rows}, nan, stats) : Tensor();
  const Tensor rstd = full({rows}, nan, stats);
  const Tensor dx = full({rows, n}, nan, TensorOptions(dtype));
  const Tensor dw = affine ? full({n}, nan, TensorOptions(dtype)) : Tensor();
  const Tensor db = affine && layer ? full({n}, nan, TensorOptions(dtype)) : Tensor();
  const Tensor w_arg = affine ? w : Tensor(), b_arg = affine && layer ? b : Tensor();
  const normalization::NormKind kind = layer ? normalization::NormKind::Layer : normalization::NormKind::RMS;
  // The staged forward copies x's rows by cp.async: all of x may be read.
  emu::before_launch = [&x](const void*) { emu::add_readable(x.raw_data(), x.numel() * x.element_size()); };
  cuda::emu_normalization_forward("emulated", x, w_arg, b_arg, n, kind, epilogue, eps, y, mean, rstd);
  emu::before_launch = nullptr;
  cuda::emu_normalization_backward("emulated", dy, x, w_arg, b_arg, mean, rstd, n, kind, epilogue, dx, dw, db);
  long nonfinite = 0;
  const double y_error = max_abs_difference(y, y_cpu, &nonfinite);
  const double dx_error = max_abs_difference(dx, leaf.grad(), &nonfinite);
  double affine_error = 0;
  if (affine) affine_error = max_abs_difference(dw, w_leaf.grad(), &nonfinite);
  if (affine && layer) affine_error = std::max(affine_error, max_abs_difference(db, b_leaf.grad(), &nonfinite));
  // float64: the same formulas in another order; float32: sums of n terms in another order;
  // bfloat16 rounds y and dx once (|y| and |dx| up to about 10) and dweight and dbias, sums over
  // the rows of terms up to about 10.
  const double tolerance = dtype == kFloat64 ? 1e-10 : dtype == kFloat32 ? 2e-4 : 1e-1;
  const bool ok = nonfinite == 0 && y_error <= tolerance && dx_error <= tolerance &&
                  affine_error <= tolerance * static_cast<double>(rows) && emu::errors == errors_before;
  static const char* const kNames[] = {"layer_norm", "layer_norm_gelu", "layer_norm_gelu tanh", "rms_norm"};
  const std::string name = fmt::format("{} {} x {}{}", kNames[static_cast<int>(which)], rows, n,
                                       affine ? "" : ", no weight or bias");
  printf("%-4s %-58s %-9s y %.2e  dx %.2e  dw/db %.2e%s\n", ok ? "ok" : "FAIL", name.c_str(), dtype_name(dtype), y_error,
         dx_error, affine_error, nonfinite ? "  (non-finite elements)" : "");
  if (!ok) ++failures;
}

}  // namespace

int main() {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  const auto start = std::chrono::steady_clock::now();
  int runs = 0;
  for (const Case& c : kCases)
    for (DType dtype : {kFloat32, kBFloat16, kFloat64}) {
      run_case(c, dtype);
      ++runs;
    }
  // softmax: warp rows, block rows (2 and 3 warps), the two-pass kernel, odd lengths.
  for (int64_t n : {1, 7, 256, 1000, 1024, 1536, 8200})
    for (bool take_log : {false, true})
      for (DType dtype : {kFloat32, kBFloat16, kFloat64}) {
        run_softmax_case(3, n, take_log, dtype);
        ++runs;
      }
  // cross_entropy: a warp a row (short rows), a block a row (staged in shared memory up to 20000
  // classes, read into registers at 45000, past the emulator's shared memory), lengths not a
  // multiple of a vector.
  for (int64_t classes : {1, 10, 100, 1000, 5003, 20000, 45000})
    for (DType dtype : {kFloat32, kBFloat16, kFloat64}) {
      run_cross_entropy_case(7, classes, classes % 2 ? 0.1 : 0.0, dtype);
      ++runs;
    }
  // The normalizations: a warp a row (256), a block a row (2048; 1000: vectors of 8 in a block of
  // 4 warps), 7 rows looping over emu.h's 2 blocks in the backward, the long rows (10240, 3 of
  // them: a backward block does two) staged in the forward (all but float64, whose rows of 80 KiB
  // do not fit twice in emu.h's 163 KiB) or read three times (float64), and rows of odd length
  // (one element a time).
  for (int64_t n : {256, 1000, 2048, 10240, 1001})
    for (NormCase which : {NormCase::LayerNorm, NormCase::LayerNormGelu, NormCase::LayerNormGeluTanh, NormCase::RMSNorm})
      for (DType dtype : {kFloat32, kBFloat16, kFloat64}) {
        run_normalization_case(which, n > 8192 ? 3 : 7, n, which != NormCase::LayerNormGeluTanh, dtype);
        ++runs;
      }
  printf("%d runs: %d failures, %ld emulator errors (%.1f s)\n", runs, failures, emu::errors,
         std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return failures || emu::errors ? 1 : 0;
}
