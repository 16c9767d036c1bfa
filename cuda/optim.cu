// The optimizers' multi-tensor kernels (cuda/optim.h): AdamW, SGD, and clip_grad_norm_'s
// sum of squares and scaling.
//
// Multi-tensor apply. Each tensor is cut into chunks of kChunkElements; a launch carries, by
// value, the pointers and sizes of up to kMaxTensorsPerLaunch tensors and the chunk number
// where each one starts, and runs one block per chunk. A block finds its tensor by a binary
// search over those starts (the same for every thread of the block, so the reads are
// broadcasts of the launch's parameters), then walks its chunk. Launches go on the current
// stream back to back, so a model's few hundred tensors cost a few launches, not a few per
// tensor. Small tensors leave some threads of their one block idle; the large ones, which
// hold nearly every byte, fill whole chunks.
//
// Within a chunk each thread moves 16 bytes of the widest tensor per access (4 floats or 2
// doubles, with the gradient and a float16/bfloat16 parameter read at the same number of
// elements) when every pointer of the tensor is aligned for it; the end of a tensor whose
// length is not a multiple of that, and whole tensors whose pointers are misaligned (views at
// odd offsets), go one element at a time.
//
// Rounding. The CPU path computes each step as a few tensor ops, each rounding its result
// (and compiled without fused multiply-adds). These kernels evaluate the same operations in
// the same order, with the scalars rounded to the compute type as the tensor ops round them,
// and write each product and sum with __fmul_rn / __fadd_rn (and the double forms): nvcc
// would otherwise fuse m * beta1 + (1 - beta1) * g into one fma, rounded once, and CUDA and
// CPU would drift apart by an ulp a step.
#include <array>
#include <climits>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>

#include <minigrad/core/dispatch.h>
#include <minigrad/cuda/block_reduce.cuh>
#include <minigrad/cuda/convert.cuh>
#include <minigrad/cuda/optim.h>
#include <minigrad/cuda/runtime.h>
#include <minigrad/cuda/vector.cuh>
#include <minigrad/kernels/elementwise_functors.h>  // compute_t

