// Creation functions. Constant fills run on the target device where it has a fill kernel
// (the CUDA backend's); everything else is made on the CPU and copied to the device.
//
// Every error names the function the user called ("zeros: negative size ..."), not the
// helper that found the problem, so each public function passes its own name down.
#include <cmath>
#include <functional>
#include <utility>

#include <minigrad/core/shape.h>
#include <minigrad/core/tensor.h>

namespace minigrad {
namespace {

// A new contiguous tensor, uninitialized. The element and byte counts are checked: a
// product that overflowed would allocate a wrapped (small, or zero: null) buffer and the
// fill would then write far past it.
Tensor empty_for(const char* op, const Shape& sizes, DType dtype, Device device) {
  const int64_t numel = checked_numel(sizes, op);
  const size_t nbytes = checked_nbytes(numel, element_size(dtype), op);
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(nbytes, device);
  impl->sizes = sizes;
  impl->strides = contiguous_strides(sizes);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor finish(Tensor host, const TensorOptions& options) {
  Tensor out = options.device_.is_cpu() ? std::move(host) : copy_as(host, host.dtype(), options.device_);
  if (options.requires_grad_) out.requires_grad_(true);
  return out;
}

// A fill value for an int64 tensor must be a whole number in int64's range, as for
// Tensor::fill_.
void check_scalar_fits(const char* op, const char* arg, double value, DType dtype) {
  MG_CHECK(dtype != kInt64 || fits_int64(value), "{}: argument '{}' is {}, which an int64 tensor cannot hold", op,
           arg, value);
}

// Fills a contiguous CPU tensor: element i gets value_at(i) (a double) converted to its dtype.
template <typename F>
void fill_cpu(const Tensor& t, F value_at) {
  dispatch_all(t.dtype(), [&](auto tag) {
    using scalar_t = decltype(tag);
    scalar_t* p = static_cast<scalar_t*>(t.raw_data());
    const int64_t n = t.numel();
    for (int64_t i = 0; i < n; ++i) {
      if constexpr (std::is_same_v<scalar_t, Half> || std::is_same_v<scalar_t, BFloat16>)
        p[i] = scalar_t(static_cast<float>(value_at(i)));
      else if constexpr (std::is_same_v<scalar_t, int64_t>)
        p[i] = float_to_int64(value_at(i));
      else
        p[i] = static_cast<scalar_t>(value_at(i));
    }
  });
}

// `arg` names the fill value as the op's signature does.
Tensor full_for(const char* op, const Shape& sizes, double value, const TensorOptions& options,
                const char* arg = "fill_value") {
  check_scalar_fits(op, arg, value, options.dtype_);
  if (const DeviceFillFn fill_on_device = device_kernels(options.device_.type).fill) {
    Tensor out = empty_for(op, sizes, options.dtype_, options.device_);
    fill_on_device(out, value);
    if (options.requires_grad_) out.requires_grad_(true);
    return out;
  }
  Tensor host = empty_for(op, sizes, options.dtype_, kCPU);
  fill_cpu(host, [value](int64_t) { return value; });
  return finish(std::move(host), options);
}

// The dtype and device of `t`, for the *_like functions; `op` names the caller.
TensorOptions like(const char* op, const Tensor& t) {
  MG_CHECK(t.defined(), "{}: argument 'self' is an undefined tensor", op);
  return t.options();
}

}  // namespace

Tensor empty(const Shape& sizes, TensorOptions options) {
  Tensor t = empty_for("empty", sizes, options.dtype_, options.device_);
  if (options.requires_grad_) t.requires_grad_(true);
  return t;
}

Tensor full(const Shape& sizes, double value, TensorOptions options) {
  return full_for("full", sizes, value, options);
}
Tensor zeros(const Shape& sizes, TensorOptions options) { return full_for("zeros", sizes, 0.0, options); }
Tensor ones(const Shape& sizes, TensorOptions options) { return full_for("ones", sizes, 1.0, options); }

// Each *_like checks `t` (like) before reading its sizes.
Tensor empty_like(const Tensor& t) {
  const TensorOptions o = like("empty_like", t);
  return empty_for("empty_like", t.sizes(), o.dtype_, o.device_);
}
Tensor zeros_like(const Tensor& t) {
  const TensorOptions o = like("zeros_like", t);
  return full_for("zeros_like", t.sizes(), 0.0, o);
}
Tensor ones_like(const Tensor& t) {
  const TensorOptions o = like("ones_like", t);
  return full_for("ones_like", t.sizes(), 1.0, o);
}
Tensor full_like(const Tensor& t, double value) {
  const TensorOptions o = like("full_like", t);
  return full_for("full_like", t.sizes(), value, o);
}
Tensor scalar_tensor(double value, TensorOptions options) {
  return full_for("scalar_tensor", {}, value, options, "s");
}

// The length is ceil((end - start) / step), computed in double as PyTorch does. Every
// argument must be finite (arange(0, inf) has no length), and the length must fit.
Tensor arange(double start, double end, double step, TensorOptions options) {
  const DType dtype = options.dtype_or(kInt64);
  MG_CHECK(std::isfinite(start) && std::isfinite(end), "arange: unsupported range [{}, {}): start and end must be finite",
           start, end);
  MG_CHECK(std::isfinite(step), "arange: step must be finite, got {}", step);
  MG_CHECK(step != 0.0, "arange: step must be nonzero");
  MG_CHECK((end - start) / step >= 0.0 || start == end,
           "arange: the range [{}, {}) is empty in the direction of step {}", start, end, step);
  const double length = std::ceil((end - start) / step);
  // 2^63 is exact in double; a length at or above it has no int64 element count (and
  // end - start itself may have overflowed to infinity for finite start and end).
  MG_CHECK(length < 9223372036854775808.0,
           "arange: the range [{}, {}) in steps of {} has too many elements ({} overflows int64)", start, end, step,
           length);
  Tensor host = empty_for("arange", {static_cast<int64_t>(length)}, dtype, kCPU);
  fill_cpu(host, [&](int64_t i) { return start + static_cast<double>(i) * step; });
  return finish(std::move(host), options);
}

Tensor arange(int64_t end, TensorOptions options) { return arange(0.0, static_cast<double>(end), 1.0, options); }

// rand and randn are in ops/random.cpp: they draw on the tensor's device.

// The values are stored as T first, then converted when the options name another dtype:
// the conversion is then the one Tensor::to does.
template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& sizes, TensorOptions options) {
  const int64_t numel = checked_numel(sizes, "from_vector");
  MG_CHECK(static_cast<int64_t>(values.size()) == numel, "from_vector: {} values do not fill shape {} ({} elements)",
           values.size(), shape_str(sizes), numel);
  Tensor host = empty_for("from_vector", sizes, dtype_of<T>::value, kCPU);
  T* p = static_cast<T*>(host.raw_data());
  for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  const DType dtype = options.dtype_or(dtype_of<T>::value);
  if (dtype != host.dtype()) host = copy_as(host, dtype, kCPU);
  return finish(std::move(host), options);
}

template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& sizes) {
  return from_vector(values, sizes, TensorOptions());
}

