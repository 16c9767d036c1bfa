#pragma once
// Tensor: a handle to a TensorImpl (shared storage + sizes, strides, offset, dtype) plus
// the autograd metadata the tape needs (requires_grad, grad, grad_fn).
//
// Copying a Tensor copies the handle, not the data, as in PyTorch. Views (view, transpose,
// slice, expand, ...) are new TensorImpls over the same Storage, which keeps the version
// counter, so an in-place change through any of them is seen by the autograd checks.
//
// Member functions that do math or build views are differentiable ops: they are declared
// here and defined in ops/ (one library), so `x.transpose(0, 1).sum()` records on the tape.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <tuple>
#include <type_traits>
#include <vector>

#include <minigrad/core/device.h>
#include <minigrad/core/dtype.h>
#include <minigrad/core/error.h>
#include <minigrad/core/macros.h>
#include <minigrad/core/scalar.h>
#include <minigrad/core/storage.h>

namespace minigrad {

using Shape = std::vector<int64_t>;
class Tensor;
using tensor_list = std::vector<Tensor>;
struct TensorImpl;

namespace autograd {
class Node;
struct LeafHooks;
}

// Options for the creation functions: randn({2, 3}, dtype(kFloat64).requires_grad(true)).
// dtype_ always holds a valid dtype (float32 unless one was named); dtype_set_ says whether
// the caller named one, for the functions whose default comes from elsewhere (from_vector
// takes T's dtype, arange int64's): use dtype_or(default) there.
struct TensorOptions {
  DType dtype_ = kFloat32;
  Device device_ = kCPU;
  bool requires_grad_ = false;
  bool dtype_set_ = false;