namespace minigrad {
namespace cuda {
namespace {

constexpr int kThreads = 256;
// 64 elements a thread: large enough that finding the chunk's tensor is a small part of a
// block's work, small enough that GPT-2's 124M parameters make ~7,600 blocks, several waves
// on any GPU, so the last wave's idle SMs cost little.
constexpr int kChunkElements = 16384;
// AdamW's five pointers, a size and a starting chunk are 52 bytes a tensor: 128 tensors make
// 6.7 KB of kernel parameters. That needs the 32,764 bytes that CUDA 12.1+ allows on sm_70
// and later (4 KB before); every architecture this library builds for is sm_80 or later.
// A model of a few hundred tensors takes two or three launches; a larger block of
// parameters, which the driver copies at every launch, would save little more.
constexpr int kMaxTensorsPerLaunch = 128;

// The tensors of one launch: data[l][i] is list l's tensor i (params, grads, ...), nullptr
// where a list is absent (the master copies of float32 parameters).
template <int kLists>
struct TensorChunks {
  void* data[kLists][kMaxTensorsPerLaunch];
  int64_t numel[kMaxTensorsPerLaunch];
  int first_chunk[kMaxTensorsPerLaunch];  // tensor i's chunks are blocks first_chunk[i] ...
  int count;                              // tensors in this launch
  int chunks;                             // blocks of this launch
};
static_assert(sizeof(TensorChunks<5>) + 128 <= 32764, "AdamW's launch exceeds the kernel parameter limit");

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Cuts the tensors of `lists` into launches and calls launch(chunks, blocks_before) for each,
// blocks_before counting the blocks of the launches before it. Entry i of every list belongs
// to the same parameter; an empty list is absent (nullptr). Empty tensors are skipped: every
// tensor of a launch has at least one chunk, which the binary search relies on.
template <int kLists, typename Launch>
void for_each_launch(const std::array<const std::vector<Tensor>*, kLists>& lists, Launch&& launch) {
  const std::vector<Tensor>& first = *lists[0];
  TensorChunks<kLists> chunks{};
  int64_t blocks_before = 0;
  for (size_t i = 0; i < first.size(); ++i) {
    const int64_t n = first[i].numel();
    if (n == 0) continue;
    const int64_t tensor_chunks = ceil_div(n, kChunkElements);
    // A grid has at most 2^31 - 1 blocks: 35 trillion elements, far beyond any GPU's memory.
    MG_CHECK(chunks.chunks + tensor_chunks <= INT_MAX, "optimizer (CUDA): tensor {} of {} elements is too large", i,
             n);
    for (int l = 0; l < kLists; ++l) chunks.data[l][chunks.count] = lists[l]->empty() ? nullptr : (*lists[l])[i].raw_data();
    chunks.numel[chunks.count] = n;
    chunks.first_chunk[chunks.count] = chunks.chunks;
    chunks.chunks += static_cast<int>(tensor_chunks);
    if (++chunks.count == kMaxTensorsPerLaunch) {
      launch(chunks, blocks_before);
      blocks_before += chunks.chunks;
      chunks = TensorChunks<kLists>{};
    }
  }
  if (chunks.count > 0) launch(chunks, blocks_before);
}

int64_t total_chunks(const std::vector<Tensor>& tensors) {
  int64_t total = 0;
  for (const Tensor& t : tensors) total += ceil_div(t.numel(), kChunkElements);
  return total;
}

// This block's chunk: its tensor, and where in the tensor it starts and how many elements.
struct Chunk {
  int tensor;
  int64_t start;
  int count;
};

template <int kLists>
__device__ __forceinline__ Chunk chunk_of_block(const TensorChunks<kLists>& chunks) {
  const int block = static_cast<int>(blockIdx.x);
  // The last tensor that starts at or before this block.
  int low = 0, high = chunks.count - 1;
  while (low < high) {
    const int middle = (low + high + 1) / 2;
    if (chunks.first_chunk[middle] <= block)
      low = middle;
    else
      high = middle - 1;
  }
  const int64_t start = static_cast<int64_t>(block - chunks.first_chunk[low]) * kChunkElements;
  const int64_t left = chunks.numel[low] - start;
  return {low, start, static_cast<int>(left < kChunkElements ? left : kChunkElements)};
}

// Elements of the compute type S in one 16-byte access.
template <typename T>
constexpr int kVecOf = kElementsPer16Bytes<compute_t<T>>;

// Products and sums rounded once each, never fused (see the top of the file).
__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double add_rn(double a, double b) { return __dadd_rn(a, b); }

template <typename V, typename T>
__device__ __forceinline__ V load(const T* p, int k) {
  return reinterpret_cast<const V*>(p)[k];
}
template <typename V, typename T>
__device__ __forceinline__ void store(T* p, int k, const V& v) {
  reinterpret_cast<V*>(p)[k] = v;
}

// Runs span(width, pointers, vectors) over a chunk of `count` elements: vectors of kVec
// elements where pointers.aligned<kVec>() holds, then the chunk's last count % kVec elements
// one at a time (only a tensor's last chunk has any); one at a time throughout otherwise.
// Each thread takes every kThreads-th vector: a warp's accesses are contiguous.
template <int kVec, typename Pointers, typename Span>
__device__ __forceinline__ void for_each_vector(const Pointers& pointers, int count, Span&& span) {
  if (pointers.template aligned<kVec>()) {
    const int vectors = count / kVec;
    span(std::integral_constant<int, kVec>{}, pointers, vectors);
    span(std::integral_constant<int, 1>{}, pointers.advanced(vectors * kVec), count - vectors * kVec);
  } else {
    span(std::integral_constant<int, 1>{}, pointers, count);
  }
}

template <typename V>
__device__ __forceinline__ bool aligned_for(const void* p) {
  return p == nullptr || is_aligned_for<V>(p);
}

// ---- AdamW ----

// The step's scalars in the compute type S, rounded from the host's doubles as the CPU's
// tensor ops round theirs (T(scalar)).
template <typename S>
struct AdamWScalars {
  S decay, beta1, one_minus_beta1, beta2, one_minus_beta2, sqrt_bias_correction2, eps, minus_step_size;
};

// One element, as optim/optim.cpp's tensor ops compute it, one line per op.
template <typename S>
__device__ __forceinline__ void adamw_element(const AdamWScalars<S>& s, S& w, S g, S& m, S& v) {
  using std::sqrt;  // CUDA's float and double sqrt in device code, correctly rounded as the CPU's
  w = mul_rn(w, s.decay);                                                     // w.mul_(1 - lr wd)
  m = add_rn(mul_rn(m, s.beta1), mul_rn(s.one_minus_beta1, g));               // m.mul_(b1).add_(g, 1 - b1)
  v = add_rn(mul_rn(v, s.beta2), mul_rn(s.one_minus_beta2, mul_rn(g, g)));    // v.mul_(b2).add_(g * g, 1 - b2)
  const S denominator = add_rn(sqrt(v) / s.sqrt_bias_correction2, s.eps);     // sqrt(v) / sqrt(bc2) + eps
  w = add_rn(w, mul_rn(s.minus_step_size, m / denominator));                  // w.add_(m / den, -step_size)
}

// One tensor's pointers, advanced to a chunk. w is the parameter (float32, float64) or its
// float32 master copy; `rounded` is the float16/bfloat16 parameter, nullptr otherwise.
template <typename T>
struct AdamWPointers {
  using S = compute_t<T>;
  S* w;
  const T* g;
  S* m;
  S* v;
  T* rounded;