#define MG_INSTANTIATE_FROM_VECTOR(T)                                                    \
  template Tensor from_vector<T>(const std::vector<T>&, const Shape&, TensorOptions); \
  template Tensor from_vector<T>(const std::vector<T>&, const Shape&);
MG_INSTANTIATE_FROM_VECTOR(float)
MG_INSTANTIATE_FROM_VECTOR(double)
MG_INSTANTIATE_FROM_VECTOR(int64_t)
MG_INSTANTIATE_FROM_VECTOR(bool)
MG_INSTANTIATE_FROM_VECTOR(Half)
MG_INSTANTIATE_FROM_VECTOR(BFloat16)
#undef MG_INSTANTIATE_FROM_VECTOR

Tensor tensor(std::initializer_list<float> values, TensorOptions options) {
  return from_vector(std::vector<float>(values), {static_cast<int64_t>(values.size())}, options);
}

// A list of double literals is float32 unless the options say otherwise, as a Python list
// of floats is in PyTorch (the default dtype): tensor({1.0, 2.0}) is not float64.
Tensor tensor(std::initializer_list<double> values, TensorOptions options) {
  return from_vector(std::vector<double>(values), {static_cast<int64_t>(values.size())},
                     options.dtype(options.dtype_or(kFloat32)));
}

// ---- more creation ----

