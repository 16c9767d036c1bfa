// Creation functions. Constant fills run on the target device where it has a fill kernel
// (the CUDA backend's); everything else is made on the CPU and copied to the device.
#include <cmath>

#include "core/generator.h"
#include "core/philox.h"
#include "core/shape.h"
#include "core/tensor.h"

namespace minigrad {
namespace {

void check_sizes(const Shape& sizes, const char* op) {
  for (int64_t s : sizes) MG_CHECK(s >= 0, "{}: negative size in {}", op, shape_str(sizes));
}

Tensor finish(Tensor host, const TensorOptions& options) {
  Tensor out = options.device_.is_cpu() ? std::move(host) : copy_as(host, host.dtype(), options.device_);
  if (options.requires_grad_) out.requires_grad_(true);
  return out;
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
      else
        p[i] = static_cast<scalar_t>(value_at(i));
    }
  });
}

}  // namespace

Tensor empty(const Shape& sizes, TensorOptions options) {
  check_sizes(sizes, "empty");
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(static_cast<size_t>(shape_numel(sizes)) * element_size(options.dtype_),
                                            options.device_);
  impl->sizes = sizes;
  impl->strides = contiguous_strides(sizes);
  impl->dtype = options.dtype_;
  Tensor t(std::move(impl));
  if (options.requires_grad_) t.requires_grad_(true);
  return t;
}

Tensor full(const Shape& sizes, double value, TensorOptions options) {
  if (const DeviceFillFn fill_on_device = device_kernels(options.device_.type).fill) {
    Tensor out = empty(sizes, options);
    fill_on_device(out, value);
    return out;
  }
  Tensor host = empty(sizes, TensorOptions(options.dtype_));
  fill_cpu(host, [value](int64_t) { return value; });
  return finish(std::move(host), options);
}

Tensor zeros(const Shape& sizes, TensorOptions options) { return full(sizes, 0.0, options); }
Tensor ones(const Shape& sizes, TensorOptions options) { return full(sizes, 1.0, options); }

static TensorOptions like(const Tensor& t) { return TensorOptions(t.dtype()).device(t.device()); }
Tensor empty_like(const Tensor& t) { return empty(t.sizes(), like(t)); }
Tensor zeros_like(const Tensor& t) { return zeros(t.sizes(), like(t)); }
Tensor ones_like(const Tensor& t) { return ones(t.sizes(), like(t)); }
Tensor full_like(const Tensor& t, double value) { return full(t.sizes(), value, like(t)); }
Tensor scalar_tensor(double value, TensorOptions options) { return full({}, value, options); }

Tensor arange(double start, double end, double step, TensorOptions options) {
  MG_CHECK(step != 0.0, "arange: step must be nonzero");
  MG_CHECK((end - start) / step >= 0.0 || start == end,
           "arange: the range [{}, {}) is empty in the direction of step {}", start, end, step);
  const int64_t n = static_cast<int64_t>(std::ceil((end - start) / step));
  Tensor host = empty({std::max<int64_t>(n, 0)}, TensorOptions(options.dtype_));
  fill_cpu(host, [&](int64_t i) { return start + static_cast<double>(i) * step; });
  return finish(std::move(host), options);
}

Tensor arange(int64_t end, TensorOptions options) { return arange(0.0, static_cast<double>(end), 1.0, options); }

// Uniform [0, 1): element i takes word i % 4 of Philox block i / 4 (two words per double).
Tensor rand(const Shape& sizes, TensorOptions options) {
  MG_CHECK(is_floating(options.dtype_), "rand: needs a floating-point dtype, got {}", options.dtype_);
  Generator& gen = default_generator();
  const uint64_t seed = gen.seed(), offset = gen.next_offset();
  Tensor host = empty(sizes, TensorOptions(options.dtype_));
  if (options.dtype_ == kFloat64) {
    fill_cpu(host, [&](int64_t i) {
      const auto block = philox::random_block(seed, offset, static_cast<uint64_t>(i) / 2);
      const int lane = static_cast<int>(i % 2) * 2;
      return philox::uniform_double(philox::word(block, lane), philox::word(block, lane + 1));
    });
  } else {
    fill_cpu(host, [&](int64_t i) {
      const auto block = philox::random_block(seed, offset, static_cast<uint64_t>(i) / 4);
      return static_cast<double>(philox::uniform_float(philox::word(block, static_cast<int>(i % 4))));
    });
  }
  return finish(std::move(host), options);
}

// Standard normal by Box-Muller: each pair of uniforms (u1, u2) gives two normals.
Tensor randn(const Shape& sizes, TensorOptions options) {
  MG_CHECK(is_floating(options.dtype_), "randn: needs a floating-point dtype, got {}", options.dtype_);
  Generator& gen = default_generator();
  const uint64_t seed = gen.seed(), offset = gen.next_offset();
  Tensor host = empty(sizes, TensorOptions(options.dtype_));
  constexpr double kTwoPi = 6.283185307179586;
  // Element i belongs to pair i / 2; the pair's two uniforms come from Philox block
  // (i / 2) / 2 (float: two words each) or i / 2 (double: four words, two per uniform).
  fill_cpu(host, [&](int64_t i) {
    const uint64_t pair = static_cast<uint64_t>(i) / 2;
    double u1, u2;
    if (options.dtype_ == kFloat64) {
      const auto b = philox::random_block(seed, offset, pair);
      u1 = philox::uniform_double(b.x, b.y);
      u2 = philox::uniform_double(b.z, b.w);
    } else {
      const auto b = philox::random_block(seed, offset, pair / 2);
      const int lane = static_cast<int>(pair % 2) * 2;
      u1 = philox::uniform_float(philox::word(b, lane));
      u2 = philox::uniform_float(philox::word(b, lane + 1));
    }
    const double radius = std::sqrt(-2.0 * std::log(1.0 - u1));  // 1 - u1 is in (0, 1]: log is finite
    return (i % 2 == 0) ? radius * std::cos(kTwoPi * u2) : radius * std::sin(kTwoPi * u2);
  });
  return finish(std::move(host), options);
}

template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& sizes, TensorOptions options) {
  check_sizes(sizes, "from_vector");
  MG_CHECK(static_cast<int64_t>(values.size()) == shape_numel(sizes),
           "from_vector: {} values do not fill shape {} ({} elements)", values.size(), shape_str(sizes),
           shape_numel(sizes));
  Tensor host = empty(sizes, TensorOptions(dtype_of<T>::value));
  T* p = static_cast<T*>(host.raw_data());
  for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  if (options.dtype_ != host.dtype()) host = copy_as(host, options.dtype_, kCPU);
  return finish(std::move(host), options);
}

template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& sizes) {
  return from_vector(values, sizes, TensorOptions(dtype_of<T>::value));
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

Tensor tensor(std::initializer_list<double> values, TensorOptions options) {
  return from_vector(std::vector<double>(values), {static_cast<int64_t>(values.size())}, options);
}

}  // namespace minigrad