  template <int W>
  __device__ bool aligned() const {
    using SV = AlignedVector<S, W>;
    using TV = AlignedVector<T, W>;
    return aligned_for<SV>(w) && aligned_for<TV>(g) && aligned_for<SV>(m) && aligned_for<SV>(v) &&
           aligned_for<TV>(rounded);
  }
  __device__ AdamWPointers advanced(int n) const {
    return {w + n, g + n, m + n, v + n, rounded == nullptr ? nullptr : rounded + n};
  }
};

template <typename T>
__global__ void __launch_bounds__(kThreads)
    adamw_kernel(const __grid_constant__ TensorChunks<5> chunks, const AdamWScalars<compute_t<T>> s) {
  using S = compute_t<T>;
  const Chunk c = chunk_of_block(chunks);
  const int i = c.tensor;
  const AdamWPointers<T> pointers{static_cast<S*>(chunks.data[0][i]) + c.start,
                                  static_cast<const T*>(chunks.data[1][i]) + c.start,
                                  static_cast<S*>(chunks.data[2][i]) + c.start,
                                  static_cast<S*>(chunks.data[3][i]) + c.start,
                                  is_half_type<T> ? static_cast<T*>(chunks.data[4][i]) + c.start : nullptr};
  for_each_vector<kVecOf<T>>(pointers, c.count, [&](auto width, const AdamWPointers<T>& p, int vectors) {
    constexpr int W = decltype(width)::value;
    using SV = AlignedVector<S, W>;
    using TV = AlignedVector<T, W>;
    for (int k = threadIdx.x; k < vectors; k += kThreads) {
      // Four independent loads a thread in flight, from thousands of threads: enough bytes
      // in flight to keep HBM busy without unrolling further.
      SV w = load<SV>(p.w, k), m = load<SV>(p.m, k), v = load<SV>(p.v, k);
      const TV g = load<TV>(p.g, k);
      TV rounded;
#pragma unroll
      for (int e = 0; e < W; ++e) {
        adamw_element(s, w.values[e], convert_element<S>(g.values[e]), m.values[e], v.values[e]);
        rounded.values[e] = convert_element<T>(w.values[e]);
      }
      store(p.w, k, w);
      store(p.m, k, m);
      store(p.v, k, v);
      if constexpr (is_half_type<T>) store(p.rounded, k, rounded);
    }
  });
}

// ---- SGD ----

template <typename S>
struct SGDScalars {
  S weight_decay, momentum, one_minus_dampening, minus_lr;
  bool has_weight_decay, has_momentum, nesterov, first_step;
};

// One element, as optim/optim.cpp's tensor ops compute it. buf is neither read on the first
// step nor written without momentum.
template <typename S>
__device__ __forceinline__ void sgd_element(const SGDScalars<S>& s, S& w, S g, S& buf) {
  if (s.has_weight_decay) g = add_rn(g, mul_rn(w, s.weight_decay));  // g + w * wd
  if (s.has_momentum) {
    buf = s.first_step ? g : add_rn(mul_rn(buf, s.momentum), mul_rn(s.one_minus_dampening, g));
    g = s.nesterov ? add_rn(g, mul_rn(buf, s.momentum)) : buf;  // g + buf * momentum
  }
  w = add_rn(w, mul_rn(s.minus_lr, g));  // w.add_(g, -lr)
}

template <typename T>
struct SGDPointers {
  using S = compute_t<T>;
  S* w;
  const T* g;
  S* buf;  // nullptr without momentum
  T* rounded;