  TensorOptions() = default;
  TensorOptions(DType d) : dtype_(d), dtype_set_(true) {}  // NOLINT: implicit, as in PyTorch
  TensorOptions(Device d) : device_(d) {}  // NOLINT
  TensorOptions dtype(DType d) const { auto o = *this; o.dtype_ = d; o.dtype_set_ = true; return o; }
  DType dtype_or(DType fallback) const { return dtype_set_ ? dtype_ : fallback; }
  TensorOptions device(Device d) const { auto o = *this; o.device_ = d; return o; }
  TensorOptions requires_grad(bool r = true) const { auto o = *this; o.requires_grad_ = r; return o; }
};
inline TensorOptions dtype(DType d) { return TensorOptions().dtype(d); }
inline TensorOptions device(Device d) { return TensorOptions().device(d); }
inline TensorOptions requires_grad(bool r = true) { return TensorOptions().requires_grad(r); }

// Defined with gelu in ops/ops.h (None: exact; Tanh: the tanh approximation).
enum class GeluApproximation;
class Generator;  // core/generator.h

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }

  // ---- metadata ----
  const Shape& sizes() const;
  const Shape& strides() const;
  int64_t size(int64_t dim) const;    // negative dims count from the end
  int64_t stride(int64_t dim) const;
  int64_t dim() const;
  int64_t numel() const;
  DType dtype() const;
  Device device() const;
  // This tensor's dtype and device (requires_grad false), for making another like it:
  // empty(sizes, t.options()), as in PyTorch.
  TensorOptions options() const { return TensorOptions(dtype()).device(device()); }
  int64_t storage_offset() const;
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const;
  size_t element_size() const { return minigrad::element_size(dtype()); }

  // ---- data ----
  // Typed pointer to the first element (storage offset applied). Checks the dtype.
  template <typename T>
  T* data_ptr() const;
  void* raw_data() const;  // untyped pointer to the first element
  // The value of a one-element tensor, copied to the host when needed: as a Scalar of the
  // tensor's kind (x.item().toDouble(), n.item().toLong()), or converted to T (x.item<float>()).
  Scalar item() const;
  template <typename T>
  T item() const;
  // All elements in logical (row-major) order, converted to T. For tests and printing.
  template <typename T>
  std::vector<T> to_vector() const;

  // ---- autograd ----
  bool requires_grad() const;
  Tensor& requires_grad_(bool requires_grad = true);
  Tensor& set_requires_grad(bool requires_grad) { return requires_grad_(requires_grad); }  // LibTorch's name
  bool is_leaf() const;
  const Tensor& grad() const;   // undefined until a backward reaches this leaf
  // For optimizers: x.mutable_grad() = Tensor(). Assigning a gradient that has history
  // is refused (it would tie the tensor to a graph through its own .grad: a reference
  // cycle); assign g.detach(), or compute g under NoGradGuard.
  class GradSlot;
  GradSlot mutable_grad();
  const std::shared_ptr<autograd::Node>& grad_fn() const;
  uint32_t output_nr() const;
  // Reverse-mode gradient of this tensor. `gradient` may be omitted for a one-element
  // tensor. retain_graph keeps the saved tensors for another backward (default: the value
  // of create_graph); create_graph records the backward itself, so the gradients have
  // history and can be differentiated again.
  void backward(const Tensor& gradient = Tensor(), std::optional<bool> retain_graph = std::nullopt,
                bool create_graph = false) const;
  Tensor detach() const;        // same storage and version counter, no history
  Tensor& detach_();            // this tensor itself leaves the graph: a leaf that does not require grad
  uint64_t version() const;     // bumped by every in-place change of the storage

  // ---- hooks (autograd/hooks.cpp) ----
  // hook(grad) runs when this tensor's gradient is computed, before it is used: it may
  // return a replacement gradient, or nothing (void, or Tensor()) to keep it. Returns a
  // handle for remove_hook.
  template <typename F>
  size_t register_hook(F&& hook) const;
  void remove_hook(size_t handle) const;
  // A non-leaf keeps its gradient in .grad after backward (a leaf always does).
  void retain_grad() const;
  bool retains_grad() const;
  // hook(leaf) runs after the gradient is accumulated into this leaf's .grad (an
  // optimizer stepping each parameter as soon as its gradient is ready).
  size_t register_post_accumulate_grad_hook(std::function<void(const Tensor&)> hook) const;

  // ---- copies and conversion (differentiable) ----
  Tensor to(DType dtype) const;
  Tensor to(Device device) const;
  Tensor cpu() const { return to(kCPU); }
  Tensor cuda(int index = 0) const { return to(Device::cuda(index)); }
  Tensor clone() const;
  Tensor contiguous() const;    // `this` when already contiguous

  // ---- views (differentiable; share storage) ----
  Tensor view(const Shape& shape) const;     // needs compatible strides; -1 infers one size
  Tensor reshape(const Shape& shape) const;  // a view when possible, else a copy
  Tensor flatten() const { return reshape({-1}); }
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor t() const;                          // 2-D transpose
  Tensor permute(const Shape& dims) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor expand(const Shape& sizes) const;   // -1 keeps a size
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;

  // ---- more views and joins ----
  // Views (share storage): narrow, unflatten, view_as, expand_as, movedim, swapaxes/swapdims,
  // mT, the pieces of chunk, split and unbind, and flatten and reshape_as where reshape
  // gives a view. Copies: repeat, flip, tril, triu. All differentiable. cat and stack are
  // free functions (ops/ops.h), as in LibTorch.
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;  // slice(dim, start, start + length)
  Tensor flatten(int64_t start_dim, int64_t end_dim = -1) const;    // merges dims start_dim..end_dim
  Tensor unflatten(int64_t dim, const Shape& sizes) const;          // splits dim into sizes (one may be -1)
  Tensor view_as(const Tensor& other) const;
  Tensor reshape_as(const Tensor& other) const;
  Tensor expand_as(const Tensor& other) const;
  Tensor movedim(int64_t source, int64_t destination) const;
  Tensor movedim(const Shape& source, const Shape& destination) const;
  Tensor swapaxes(int64_t dim0, int64_t dim1) const;  // transpose(dim0, dim1)
  Tensor swapdims(int64_t dim0, int64_t dim1) const;  // transpose(dim0, dim1)
  // PyTorch's x.mT property (the last two dims transposed): a member function here, since
  // C++ has no properties.
  Tensor mT() const;
  // `chunks` views of (nearly) equal size along dim; the last may be smaller, and there may
  // be fewer than `chunks` of them, as in PyTorch.
  tensor_list chunk(int64_t chunks, int64_t dim = 0) const;
  // split(2): views of 2 along dim, the last one smaller when 2 does not divide the size.
  // split({2, 3}): views of those sizes, which must add up to the size (split_with_sizes).
  // The integer form is a template, so that a braced list, even of one size, is the list form.
  template <typename Int, IfInteger<Int> = 0>
  tensor_list split(Int split_size, int64_t dim = 0) const {
    return split_by_size(static_cast<int64_t>(split_size), dim);
  }
  tensor_list split(const Shape& split_sizes, int64_t dim = 0) const { return split_with_sizes(split_sizes, dim); }
  tensor_list split_with_sizes(const Shape& split_sizes, int64_t dim = 0) const;
  tensor_list unbind(int64_t dim = 0) const;  // the selects along dim, each a view
  Tensor repeat(const Shape& repeats) const;  // tiles: one count per dim (leading dims may be added)
  Tensor flip(const Shape& dims) const;       // a copy with the order along each of dims reversed
  Tensor tril(int64_t diagonal = 0) const;    // zeros above the diagonal of the last two dims
  Tensor triu(int64_t diagonal = 0) const;    // zeros below it

  // ---- the public ops as members, LibTorch's spellings (x.exp(), x.sum(1, true)) ----
  // Each calls the function of the same name in ops/ops.h and is defined next to it. Scalar
  // arguments are doubles, as in those functions.
  Tensor add(const Tensor& other, double alpha = 1.0) const;  // this + alpha * other
  Tensor add(double other) const;
  Tensor sub(const Tensor& other, double alpha = 1.0) const;  // this - alpha * other
  Tensor sub(double other) const;
  Tensor mul(const Tensor& other) const;
  Tensor mul(double other) const;
  Tensor div(const Tensor& other) const;
  Tensor div(double other) const;
  Tensor neg() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor erf() const;
  Tensor tanh() const;
  Tensor sigmoid() const;
  Tensor abs() const;
  Tensor pow(double exponent) const;
  Tensor pow(const Tensor& exponent) const;
  Tensor clamp(double min, double max) const;
  Tensor clamp_min(double min) const;
  Tensor clamp_max(double max) const;
  Tensor eq(const Tensor& other) const;
  Tensor eq(double other) const;
  Tensor ne(const Tensor& other) const;
  Tensor ne(double other) const;
  Tensor lt(const Tensor& other) const;
  Tensor lt(double other) const;
  Tensor le(const Tensor& other) const;
  Tensor le(double other) const;
  Tensor gt(const Tensor& other) const;
  Tensor gt(double other) const;
  Tensor ge(const Tensor& other) const;
  Tensor ge(double other) const;
  Tensor matmul(const Tensor& other) const;
  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim) const;
  Tensor relu() const;
  Tensor gelu() const;
  Tensor gelu(GeluApproximation approximate) const;
  Tensor softplus(double beta = 1.0, double threshold = 20.0) const;

  // ---- more elementwise (ops/unary.cpp, ops/minmax.cpp, ops/lerp.cpp, ops/compare.cpp, ops/logical.cpp) ----
  Tensor square() const;
  Tensor rsqrt() const;
  Tensor reciprocal() const;
  Tensor log1p() const;
  Tensor expm1() const;
  Tensor sin() const;
  Tensor cos() const;
  Tensor sign() const;
  Tensor floor() const;
  Tensor clamp(std::optional<double> min, std::optional<double> max) const;
  Tensor clamp(const std::optional<Tensor>& min, const std::optional<Tensor>& max) const;
  Tensor clamp_min(const Tensor& min) const;
  Tensor clamp_max(const Tensor& max) const;
  Tensor maximum(const Tensor& other) const;
  Tensor minimum(const Tensor& other) const;
  Tensor lerp(const Tensor& end, double weight) const;
  Tensor lerp(const Tensor& end, const Tensor& weight) const;
  Tensor masked_fill(const Tensor& mask, double value) const;
  Tensor masked_fill(const Tensor& mask, const Tensor& value) const;
  Tensor logical_and(const Tensor& other) const;
  Tensor logical_or(const Tensor& other) const;
  Tensor logical_xor(const Tensor& other) const;
  Tensor logical_not() const;
  Tensor bitwise_and(const Tensor& other) const;
  Tensor bitwise_or(const Tensor& other) const;
  Tensor bitwise_xor(const Tensor& other) const;
  Tensor bitwise_not() const;
  Tensor isnan() const;
  Tensor isinf() const;
  Tensor isfinite() const;
  Tensor isclose(const Tensor& other, double rtol = 1e-5, double atol = 1e-8, bool equal_nan = false) const;
  bool allclose(const Tensor& other, double rtol = 1e-5, double atol = 1e-8, bool equal_nan = false) const;
  bool equal(const Tensor& other) const;

  // ---- reductions (differentiable) ----
  Tensor sum() const;
  Tensor sum(const Shape& dims, bool keepdim = false) const;
  // One dim as an integer: x.sum(1), x.sum(-1, true). A template (IfInteger, core/dtype.h),
  // so that a braced list never picks it: x.sum({}) stays "every dim", x.sum({1}) the list form.
  template <typename Int, IfInteger<Int> = 0>
  Tensor sum(Int dim, bool keepdim = false) const {
    return sum(Shape{static_cast<int64_t>(dim)}, keepdim);
  }
  Tensor mean() const;
  Tensor mean(const Shape& dims, bool keepdim = false) const;
  template <typename Int, IfInteger<Int> = 0>
  Tensor mean(Int dim, bool keepdim = false) const {
    return mean(Shape{static_cast<int64_t>(dim)}, keepdim);
  }
  Tensor max() const;
  std::tuple<Tensor, Tensor> max(int64_t dim, bool keepdim = false) const;  // (values, indices)
  Tensor argmax(int64_t dim, bool keepdim = false) const;  // int64, no gradient
  // ---- more reductions ----
  Tensor min() const;
  std::tuple<Tensor, Tensor> min(int64_t dim, bool keepdim = false) const;  // (values, indices)
  Tensor argmin(int64_t dim, bool keepdim = false) const;  // int64, no gradient
  Tensor amax(const Shape& dims = {}, bool keepdim = false) const;
  template <typename Int, IfInteger<Int> = 0>
  Tensor amax(Int dim, bool keepdim = false) const {
    return amax(Shape{static_cast<int64_t>(dim)}, keepdim);
  }
  Tensor amin(const Shape& dims = {}, bool keepdim = false) const;
  template <typename Int, IfInteger<Int> = 0>
  Tensor amin(Int dim, bool keepdim = false) const {
    return amin(Shape{static_cast<int64_t>(dim)}, keepdim);
  }
  Tensor logsumexp(const Shape& dims, bool keepdim = false) const;
  template <typename Int, IfInteger<Int> = 0>
  Tensor logsumexp(Int dim, bool keepdim = false) const {
    return logsumexp(Shape{static_cast<int64_t>(dim)}, keepdim);
  }
  Tensor prod() const;
  Tensor prod(int64_t dim, bool keepdim = false) const;
  Tensor var() const;
  Tensor var(const Shape& dims, double correction = 1.0, bool keepdim = false) const;
  template <typename Int, IfInteger<Int> = 0>
  Tensor var(Int dim, double correction = 1.0, bool keepdim = false) const {
    return var(Shape{static_cast<int64_t>(dim)}, correction, keepdim);
  }
  Tensor std() const;
  Tensor std(const Shape& dims, double correction = 1.0, bool keepdim = false) const;
  template <typename Int, IfInteger<Int> = 0>
  Tensor std(Int dim, double correction = 1.0, bool keepdim = false) const {
    return std(Shape{static_cast<int64_t>(dim)}, correction, keepdim);
  }
  Tensor norm(double p = 2.0, const Shape& dims = {}, bool keepdim = false) const;
  template <typename Int, IfInteger<Int> = 0>
  Tensor norm(double p, Int dim, bool keepdim = false) const {
    return norm(p, Shape{static_cast<int64_t>(dim)}, keepdim);
  }
  Tensor cumsum(int64_t dim) const;
  Tensor any() const;
  Tensor any(int64_t dim, bool keepdim = false) const;
  Tensor all() const;
  Tensor all(int64_t dim, bool keepdim = false) const;

  // ---- indexing ----
  // ops/indexing.cpp; index tensors are int64. topk's values are differentiable, its indices
  // and multinomial's draws are not.
  Tensor index_select(int64_t dim, const Tensor& index) const;
  Tensor index_add(int64_t dim, const Tensor& index, const Tensor& source, double alpha = 1.0) const;
  Tensor gather(int64_t dim, const Tensor& index) const;
  Tensor scatter(int64_t dim, const Tensor& index, const Tensor& src) const;
  Tensor scatter(int64_t dim, const Tensor& index, double value) const;
  Tensor scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const;
  std::tuple<Tensor, Tensor> topk(int64_t k, int64_t dim = -1, bool largest = true, bool sorted = true) const;
  Tensor multinomial(int64_t num_samples, bool replacement = false, Generator* generator = nullptr) const;

  // ---- in-place (bump the version counter; refused by autograd while recording) ----
  Tensor& add_(const Tensor& other, double alpha = 1.0);
  Tensor& add_(double other);
  Tensor& sub_(const Tensor& other, double alpha = 1.0);
  Tensor& sub_(double other);
  Tensor& mul_(const Tensor& other);
  Tensor& mul_(double other);
  Tensor& div_(const Tensor& other);  // floating-point tensors (true division)
  Tensor& div_(double other);
  Tensor& clamp_(std::optional<double> min, std::optional<double> max);
  Tensor& clamp_min_(double min);
  Tensor& clamp_max_(double max);
  Tensor& relu_();
  Tensor& zero_();
  Tensor& fill_(double value);
  Tensor& masked_fill_(const Tensor& mask, double value);
  Tensor& copy_(const Tensor& src);  // broadcasts src to this tensor's shape

 private:
  tensor_list split_by_size(int64_t split_size, int64_t dim) const;  // split(Int)'s body
  std::shared_ptr<TensorImpl> impl_;
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape sizes;
  Shape strides;          // in elements
  int64_t offset = 0;     // in elements
  DType dtype = kFloat32;

  // autograd
  bool requires_grad = false;                   // set on leaves by the user
  std::shared_ptr<autograd::Node> grad_fn;      // the op that made this tensor (non-leaf)
  uint32_t output_nr = 0;                       // which output of grad_fn
  Tensor grad;                                  // accumulated gradient (leaves)
  std::weak_ptr<autograd::Node> grad_accumulator;  // weak: the accumulator holds the leaf
  std::shared_ptr<autograd::LeafHooks> leaf_hooks;  // a leaf's hooks: register_hook, post-accumulate

  // In unsigned arithmetic: creation refuses sizes whose product passes int64 unless one
  // of them is 0, and then the wrapped product times 0 is still 0.
  int64_t numel() const {
    uint64_t n = 1;
    for (int64_t s : sizes) n *= static_cast<uint64_t>(s);
    return static_cast<int64_t>(n);
  }
};

