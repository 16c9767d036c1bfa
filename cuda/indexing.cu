// The indexing ops on the GPU: gather (and index_select, an expanded gather), scatter and
// scatter_add (and index_add, and the backward of gather, index_select and embedding), the
// index bounds check, topk's order, and multinomial's draws. ops/indexing.cpp holds the CPU
// loops these must agree with, and the rules both follow are in kernels/indexing.h.
//
// scatter without atomics. Each thread owns one output element and walks the index
// positions that can reach it: those with its coordinates off `dim` and any coordinate
// along dim (index.size(dim) of them), adding (or, for scatter, keeping the last of) the
// sources whose index names its coordinate along dim. The terms come in the order the CPU
// loop visits them, so the sums are deterministic and the same bits on both devices, where
// float atomics would add in whatever order the threads arrive. The price is reading
// index.size(dim) index values per output element: nothing for a gather's backward along a
// short dim, and reads that hit the cache for index_add and embedding (every thread of an
// output row reads the same index values). For long scatters along one dim (index.size(dim)
// in the tens of thousands), a stable sort of the destinations (CUB's radix sort) followed
// by one pass over the runs of equal destinations would do the same work in n log n.
//
// topk sorts each row in the order of kernels/indexing.h with a bitonic network in global
// memory, one launch per stage (log2(n)^2 / 2 of them for a row padded to n, a power of
// two), and keeps the first k positions: short, any row length, and every launch is a plain
// compare-and-swap of pairs. The values are gathered afterwards by ops/indexing.cpp.
#include <algorithm>
#include <climits>
#include <limits>
#include <type_traits>

#include <minigrad/core/dispatch.h>
#include <minigrad/core/shape.h>
#include <minigrad/cuda/block_reduce.cuh>
#include <minigrad/cuda/convert.cuh>
#include <minigrad/cuda/indexing.h>
#include <minigrad/cuda/runtime.h>
#include <minigrad/cuda/strided_layout.cuh>
#include <minigrad/kernels/indexing.h>