  template <int W>
  __device__ bool aligned() const {
    using SV = AlignedVector<S, W>;
    using TV = AlignedVector<T, W>;
    return aligned_for<SV>(w) && aligned_for<TV>(g) && aligned_for<SV>(buf) && aligned_for<TV>(rounded);
  }
  __device__ SGDPointers advanced(int n) const {
    return {w + n, g + n, buf == nullptr ? nullptr : buf + n, rounded == nullptr ? nullptr : rounded + n};
  }
};

template <typename T>
__global__ void __launch_bounds__(kThreads)
    sgd_kernel(const __grid_constant__ TensorChunks<4> chunks, const SGDScalars<compute_t<T>> s) {
  using S = compute_t<T>;
  const Chunk c = chunk_of_block(chunks);
  const int i = c.tensor;
  S* const buf = static_cast<S*>(chunks.data[2][i]);
  const SGDPointers<T> pointers{static_cast<S*>(chunks.data[0][i]) + c.start,
                                static_cast<const T*>(chunks.data[1][i]) + c.start,
                                buf == nullptr ? nullptr : buf + c.start,
                                is_half_type<T> ? static_cast<T*>(chunks.data[3][i]) + c.start : nullptr};
  const bool reads_buf = s.has_momentum && !s.first_step;
  for_each_vector<kVecOf<T>>(pointers, c.count, [&](auto width, const SGDPointers<T>& p, int vectors) {
    constexpr int W = decltype(width)::value;
    using SV = AlignedVector<S, W>;
    using TV = AlignedVector<T, W>;
    for (int k = threadIdx.x; k < vectors; k += kThreads) {
      SV w = load<SV>(p.w, k);
      const TV g = load<TV>(p.g, k);
      SV b{};
      if (reads_buf) b = load<SV>(p.buf, k);
      TV rounded;
#pragma unroll
      for (int e = 0; e < W; ++e) {
        sgd_element(s, w.values[e], convert_element<S>(g.values[e]), b.values[e]);
        rounded.values[e] = convert_element<T>(w.values[e]);
      }
      store(p.w, k, w);
      if (s.has_momentum) store(p.buf, k, b);
      if constexpr (is_half_type<T>) store(p.rounded, k, rounded);
    }
  });
}

// ---- clip_grad_norm_: sum of squares, scaling ----

template <typename T>
struct OnePointer {
  T* x;
  template <int W>
  __device__ bool aligned() const {
    return is_aligned_for<AlignedVector<std::remove_const_t<T>, W>>(x);
  }
  __device__ OnePointer advanced(int n) const { return {x + n}; }
};

struct AddDoubles {
  __device__ double operator()(double a, double b) const { return a + b; }
};

// partials[first_block + block] = the sum of x^2 over the block's chunk, in double.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    sum_of_squares_kernel(const __grid_constant__ TensorChunks<1> chunks, double* partials, int64_t first_block) {
  __shared__ double warp_sums[kWarpSize];
  const Chunk c = chunk_of_block(chunks);
  const OnePointer<const T> pointers{static_cast<const T*>(chunks.data[0][c.tensor]) + c.start};
  double total = 0.0;
  for_each_vector<kElementsPer16Bytes<T>>(pointers, c.count, [&](auto width, const OnePointer<const T>& p, int vectors) {
    constexpr int W = decltype(width)::value;
    using V = AlignedVector<T, W>;
    for (int k = threadIdx.x; k < vectors; k += kThreads) {
      const V x = load<V>(p.x, k);
#pragma unroll
      for (int e = 0; e < W; ++e) {
        const double d = convert_element<double>(x.values[e]);
        total += d * d;
      }
    }
  });
  total = block_allreduce(total, AddDoubles{}, 0.0, warp_sums);
  if (threadIdx.x == 0) partials[first_block + blockIdx.x] = total;
}

// *out = the sum of the n partials, by one block in a fixed order.
__global__ void __launch_bounds__(kThreads) sum_partials_kernel(const double* partials, int64_t n, double* out) {
  __shared__ double warp_sums[kWarpSize];
  double total = 0.0;
  for (int64_t k = threadIdx.x; k < n; k += kThreads) total += partials[k];
  total = block_allreduce(total, AddDoubles{}, 0.0, warp_sums);
  if (threadIdx.x == 0) *out = total;
}

// x = x * factor in x's compute type, as Tensor::mul_ (MulScalar) computes it.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    scale_kernel(const __grid_constant__ TensorChunks<1> chunks, const compute_t<T> factor) {
  using S = compute_t<T>;
  const Chunk c = chunk_of_block(chunks);
  const OnePointer<T> pointers{static_cast<T*>(chunks.data[0][c.tensor]) + c.start};
  for_each_vector<kElementsPer16Bytes<T>>(pointers, c.count, [&](auto width, const OnePointer<T>& p, int vectors) {
    constexpr int W = decltype(width)::value;
    using V = AlignedVector<T, W>;
    for (int k = threadIdx.x; k < vectors; k += kThreads) {
      V x = load<V>(p.x, k);
#pragma unroll
      for (int e = 0; e < W; ++e) x.values[e] = convert_element<T>(mul_rn(convert_element<S>(x.values[e]), factor));
      store(p.x, k, x);
    }
  });
}

// ---- host side ----

// The checks every list shares: entry i of each list has tensor i's element count, lives on
// the first tensor's device and is contiguous; `dtype` where given. Internal errors: the
// caller (optim/optim.cpp) groups and prepares the tensors so.
void check_list(const char* op, const char* name, const std::vector<Tensor>& list, const std::vector<Tensor>& params,
                std::optional<DType> dtype) {
  MG_CHECK(list.size() == params.size(), "{} (CUDA): {} has {} tensors for {} parameters", op, name, list.size(),
           params.size());
  for (size_t i = 0; i < list.size(); ++i) {
    const Tensor& t = list[i];
    MG_CHECK(t.defined() && t.device() == params[0].device() && t.is_contiguous() && t.numel() == params[i].numel() &&
                 (!dtype || t.dtype() == *dtype),
             "{} (CUDA): {}[{}] must be a contiguous tensor of {} elements{} on {}", op, name, i, params[i].numel(),
             dtype ? fmt::format(" of {}", *dtype) : std::string(), params[0].device());
  }
}

// The device all of `params` live on (the first's), checked to be a CUDA device.
int device_of(const char* op, const std::vector<Tensor>& params) {
  MG_CHECK(params[0].device().is_cuda(), "{} (CUDA): the tensors are on {}", op, params[0].device());
  return params[0].device().index;
}

// w's dtype: float32 for the half types (their master copies), else the parameters' own.
DType state_dtype(DType param) { return is_half(param) ? kFloat32 : param; }

}  // namespace