// What Tensor::mutable_grad() returns: the leaf's .grad, with assignment checked.
class Tensor::GradSlot {
 public:
  explicit GradSlot(TensorImpl* owner);
  GradSlot& operator=(const Tensor& g);
  operator Tensor&() const { return *grad_; }  // NOLINT: implicit, reads like the Tensor
  Tensor& operator*() const { return *grad_; }
  Tensor* operator->() const { return grad_; }
  bool defined() const { return grad_->defined(); }

 private:
  TensorImpl* owner_;
  Tensor* grad_;
};

namespace autograd {
size_t register_tensor_hook(const Tensor& t, std::function<Tensor(const Tensor&)> hook);
}

template <typename F>
size_t Tensor::register_hook(F&& hook) const {
  if constexpr (std::is_void_v<std::invoke_result_t<F&, const Tensor&>>) {
    return autograd::register_tensor_hook(*this, [h = std::forward<F>(hook)](const Tensor& g) mutable {
      h(g);
      return Tensor();
    });
  } else {
    return autograd::register_tensor_hook(*this, std::function<Tensor(const Tensor&)>(std::forward<F>(hook)));
  }
}

// ---- inline metadata accessors ----
// A default-constructed Tensor() has no TensorImpl: every accessor refuses it with an error
// naming the accessor, instead of reading through a null pointer. The check is one
// predictable branch; the error is built out of line (cold), so the inline bodies stay small.
namespace detail {
[[noreturn]] void throw_undefined_tensor(const char* accessor);
}
inline const Shape& Tensor::sizes() const {
  if (MG_UNLIKELY(!impl_)) detail::throw_undefined_tensor("sizes()");
  return impl_->sizes;
}
inline const Shape& Tensor::strides() const {
  if (MG_UNLIKELY(!impl_)) detail::throw_undefined_tensor("strides()");
  return impl_->strides;
}
inline int64_t Tensor::dim() const {
  if (MG_UNLIKELY(!impl_)) detail::throw_undefined_tensor("dim()");
  return static_cast<int64_t>(impl_->sizes.size());
}
inline int64_t Tensor::numel() const {
  if (MG_UNLIKELY(!impl_)) detail::throw_undefined_tensor("numel()");
  return impl_->numel();
}
inline DType Tensor::dtype() const {
  if (MG_UNLIKELY(!impl_)) detail::throw_undefined_tensor("dtype()");
  return impl_->dtype;
}
inline Device Tensor::device() const {
  if (MG_UNLIKELY(!impl_)) detail::throw_undefined_tensor("device()");
  return impl_->storage->device();
}
inline int64_t Tensor::storage_offset() const {
  if (MG_UNLIKELY(!impl_)) detail::throw_undefined_tensor("storage_offset()");
  return impl_->offset;
}
inline const std::shared_ptr<Storage>& Tensor::storage() const {
  if (MG_UNLIKELY(!impl_)) detail::throw_undefined_tensor("storage()");
  return impl_->storage;
}
inline void* Tensor::raw_data() const {
  if (MG_UNLIKELY(!impl_)) detail::throw_undefined_tensor("raw_data()");
  return static_cast<char*>(impl_->storage->data()) +
         impl_->offset * static_cast<int64_t>(minigrad::element_size(impl_->dtype));
}
template <typename T>
T* Tensor::data_ptr() const {
  MG_CHECK(dtype_of<T>::value == dtype(), "data_ptr: tensor has dtype {}, asked for {}", dtype(),
           dtype_of<T>::value);
  return static_cast<T*>(raw_data());
}
inline bool Tensor::requires_grad() const {
  if (MG_UNLIKELY(!impl_)) detail::throw_undefined_tensor("requires_grad()");
  return impl_->requires_grad || impl_->grad_fn != nullptr;
}
inline bool Tensor::is_leaf() const {
  if (MG_UNLIKELY(!impl_)) detail::throw_undefined_tensor("is_leaf()");
  return impl_->grad_fn == nullptr;
}
inline const Tensor& Tensor::grad() const {
  if (MG_UNLIKELY(!impl_)) detail::throw_undefined_tensor("grad()");
  return impl_->grad;
}
inline const std::shared_ptr<autograd::Node>& Tensor::grad_fn() const {
  if (MG_UNLIKELY(!impl_)) detail::throw_undefined_tensor("grad_fn()");
  return impl_->grad_fn;
}
inline uint32_t Tensor::output_nr() const {
  if (MG_UNLIKELY(!impl_)) detail::throw_undefined_tensor("output_nr()");
  return impl_->output_nr;
}
inline uint64_t Tensor::version() const {
  if (MG_UNLIKELY(!impl_)) detail::throw_undefined_tensor("version()");
  return impl_->storage->version();
}