// Element i is start + i * step for the first half and end - (steps - 1 - i) * step for the
// second, as PyTorch computes it: both ends come out exact, and the rounding error of i *
// step never grows past the middle.
Tensor linspace(double start, double end, int64_t steps, TensorOptions options) {
  MG_CHECK(steps >= 0, "linspace: number of steps must be non-negative, got {}", steps);
  MG_CHECK(std::isfinite(start) && std::isfinite(end), "linspace: start and end must be finite, got {} and {}", start,
           end);
  const DType dtype = options.dtype_or(kFloat32);
  Tensor host = empty_for("linspace", {steps}, dtype, kCPU);
  const double step = steps > 1 ? (end - start) / static_cast<double>(steps - 1) : 0.0;
  const int64_t half = steps / 2;
  fill_cpu(host, [&](int64_t i) {
    if (steps == 1) return start;  // one value: start, as in PyTorch
    return i < half ? start + step * static_cast<double>(i) : end - step * static_cast<double>(steps - 1 - i);
  });
  return finish(std::move(host), options.dtype(dtype));
}

Tensor eye(int64_t n, TensorOptions options) { return eye(n, n, options); }

Tensor eye(int64_t n, int64_t m, TensorOptions options) {
  MG_CHECK(n >= 0, "eye: n must be non-negative, got {}", n);
  MG_CHECK(m >= 0, "eye: m must be non-negative, got {}", m);
  Tensor host = empty_for("eye", {n, m}, options.dtype_, kCPU);
  fill_cpu(host, [m](int64_t i) { return i / m == i % m ? 1.0 : 0.0; });  // m > 0 whenever there is an element
  return finish(std::move(host), options);
}

// The tensor owns a Storage over the caller's memory, sized to the furthest element the
// strides reach; the Storage calls the deleter when the last tensor over it dies. The
// checks come first: a call that fails has made no Storage and never calls the deleter,
// and the memory is still the caller's.
Tensor from_blob(void* data, const Shape& sizes, const Shape& strides, std::function<void(void*)> deleter,
                 TensorOptions options) {
  const int64_t numel = checked_numel(sizes, "from_blob");
  MG_CHECK(strides.size() == sizes.size(), "from_blob: {} strides {} for {} sizes {}", strides.size(),
           shape_str(strides), sizes.size(), shape_str(sizes));
  MG_CHECK(options.device_.is_cpu() || has_allocator(options.device_.type),
           "from_blob: a tensor on {} needs the CUDA backend, and this build or machine has none", options.device_);
  MG_CHECK(data != nullptr || numel == 0, "from_blob: argument 'data' is a null pointer for {} elements", numel);
  int64_t extent = numel == 0 ? 0 : 1;  // elements from the first to the furthest one, inclusive
  for (size_t d = 0; d < sizes.size(); ++d) {
    MG_CHECK(strides[d] >= 0, "from_blob: negative stride {} at dimension {} (strides {})", strides[d], d,
             shape_str(strides));
    int64_t reach = 0;
    MG_CHECK(numel == 0 || (!__builtin_mul_overflow(sizes[d] - 1, strides[d], &reach) &&
                            !__builtin_add_overflow(extent, reach, &extent)),
             "from_blob: sizes {} with strides {} reach past what int64 counts", shape_str(sizes), shape_str(strides));
  }
  const size_t nbytes = checked_nbytes(extent, element_size(options.dtype_), "from_blob");
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(data, nbytes, options.device_, std::move(deleter));
  impl->sizes = sizes;
  impl->strides = strides;
  impl->dtype = options.dtype_;
  Tensor out(std::move(impl));
  if (options.requires_grad_) out.requires_grad_(true);
  return out;
}

Tensor from_blob(void* data, const Shape& sizes, TensorOptions options) {
  return from_blob(data, sizes, contiguous_strides(sizes), nullptr, options);
}
Tensor from_blob(void* data, const Shape& sizes, const Shape& strides, TensorOptions options) {
  return from_blob(data, sizes, strides, nullptr, options);
}
Tensor from_blob(void* data, const Shape& sizes, std::function<void(void*)> deleter, TensorOptions options) {
  return from_blob(data, sizes, contiguous_strides(sizes), std::move(deleter), options);
}

}  // namespace minigrad