void adamw_step(const std::vector<Tensor>& params, const std::vector<Tensor>& masters, const std::vector<Tensor>& grads,
                const std::vector<Tensor>& exp_avg, const std::vector<Tensor>& exp_avg_sq, const AdamWStep& step) {
  const char* op = "AdamW";
  if (params.empty()) return;
  const DType dtype = params[0].dtype();
  const DType state = state_dtype(dtype);
  check_list(op, "params", params, params, dtype);
  check_list(op, "grads", grads, params, dtype);
  check_list(op, "exp_avg", exp_avg, params, state);
  check_list(op, "exp_avg_sq", exp_avg_sq, params, state);
  if (is_half(dtype)) check_list(op, "masters", masters, params, kFloat32);
  DeviceGuard guard(device_of(op, params));
  const cudaStream_t stream = current_stream();
  dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    using S = compute_t<T>;
    const AdamWScalars<S> s{static_cast<S>(step.decay),         static_cast<S>(step.beta1),
                            static_cast<S>(1.0 - step.beta1),   static_cast<S>(step.beta2),
                            static_cast<S>(1.0 - step.beta2),   static_cast<S>(step.sqrt_bias_correction2),
                            static_cast<S>(step.eps),           static_cast<S>(-step.step_size)};
    // List 0 is w: the master copies of half parameters, else the parameters; list 4 the
    // half parameters that receive w rounded.
    const std::vector<Tensor>& w = is_half_type<T> ? masters : params;
    const std::vector<Tensor> none;
    const std::vector<Tensor>& rounded = is_half_type<T> ? params : none;
    for_each_launch<5>({&w, &grads, &exp_avg, &exp_avg_sq, &rounded}, [&](const TensorChunks<5>& chunks, int64_t) {
      adamw_kernel<T><<<chunks.chunks, kThreads, 0, stream>>>(chunks, s);
      MG_CUDA_CHECK_LAUNCH(op);
    });
  });
}