namespace minigrad {
namespace cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = int64_t{1} << 16;  // a grid-stride loop beyond that

unsigned int blocks_for(int64_t n) {
  return static_cast<unsigned int>(std::max<int64_t>(1, std::min((n + kThreads - 1) / kThreads, kMaxBlocks)));
}

#define MG_GRID_STRIDE_LOOP(i, n)                                                                   \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n);            \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

// Data movement only needs the element's bytes: gather and scatter's writes run on the
// unsigned integer of the element's size (4 instantiations instead of 6 dtypes).
template <typename F>
void dispatch_by_size(size_t element_size, F&& f) {
  switch (element_size) {
    case 1: f(uint8_t{}); return;
    case 2: f(uint16_t{}); return;
    case 4: f(uint32_t{}); return;
    case 8: f(uint64_t{}); return;
    default: MG_CHECK(false, "indexing: no CUDA kernel for elements of {} bytes", element_size);
  }
}

// ---- the bounds check ----

__global__ void __launch_bounds__(kThreads)
    index_min_max_kernel(const int64_t* index, StridedLayout<1> layout, int64_t n, long long* range) {
  long long lo = LLONG_MAX, hi = LLONG_MIN;
  MG_GRID_STRIDE_LOOP(i, n) {
    int64_t off[1];
    layout.offsets(i, off);
    const long long v = index[off[0]];
    lo = v < lo ? v : lo;
    hi = v > hi ? v : hi;
  }
  // Integer minima and maxima do not depend on the order they are taken in.
  lo = warp_allreduce(lo, [](long long a, long long b) { return a < b ? a : b; });
  hi = warp_allreduce(hi, [](long long a, long long b) { return a > b ? a : b; });
  if (threadIdx.x % kWarpSize == 0) {
    atomicMin(&range[0], lo);
    atomicMax(&range[1], hi);
  }
}

// ---- gather ----

template <typename E>
__global__ void __launch_bounds__(kThreads) gather_kernel(E* out, const E* x, const int64_t* index,
                                                          StridedLayout<3> layout, int64_t x_dim_stride, int64_t n) {
  MG_GRID_STRIDE_LOOP(i, n) {
    int64_t off[3];  // out, index, x at coordinate 0 along dim
    layout.offsets(i, off);
    out[off[0]] = x[off[2] + index[off[1]] * x_dim_stride];
  }
}

// ---- scatter ----

// Where one output element's candidate sources are. Indexed without merging dims: the
// coordinates themselves are compared with the index's sizes and values.
struct ScatterGeometry {
  int ndim = 0;
  int dim = 0;
  IndexDivisor sizes[kMaxDims];        // self's and out's
  int64_t index_sizes[kMaxDims] = {};  // no larger than sizes off dim (checked by the op)
  int64_t self_strides[kMaxDims] = {};
  int64_t index_strides[kMaxDims] = {};
  int64_t src_strides[kMaxDims] = {};
};

// Elem: the element type (for writes, the unsigned integer of its size); acc_t: what adds
// run in (kernels/indexing.h), unused when kAccumulate is false.
template <typename Elem, typename acc_t, bool kAccumulate>
__global__ void __launch_bounds__(kThreads) scatter_kernel(Elem* out, const Elem* self, const int64_t* index,
                                                           const Elem* src, ScatterGeometry g, int64_t n) {
  MG_GRID_STRIDE_LOOP(o, n) {
    int64_t coord[kMaxDims];
    int64_t rest = o;
    for (int d = g.ndim - 1; d >= 0; --d) {
      const auto [quotient, remainder] = g.sizes[d].divide_with_remainder(rest);
      coord[d] = remainder;
      rest = quotient;
    }
    int64_t self_off = 0, index_off = 0, src_off = 0;
    bool reachable = true;  // the index has positions with this element's coordinates off dim
    for (int d = 0; d < g.ndim; ++d) {
      self_off += coord[d] * g.self_strides[d];
      if (d == g.dim) continue;
      reachable = reachable && coord[d] < g.index_sizes[d];
      index_off += coord[d] * g.index_strides[d];
      src_off += coord[d] * g.src_strides[d];
    }
    const Elem start = self[self_off];
    if (!reachable) {
      out[o] = start;
      continue;
    }
    const int64_t target = coord[g.dim];
    const int64_t along = g.index_sizes[g.dim];
    const int64_t index_step = g.index_strides[g.dim];
    const int64_t src_step = g.src_strides[g.dim];
    if constexpr (kAccumulate) {
      acc_t acc = convert_element<acc_t>(start);
      for (int64_t j = 0; j < along; ++j)
        if (index[index_off + j * index_step] == target) acc += convert_element<acc_t>(src[src_off + j * src_step]);
      out[o] = convert_element<Elem>(acc);
    } else {
      Elem value = start;
      for (int64_t j = 0; j < along; ++j)
        if (index[index_off + j * index_step] == target) value = src[src_off + j * src_step];
      out[o] = value;
    }
  }
}

// ---- topk ----

// What topk compares in: float for the float types, double, int64.
template <typename T>
using topk_key_t = std::conditional_t<std::is_same_v<T, double> || std::is_same_v<T, int64_t>, T, float>;

// topk's order on a padded row: positions at n and beyond are padding, after everything.
template <typename K>
__device__ __forceinline__ bool padded_precedes(K a, int64_t ia, K b, int64_t ib, int64_t n, bool largest) {
  if (ia >= n || ib >= n) return ia < ib;
  return indexing::topk_precedes(a, ia, b, ib, largest);
}

template <typename T, typename K>
__global__ void __launch_bounds__(kThreads)
    topk_load_kernel(const T* rows, K* keys, int64_t* positions, int64_t n, int64_t padded, int64_t total) {
  MG_GRID_STRIDE_LOOP(t, total) {
    const int64_t r = t / padded;
    const int64_t i = t - r * padded;
    keys[t] = i < n ? convert_element<K>(rows[r * n + i]) : K(0);
    positions[t] = i;
  }
}

// One stage of the bitonic network: within blocks of `block` elements, alternately sorted
// forward and backward, compare each element with the one `distance` away.
template <typename K>
__global__ void __launch_bounds__(kThreads) topk_bitonic_kernel(K* keys, int64_t* positions, int64_t n,
                                                                int64_t padded, int64_t block, int64_t distance,
                                                                bool largest, int64_t total) {
  MG_GRID_STRIDE_LOOP(t, total) {
    const int64_t i = t % padded;
    const int64_t partner = i ^ distance;
    if (partner <= i) continue;
    const int64_t a = t, b = t - i + partner;
    const bool forward = (i & block) == 0;
    const bool b_first = padded_precedes(keys[b], positions[b], keys[a], positions[a], n, largest);
    if (forward == b_first) {
      const K key = keys[a];
      keys[a] = keys[b];
      keys[b] = key;
      const int64_t position = positions[a];
      positions[a] = positions[b];
      positions[b] = position;
    }
  }
}

__global__ void __launch_bounds__(kThreads)
    topk_store_kernel(const int64_t* positions, int64_t* indices, int64_t padded, int64_t k, int64_t total) {
  MG_GRID_STRIDE_LOOP(t, total) {
    const int64_t r = t / k;
    indices[t] = positions[r * padded + (t - r * k)];
  }
}

// ---- multinomial ----

template <typename T>
__global__ void __launch_bounds__(kThreads) multinomial_scan_kernel(const T* probs, int64_t row_stride,
                                                                    int64_t col_stride, int64_t rows, int64_t n,
                                                                    double* cdf, int64_t* status) {
  MG_GRID_STRIDE_LOOP(r, rows) {
    const indexing::RowScan scan = indexing::scan_probabilities(probs + r * row_stride, col_stride, n, cdf + r * n);
    status[2 * r] = static_cast<int64_t>(scan.status);
    status[2 * r + 1] = scan.nonzero;
  }
}

__global__ void __launch_bounds__(kThreads) multinomial_draw_kernel(const double* cdf, int64_t n, int64_t samples,
                                                                    uint64_t seed, uint64_t offset, int64_t* out,
                                                                    int64_t total) {
  MG_GRID_STRIDE_LOOP(t, total) {
    const int64_t r = t / samples;
    const double u = random_values::uniform<double>(seed, offset, static_cast<uint64_t>(t));
    out[t] = indexing::pick_category(cdf + r * n, n, u);
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    multinomial_keys_kernel(const T* probs, int64_t row_stride, int64_t col_stride, int64_t n, uint64_t seed,
                            uint64_t offset, double* keys, int64_t total) {
  MG_GRID_STRIDE_LOOP(t, total) {
    const int64_t r = t / n;
    const int64_t i = t - r * n;
    const double p = convert_element<double>(probs[r * row_stride + i * col_stride]);
    keys[t] = indexing::race_key(p, seed, offset, static_cast<uint64_t>(t));
  }
}

}  // namespace

void index_min_max(const Tensor& index, int64_t& min, int64_t& max) {
  DeviceGuard guard(index.device().index);
  const int64_t n = index.numel();
  MG_CHECK(n > 0, "index_min_max: the index is empty");
  Tensor range = from_vector<int64_t>({std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()},
                                      {2})
                     .to(index.device());
  const auto layout = make_strided_layout<1>(index.sizes(), {index.strides().data()}, "index bounds check");
  index_min_max_kernel<<<blocks_for(n), kThreads, 0, current_stream()>>>(
      index.data_ptr<int64_t>(), layout, n, reinterpret_cast<long long*>(range.raw_data()));
  MG_CUDA_CHECK_LAUNCH("index bounds check");
  const std::vector<int64_t> values = range.to_vector<int64_t>();  // synchronizes
  min = values[0];
  max = values[1];
}

void gather(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& out) {
  const int64_t n = out.numel();
  if (n == 0) return;
  DeviceGuard guard(out.device().index);
  Shape x_strides = x.strides();
  x_strides[static_cast<size_t>(dim)] = 0;  // the index supplies the coordinate along dim
  const auto layout = make_strided_layout<3>(
      index.sizes(), {out.strides().data(), index.strides().data(), x_strides.data()}, "gather");
  dispatch_by_size(x.element_size(), [&](auto tag) {
    using E = decltype(tag);
    gather_kernel<E><<<blocks_for(n), kThreads, 0, current_stream()>>>(
        static_cast<E*>(out.raw_data()), static_cast<const E*>(x.raw_data()), index.data_ptr<int64_t>(), layout,
        x.stride(dim), n);
    MG_CUDA_CHECK_LAUNCH("gather");
  });
}

void scatter(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src, bool accumulate,
             const Tensor& out) {
  const char* op = accumulate ? "scatter_add" : "scatter";
  const int64_t n = out.numel();
  if (n == 0) return;
  MG_CHECK(self.dim() <= kMaxDims, "{}: the CUDA kernel takes at most {} dims, got {}", op, kMaxDims, self.dim());
  DeviceGuard guard(out.device().index);
  ScatterGeometry g;
  g.ndim = static_cast<int>(self.dim());
  g.dim = static_cast<int>(dim);
  for (int d = 0; d < g.ndim; ++d) {
    g.sizes[d] = IndexDivisor(self.size(d));
    g.index_sizes[d] = index.size(d);
    g.self_strides[d] = self.stride(d);
    g.index_strides[d] = index.stride(d);
    g.src_strides[d] = src.stride(d);
  }
  const cudaStream_t stream = current_stream();
  const int64_t* index_data = index.data_ptr<int64_t>();
  if (!accumulate) {
    dispatch_by_size(self.element_size(), [&](auto tag) {
      using E = decltype(tag);
      scatter_kernel<E, E, false><<<blocks_for(n), kThreads, 0, stream>>>(
          static_cast<E*>(out.raw_data()), static_cast<const E*>(self.raw_data()), index_data,
          static_cast<const E*>(src.raw_data()), g, n);
      MG_CUDA_CHECK_LAUNCH(op);
    });
    return;
  }
  dispatch_all(self.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      MG_CHECK(false, "scatter_add: no kernel for bool");
    } else {
      using acc_t = typename indexing::ScatterAccumulator<T>::type;
      scatter_kernel<T, acc_t, true><<<blocks_for(n), kThreads, 0, stream>>>(
          static_cast<T*>(out.raw_data()), static_cast<const T*>(self.raw_data()), index_data,
          static_cast<const T*>(src.raw_data()), g, n);
      MG_CUDA_CHECK_LAUNCH(op);
    }
  });
}