// ---- creation (core/creation.cpp) ----
// Each refuses a negative size, and a shape whose element or byte count overflows, with an
// error naming the function called. An int64 tensor's fill value must be a whole number in
// int64's range (as for fill_).
Tensor empty(const Shape& sizes, TensorOptions options = {});
Tensor zeros(const Shape& sizes, TensorOptions options = {});
Tensor ones(const Shape& sizes, TensorOptions options = {});
Tensor full(const Shape& sizes, double value, TensorOptions options = {});
Tensor empty_like(const Tensor& t);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, double value);
Tensor scalar_tensor(double value, TensorOptions options = {});
// [start, end) in steps of `step`; int64 unless options say otherwise.
Tensor arange(double start, double end, double step = 1.0, TensorOptions options = TensorOptions(kInt64));
Tensor arange(int64_t end, TensorOptions options = TensorOptions(kInt64));
// Uniform in [0, 1) and standard normal, from the default generator (core/generator.h),
// drawn on the tensor's device, the same values on either (ops/random.cpp).
Tensor rand(const Shape& sizes, TensorOptions options = {});
Tensor randn(const Shape& sizes, TensorOptions options = {});
// A tensor holding a copy of `values`, in the dtype of T unless options name another.
template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& sizes);
template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& sizes, TensorOptions options);
// tensor({1.f, -2.f, 3.f}) : a 1-D float32 tensor. tensor({1.0, 2.0}) is float32 too (the
// default dtype, as for a Python list of floats in PyTorch) unless options name a dtype.
Tensor tensor(std::initializer_list<float> values, TensorOptions options = {});
Tensor tensor(std::initializer_list<double> values, TensorOptions options = {});

