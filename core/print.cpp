// Printing, in PyTorch's style: tensor([[ 1.0000, -2.0000]], dtype=float64, requires_grad=true)
#include <minigrad/core/print.h>

#include <cmath>

#include <minigrad/core/shape.h>

namespace minigrad {
namespace {

constexpr int64_t kSummarizeAbove = 1000;  // elements; then each dim shows its ends only
constexpr int64_t kEdgeItems = 3;

// An int64 tensor's values are read as int64 (`ints`), all others as double (`values`): a
// double holds integers exactly only up to 2^53, so 2^62 + 1 would print as 2^62.
struct Printer {
  const std::vector<double>& values;
  const std::vector<int64_t>& ints;
  const Shape& sizes;
  const Shape strides;  // contiguous strides of `values` (or `ints`)
  DType dtype;
  bool summarize;
  bool scientific = false;
  std::string out;

  std::string element(size_t i) const {
    if (dtype == kInt64) return fmt::format("{}", ints[i]);
    return value(values[i]);
  }

  std::string value(double v) const {
    if (dtype == kBool) return v != 0.0 ? "true" : "false";
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    return scientific ? fmt::format("{:.4e}", v) : fmt::format("{:.4f}", v);
  }

  void print(size_t dim, int64_t offset, int indent) {
    if (dim == sizes.size()) {
      out += element(static_cast<size_t>(offset));
      return;
    }
    out += '[';
    const int64_t n = sizes[dim];
    const bool cut = summarize && n > 2 * kEdgeItems;
    for (int64_t i = 0; i < n; ++i) {
      if (cut && i == kEdgeItems) {
        out += dim + 1 == sizes.size() ? "..., " : fmt::format("...,\n{:{}}", "", indent + 1);
        i = n - kEdgeItems;
      }
      print(dim + 1, offset + i * strides[dim], indent + 1);
      if (i + 1 < n) out += dim + 1 == sizes.size() ? ", " : fmt::format(",\n{:{}}", "", indent + 1);
    }
    out += ']';
  }
};

}  // namespace

std::string to_string(const Tensor& t) {
  if (!t.defined()) return "tensor(undefined)";
  const bool is_int64 = t.dtype() == kInt64;
  const std::vector<double> values = is_int64 ? std::vector<double>() : t.to_vector<double>();
  const std::vector<int64_t> ints = is_int64 ? t.to_vector<int64_t>() : std::vector<int64_t>();
  Printer p{values, ints, t.sizes(), contiguous_strides(t.sizes()), t.dtype(), t.numel() > kSummarizeAbove, false, {}};
  double largest = 0.0, smallest = INFINITY;
  for (double v : values) {
    if (!std::isfinite(v) || v == 0.0) continue;
    largest = std::max(largest, std::fabs(v));
    smallest = std::min(smallest, std::fabs(v));
  }
  p.scientific = is_floating(t.dtype()) && (largest >= 1e5 || smallest < 1e-4);
  p.print(0, 0, static_cast<int>(sizeof("tensor(") - 1));
  std::string s = "tensor(" + p.out;
  if (t.numel() == 0) s += fmt::format(", size={}", shape_str(t.sizes()));
  if (t.dtype() != kFloat32 && t.dtype() != kInt64) s += fmt::format(", dtype={}", t.dtype());
  if (!t.device().is_cpu()) s += fmt::format(", device='{}'", t.device());
  if (t.requires_grad()) s += ", requires_grad=true";
  return s + ")";
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << to_string(t); }

}  // namespace minigrad