void topk_indices(const Tensor& rows, int64_t k, bool largest, const Tensor& indices) {
  const int64_t row_count = rows.size(0);
  const int64_t n = rows.size(1);
  if (row_count == 0 || k == 0) return;
  DeviceGuard guard(rows.device().index);
  const cudaStream_t stream = current_stream();
  int64_t padded = 1;
  while (padded < n) padded *= 2;
  const int64_t total = row_count * padded;
  Tensor positions = empty({row_count, padded}, TensorOptions(kInt64).device(rows.device()));
  int64_t* pos = positions.data_ptr<int64_t>();
  dispatch_all(rows.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      MG_CHECK(false, "topk: no kernel for bool");
    } else {
      using K = topk_key_t<T>;
      Tensor keys = empty({row_count, padded}, TensorOptions(dtype_of<K>::value).device(rows.device()));
      K* key = static_cast<K*>(keys.raw_data());
      topk_load_kernel<T, K><<<blocks_for(total), kThreads, 0, stream>>>(static_cast<const T*>(rows.raw_data()),
                                                                         key, pos, n, padded, total);
      MG_CUDA_CHECK_LAUNCH("topk");
      for (int64_t block = 2; block <= padded; block *= 2) {
        for (int64_t distance = block / 2; distance > 0; distance /= 2) {
          topk_bitonic_kernel<K><<<blocks_for(total), kThreads, 0, stream>>>(key, pos, n, padded, block, distance,
                                                                             largest, total);
          MG_CUDA_CHECK_LAUNCH("topk");
        }
      }
    }
  });
  const int64_t out_total = row_count * k;
  topk_store_kernel<<<blocks_for(out_total), kThreads, 0, stream>>>(pos, indices.data_ptr<int64_t>(), padded, k,
                                                                    out_total);
  MG_CUDA_CHECK_LAUNCH("topk");
}