// ---- more creation ----
// `steps` values from start to end, both included, evenly spaced (float32 unless options
// say otherwise; an integer dtype truncates). steps must be >= 0.
Tensor linspace(double start, double end, int64_t steps, TensorOptions options = {});
// The n x n (or n x m) identity: ones on the main diagonal (float32 unless options say).
Tensor eye(int64_t n, TensorOptions options = {});
Tensor eye(int64_t n, int64_t m, TensorOptions options = {});
// Integers uniform in [low, high), int64 unless options name another dtype, from the
// default generator like rand (one stream), the same values on either device
// (ops/random.cpp). low < high, both within +-2^53 (whole numbers a double holds exactly).
Tensor randint(int64_t low, int64_t high, const Shape& sizes, TensorOptions options = TensorOptions(kInt64));
Tensor randint(int64_t high, const Shape& sizes, TensorOptions options = TensorOptions(kInt64));
// rand and randn of t's sizes, dtype and device.
Tensor rand_like(const Tensor& t);
Tensor randn_like(const Tensor& t);
// A tensor over memory the caller owns (a CPU pointer, or a device pointer with a CUDA
// device in options): no copy, writes through the tensor reach the buffer. Strides default
// to contiguous ones and must not be negative. The deleter (if any) is called once with
// `data` when the last tensor viewing the memory (views included) is destroyed; without
// one the memory must outlive every such tensor.
Tensor from_blob(void* data, const Shape& sizes, TensorOptions options = {});
Tensor from_blob(void* data, const Shape& sizes, const Shape& strides, TensorOptions options = {});
Tensor from_blob(void* data, const Shape& sizes, std::function<void(void*)> deleter, TensorOptions options = {});
Tensor from_blob(void* data, const Shape& sizes, const Shape& strides, std::function<void(void*)> deleter,
                 TensorOptions options = {});

// ---- raw views and copies, no autograd (core/tensor.cpp); ops build on these ----
// An alias of `t` with other sizes/strides/offset: same storage (so same version counter).
Tensor as_strided(const Tensor& t, const Shape& sizes, const Shape& strides, int64_t offset);
// Copies src (broadcast to dst's shape, any strides, any dtype) into dst. Bumps dst's version.
void copy_into(const Tensor& dst, const Tensor& src);
// A new contiguous tensor equal to t, converted to dtype on device. Never aliases t.
Tensor copy_as(const Tensor& t, DType dtype, Device device);
// Marks an in-place write: bumps the version counter shared by t and its views.
inline void bump_version(const Tensor& t) { t.storage()->bump_version(); }

}  // namespace minigrad
