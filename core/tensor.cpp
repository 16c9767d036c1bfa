// Tensor metadata, raw aliases and copies: everything about a Tensor that is not an op.
#include <minigrad/core/tensor.h>

#include <minigrad/core/shape.h>
#include <minigrad/core/strided_loop.h>

namespace minigrad {

namespace detail {
// Cold: reached only by a bug in the caller, so it is kept out of the inline accessors.
#if defined(__GNUC__) || defined(__clang__)
__attribute__((cold))
#endif
void throw_undefined_tensor(const char* accessor) {
  throw_error(fmt::format("{} called on an undefined tensor (a Tensor() that holds no data, e.g. x.grad() before a "
                          "backward has reached x); check defined() first",
                          accessor));
}
}  // namespace detail

namespace {
// size(d) and stride(d) index an existing dim: unlike the reductions (where dim 0 of a
// 0-d tensor means the tensor itself, as in PyTorch), a 0-d tensor has no dim to index.
size_t existing_dim(const Tensor& t, int64_t dim, const char* op) {
  MG_CHECK(t.dim() > 0, "{}: dimension {} is out of range for a 0-d tensor 'self' (it has no dimensions)", op, dim);
  return static_cast<size_t>(wrap_dim(dim, t.dim(), op));
}
}  // namespace

int64_t Tensor::size(int64_t dim) const { return sizes()[existing_dim(*this, dim, "size")]; }

int64_t Tensor::stride(int64_t dim) const { return strides()[existing_dim(*this, dim, "stride")]; }

// Row-major with no gaps. Dims of size 1 may have any stride (they are never stepped over).
bool Tensor::is_contiguous() const {
  if (MG_UNLIKELY(!impl_)) detail::throw_undefined_tensor("is_contiguous()");
  int64_t expected = 1;
  for (size_t i = impl_->sizes.size(); i-- > 0;) {
    const int64_t s = impl_->sizes[i];
    if (s == 0) return true;
    if (s != 1 && impl_->strides[i] != expected) return false;
    expected *= s;
  }
  return true;
}

Tensor as_strided(const Tensor& t, const Shape& sizes, const Shape& strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = t.storage();
  impl->sizes = sizes;
  impl->strides = strides;
  impl->offset = offset;
  impl->dtype = t.dtype();
  return Tensor(std::move(impl));
}

namespace {

// Value conversion between any two element types. The half types go through float; a
// floating value becomes an int64 by truncation toward zero, NaN giving 0 and values out
// of range saturating, as on the GPU (cuda/convert.cuh).
template <typename To, typename From>
inline To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, bool>) {
    if constexpr (std::is_same_v<From, Half> || std::is_same_v<From, BFloat16>)
      return static_cast<float>(v) != 0.0f;
    else
      return v != From(0);
  } else if constexpr (std::is_same_v<To, Half> || std::is_same_v<To, BFloat16>) {
    return To(static_cast<float>(v));
  } else if constexpr (std::is_same_v<From, Half> || std::is_same_v<From, BFloat16>) {
    return convert<To>(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, int64_t> && std::is_floating_point_v<From>) {
    return float_to_int64(v);  // NaN, infinities and out-of-range values: defined (core/dtype.h)
  } else {
    return static_cast<To>(v);
  }
}

// dst[i] = convert(src[i]) over dst's shape, src broadcast to it, any strides.
void cpu_copy_convert(const Tensor& dst, const Tensor& src) {
  const Shape src_strides = broadcast_strides(src, dst.sizes());
  dispatch_all(dst.dtype(), [&](auto dst_tag) {
    using dst_t = decltype(dst_tag);
    dispatch_all(src.dtype(), [&](auto src_tag) {
      using src_t = decltype(src_tag);
      dst_t* pd = static_cast<dst_t*>(dst.raw_data());
      const src_t* ps = static_cast<const src_t*>(src.raw_data());
      if (src.sizes() == dst.sizes() && src.is_contiguous() && dst.is_contiguous()) {
        const int64_t n = dst.numel();
        for (int64_t i = 0; i < n; ++i) pd[i] = convert<dst_t>(ps[i]);
        return;
      }
      for_each_offset<2>(dst.sizes(), {dst.strides().data(), src_strides.data()},
                         [&](const std::array<int64_t, 2>& o) { pd[o[0]] = convert<dst_t>(ps[o[1]]); });
    });
  });
}

void copy_values(const Tensor& dst, const Tensor& src);

// t's values, contiguous and in `dtype`, on t's own device: t itself when it already is so.
Tensor packed(const Tensor& t, DType dtype) {
  if (t.dtype() == dtype && t.is_contiguous()) return t;
  Tensor out = empty(t.sizes(), TensorOptions(dtype).device(t.device()));
  copy_values(out, t);
  return out;
}

bool has_copy_kernel(Device d) { return device_kernels(d.type).copy_strided != nullptr; }

// copy_into without the version bump: copy_as fills a tensor nobody has seen yet.
void copy_values(const Tensor& dst, const Tensor& src) {
  MG_CHECK(dst.defined() && src.defined(), "copy_: undefined tensor");
  const Device to = dst.device(), from = src.device();
  if (to.is_cpu() && from.is_cpu()) {
    cpu_copy_convert(dst, src);
    return;
  }
  if (to == from && has_copy_kernel(to)) {  // one kernel on the device: strides, broadcast, conversion
    device_kernels(to.type).copy_strided(dst, src);
    return;
  }
  const bool plain = src.sizes() == dst.sizes() && src.dtype() == dst.dtype() && src.is_contiguous() &&
                     dst.is_contiguous();
  if (plain) {  // the bytes move as they are
    copy_bytes(dst.raw_data(), to, src.raw_data(), from, static_cast<size_t>(dst.numel()) * dst.element_size());
    return;
  }
  // A device without kernels moves contiguous bytes only; the conversion happens on the host.
  if (!from.is_cpu() && !has_copy_kernel(from)) {
    MG_CHECK(src.is_contiguous(), "copy_: a strided copy from {} needs the CUDA backend", from);
    copy_values(dst, copy_as(src, src.dtype(), kCPU));
    return;
  }
  if (!to.is_cpu() && !has_copy_kernel(to)) {
    MG_CHECK(dst.is_contiguous(), "copy_: a strided copy into {} needs the CUDA backend", to);
    Tensor staged = empty(dst.sizes(), TensorOptions(dst.dtype()));
    copy_values(staged, src);
    copy_bytes(dst.raw_data(), to, staged.raw_data(), kCPU, static_cast<size_t>(dst.numel()) * dst.element_size());
    return;
  }
  // Between the CPU and a device, or two devices: src's values cross once, packed, in src's
  // own shape (broadcasting happens on arrival) and in the narrower of the two dtypes (the
  // conversion runs on whichever side keeps the fewest bytes on the bus).
  const DType crossing_dtype = element_size(dst.dtype()) <= element_size(src.dtype()) ? dst.dtype() : src.dtype();
  const Tensor crossing = packed(src, crossing_dtype);
  const size_t crossing_bytes = static_cast<size_t>(crossing.numel()) * crossing.element_size();
  if (crossing_dtype == dst.dtype() && crossing.sizes() == dst.sizes() && dst.is_contiguous()) {
    copy_bytes(dst.raw_data(), to, crossing.raw_data(), from, crossing_bytes);
    return;
  }
  Tensor landed = empty(crossing.sizes(), TensorOptions(crossing_dtype).device(to));
  copy_bytes(landed.raw_data(), to, crossing.raw_data(), from, crossing_bytes);
  copy_values(dst, landed);
}

}  // namespace