void multinomial_scan(const Tensor& probs, const Tensor& cdf, const Tensor& status) {
  const int64_t rows = probs.size(0);
  if (rows == 0) return;
  DeviceGuard guard(probs.device().index);
  dispatch_floating(probs.dtype(), [&](auto tag) {
    using T = decltype(tag);
    multinomial_scan_kernel<T><<<blocks_for(rows), kThreads, 0, current_stream()>>>(
        static_cast<const T*>(probs.raw_data()), probs.stride(0), probs.stride(1), rows, probs.size(1),
        cdf.data_ptr<double>(), status.data_ptr<int64_t>());
    MG_CUDA_CHECK_LAUNCH("multinomial");
  });
}

void multinomial_with_replacement(const Tensor& cdf, uint64_t seed, uint64_t offset, const Tensor& out) {
  const int64_t total = out.numel();
  if (total == 0) return;
  DeviceGuard guard(out.device().index);
  multinomial_draw_kernel<<<blocks_for(total), kThreads, 0, current_stream()>>>(
      cdf.data_ptr<double>(), cdf.size(1), out.size(1), seed, offset, out.data_ptr<int64_t>(), total);
  MG_CUDA_CHECK_LAUNCH("multinomial");
}

void multinomial_race_keys(const Tensor& probs, uint64_t seed, uint64_t offset, const Tensor& keys) {
  const int64_t total = keys.numel();
  if (total == 0) return;
  DeviceGuard guard(keys.device().index);
  dispatch_floating(probs.dtype(), [&](auto tag) {
    using T = decltype(tag);
    multinomial_keys_kernel<T><<<blocks_for(total), kThreads, 0, current_stream()>>>(
        static_cast<const T*>(probs.raw_data()), probs.stride(0), probs.stride(1), probs.size(1), seed, offset,
        keys.data_ptr<double>(), total);
    MG_CUDA_CHECK_LAUNCH("multinomial");
  });
}

}  // namespace cuda
}  // namespace minigrad