void sgd_step(const std::vector<Tensor>& params, const std::vector<Tensor>& masters, const std::vector<Tensor>& grads,
              const std::vector<Tensor>& momentum_buffers, const SGDStep& step) {
  const char* op = "SGD";
  if (params.empty()) return;
  const DType dtype = params[0].dtype();
  const DType state = state_dtype(dtype);
  const bool has_momentum = step.momentum != 0.0;
  check_list(op, "params", params, params, dtype);
  check_list(op, "grads", grads, params, dtype);
  if (has_momentum) check_list(op, "momentum_buffers", momentum_buffers, params, state);
  if (is_half(dtype)) check_list(op, "masters", masters, params, kFloat32);
  DeviceGuard guard(device_of(op, params));
  const cudaStream_t stream = current_stream();
  dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    using S = compute_t<T>;
    const SGDScalars<S> s{static_cast<S>(step.weight_decay), static_cast<S>(step.momentum),
                          static_cast<S>(1.0 - step.dampening), static_cast<S>(-step.lr),
                          step.weight_decay != 0.0, has_momentum, step.nesterov, step.first_step};
    const std::vector<Tensor>& w = is_half_type<T> ? masters : params;
    const std::vector<Tensor> none;
    const std::vector<Tensor>& buffers = has_momentum ? momentum_buffers : none;
    const std::vector<Tensor>& rounded = is_half_type<T> ? params : none;
    for_each_launch<4>({&w, &grads, &buffers, &rounded}, [&](const TensorChunks<4>& chunks, int64_t) {
      sgd_kernel<T><<<chunks.chunks, kThreads, 0, stream>>>(chunks, s);
      MG_CUDA_CHECK_LAUNCH(op);
    });
  });
}

Tensor sum_of_squares(const std::vector<Tensor>& tensors) {
  const char* op = "clip_grad_norm_";
  MG_CHECK(!tensors.empty(), "{} (CUDA): no tensors", op);
  const DType dtype = tensors[0].dtype();
  check_list(op, "grads", tensors, tensors, dtype);
  const Device device = tensors[0].device();
  DeviceGuard guard(device_of(op, tensors));
  const cudaStream_t stream = current_stream();
  const int64_t blocks = total_chunks(tensors);
  if (blocks == 0) return zeros(Shape{}, TensorOptions(kFloat64).device(device));  // only empty tensors
  const Tensor total = empty(Shape{}, TensorOptions(kFloat64).device(device));
  const Tensor partials = empty({blocks}, TensorOptions(kFloat64).device(device));
  double* partial_data = static_cast<double*>(partials.raw_data());
  dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    for_each_launch<1>({&tensors}, [&](const TensorChunks<1>& chunks, int64_t blocks_before) {
      sum_of_squares_kernel<T><<<chunks.chunks, kThreads, 0, stream>>>(chunks, partial_data, blocks_before);
      MG_CUDA_CHECK_LAUNCH(op);
    });
  });
  sum_partials_kernel<<<1, kThreads, 0, stream>>>(partial_data, blocks, static_cast<double*>(total.raw_data()));
  MG_CUDA_CHECK_LAUNCH(op);
  return total;
}

void scale_(const std::vector<Tensor>& tensors, double factor) {
  const char* op = "clip_grad_norm_";
  if (tensors.empty()) return;
  const DType dtype = tensors[0].dtype();
  check_list(op, "grads", tensors, tensors, dtype);
  DeviceGuard guard(device_of(op, tensors));
  const cudaStream_t stream = current_stream();
  dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    using S = compute_t<T>;
    for_each_launch<1>({&tensors}, [&](const TensorChunks<1>& chunks, int64_t) {
      scale_kernel<T><<<chunks.chunks, kThreads, 0, stream>>>(chunks, static_cast<S>(factor));
      MG_CUDA_CHECK_LAUNCH(op);
    });
  });
}

}  // namespace cuda
}  // namespace minigrad