void copy_into(const Tensor& dst, const Tensor& src) {
  copy_values(dst, src);
  bump_version(dst);
}

Tensor copy_as(const Tensor& t, DType dtype, Device device) {
  Tensor out = empty(t.sizes(), TensorOptions(dtype).device(device));
  copy_values(out, t);
  return out;
}

template <typename T>
T Tensor::item() const {
  MG_CHECK(defined(), "item: undefined tensor");
  MG_CHECK(numel() == 1, "item: only a one-element tensor has an item; this one has shape {} ({} elements)",
           shape_str(sizes()), numel());
  Tensor host = device().is_cpu() ? *this : copy_as(*this, dtype(), kCPU);
  return dispatch_all(dtype(), [&](auto tag) -> T {
    using src_t = decltype(tag);
    return convert<T>(*static_cast<const src_t*>(host.raw_data()));
  });
}

Scalar Tensor::item() const {
  switch (dtype()) {
    case kInt64: return Scalar(item<int64_t>());
    case kBool: return Scalar(item<bool>());
    default: return Scalar(item<double>());  // every floating dtype is exact in double
  }
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  MG_CHECK(defined(), "to_vector: undefined tensor");
  Tensor host = copy_as(*this, dtype_of<T>::value, kCPU);
  const T* p = static_cast<const T*>(host.raw_data());
  return std::vector<T>(p, p + host.numel());
}

template float Tensor::item<float>() const;
template double Tensor::item<double>() const;
template int64_t Tensor::item<int64_t>() const;
template bool Tensor::item<bool>() const;
template Half Tensor::item<Half>() const;
template BFloat16 Tensor::item<BFloat16>() const;
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
template std::vector<Half> Tensor::to_vector<Half>() const;
template std::vector<BFloat16> Tensor::to_vector<BFloat16>() const;

// std::vector<bool> is bit-packed, so bool gets its own loop.
template <>
std::vector<bool> Tensor::to_vector<bool>() const {
  MG_CHECK(defined(), "to_vector: undefined tensor");
  Tensor host = copy_as(*this, kBool, kCPU);
  const bool* p = static_cast<const bool*>(host.raw_data());
  return std::vector<bool>(p, p + host.numel());
}

Tensor& Tensor::requires_grad_(bool requires_grad) {
  MG_CHECK(defined(), "requires_grad_: called on an undefined tensor (a Tensor() that holds no data)");
  MG_CHECK(is_leaf(), "requires_grad_: only a leaf can be marked; this tensor was made by an op (use detach())");
  MG_CHECK(!requires_grad || is_floating(dtype()),
           "requires_grad_: only floating-point tensors can require gradients, this one is {}", dtype());
  impl_->requires_grad = requires_grad;
  return *this;
}

Tensor Tensor::detach() const {
  MG_CHECK(defined(), "detach: called on an undefined tensor (a Tensor() that holds no data)");
  Tensor out = as_strided(*this, sizes(), strides(), storage_offset());
  return out;
}

// Every handle to this TensorImpl sees the change, as with any in-place op. The nodes that
// recorded this tensor as an input keep their own edges, so a backward through an
// existing graph is unaffected; only what is computed from this tensor from now on has
// no history through it.
Tensor& Tensor::detach_() {
  MG_CHECK(defined(), "detach_: called on an undefined tensor (a Tensor() that holds no data)");
  impl_->grad_fn.reset();
  impl_->output_nr = 0;
  impl_->requires_grad = false;
  return *this;
}

}  // namespace minigrad
