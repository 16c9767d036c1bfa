// linear_gelu's backward up to its GEMMs: d_pre = grad * gelu'(pre), and the bias gradient
// db = d_pre summed over the rows, in one pass over grad and pre.
//
// Why it exists. The backward needs d_pre for both of its GEMMs (dx = d_pre W, dW = d_pre^T x)
// and db as well. cuBLASLt can sum db in an epilogue of dW's GEMM (its bias-gradient epilogue),
// but that makes the GEMM slower than the sum costs here, where the elementwise pass that
// computes d_pre reads and writes every element anyway: adding each value to a running sum in
// a register costs next to nothing beside the memory traffic. dW's GEMM then runs without an
// epilogue.
//
// The values. Each element is the elementwise gelu_backward's (the functors
// elementwise::GeluExactBackward and GeluTanhBackward of kernels/elementwise_functors.h, in
// compute_t<T>: float for the half types, double for double), rounded to T once at the store,
// so d_pre has the bits that gelu_backward gives. db sums the values before that rounding.
//
// The shape of the work. Thread t of block (x, y) owns one 16-byte vector of columns, k = x *
// blockDim.x + t, and walks the rows of chunk y (RowOrder below): it reads grad's and pre's
// vector k of each row (four rows' loads issued before the first is used), writes d_pre's, and
// adds the values into its columns' sums, held in registers. At the end it writes them as row y
// of the [chunks, n] partials, and a second kernel (cuda/column_sums.cuh) adds the chunks up in
// a fixed order. No float atomics: db has the same bits on every run. The chunks are sized so
// that the whole grid is one wave, as many blocks as the SMs hold at once (a second wave would
// run partly empty), and at least kMinRowsPerChunk rows each, so that the partials are a small
// part of the traffic.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>

#include <minigrad/core/dispatch.h>
#include <minigrad/core/shape.h>
#include <minigrad/cuda/block_reduce.cuh>
#include <minigrad/cuda/column_sums.cuh>
#include <minigrad/cuda/convert.cuh>
#include <minigrad/cuda/gelu_bias_backward.h>
#include <minigrad/cuda/launch.cuh>
#include <minigrad/cuda/runtime.h>
#include <minigrad/cuda/vector.cuh>
#include <minigrad/kernels/elementwise_functors.h>

namespace minigrad {
namespace cuda {
namespace {

constexpr const char* kOp = "linear_gelu";

constexpr int kColumnThreads = 256;  // threads a block, at most: one vector of columns each
constexpr int kRowUnroll = 4;        // rows whose loads a thread has in flight at once
// A chunk's partials are one float (a double for float64) a column, written once and read
// once, where its rows move three elements a column each (grad, pre, d_pre): at 32 rows or more
// a chunk, the partials stay a few percent of the traffic.
constexpr int64_t kMinRowsPerChunk = 32;
constexpr int64_t kMaxGridY = 65535;   // the hardware's limit on gridDim.y

// sum + v as an addition of its own, rounded: never fused with the multiply that produced v
// into one fma (which would add the product before its rounding), so the sums add exactly the
// values that d_pre is rounded from.
__device__ __forceinline__ float add_rounded(float sum, float v) { return __fadd_rn(sum, v); }
__device__ __forceinline__ double add_rounded(double sum, double v) { return __dadd_rn(sum, v); }

// One vector of one row: d_pre's elements from grad's and pre's, written to *out, and their
// values added to the column sums.
template <typename T, typename Backward, int kVec>
__device__ __forceinline__ void backward_vector(const AlignedVector<T, kVec>& grad, const AlignedVector<T, kVec>& pre,
                                                AlignedVector<T, kVec>* out, compute_t<T> (&sums)[kVec]) {
  using acc_t = compute_t<T>;
  acc_t g[kVec], x[kVec];
  convert_vector(grad, g);
  convert_vector(pre, x);
  AlignedVector<T, kVec> result;
#pragma unroll
  for (int e = 0; e < kVec; ++e) {
    const acc_t d = Backward{}(g[e], x[e]);
    result.values[e] = convert_element<T>(d);
    sums[e] = add_rounded(sums[e], d);
  }
  *out = result;
}

// Which rows chunk y of `chunks` takes. Contiguous: rows [y * rows_per_chunk, (y + 1) *
// rows_per_chunk). Interleaved: rows y, y + chunks, y + 2 chunks, ..., so that the chunks at
// work at one time read and write neighbouring rows, and the grid sweeps the tensors in address
// order, as a grid of one-shot blocks does, where contiguous chunks have each resident block
// reading its own region far from the others' (bench/experiments/gelu_bias_shapes.cu times both).
enum class RowOrder { Contiguous, Interleaved };

// Column vector k over the rows of chunk blockIdx.y (see the top of the file); row y of partials
// gets the chunk's sums.
template <typename T, typename Backward, int kVec, RowOrder kOrder>
__global__ void __launch_bounds__(kColumnThreads)
    gelu_backward_bias_kernel(const T* __restrict__ grad, const T* __restrict__ pre, T* __restrict__ d_pre,
                              compute_t<T>* __restrict__ partials, int64_t rows, int64_t n, int64_t rows_per_chunk) {
  using acc_t = compute_t<T>;
  using Vector = AlignedVector<T, kVec>;
  const int64_t vectors = n / kVec;
  const int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= vectors) return;
  // The chunk's j-th row is first + j * step, for j < count.
  const int64_t chunk = blockIdx.y, chunks = gridDim.y;
  constexpr bool kInterleaved = kOrder == RowOrder::Interleaved;
  const int64_t first = kInterleaved ? chunk : chunk * rows_per_chunk;
  const int64_t step = kInterleaved ? chunks : 1;
  const int64_t count = kInterleaved ? (rows - chunk + chunks - 1) / chunks
                                     : (rows - first < rows_per_chunk ? rows - first : rows_per_chunk);
  // Vector k of row r is element r * vectors of each of these; a row further is `stride` on.
  const int64_t stride = step * vectors;
  const Vector* grad_k = reinterpret_cast<const Vector*>(grad) + first * vectors + k;
  const Vector* pre_k = reinterpret_cast<const Vector*>(pre) + first * vectors + k;
  Vector* d_pre_k = reinterpret_cast<Vector*>(d_pre) + first * vectors + k;
  acc_t sums[kVec] = {};
  int64_t j = 0;
  for (; j + kRowUnroll <= count; j += kRowUnroll) {
    Vector g[kRowUnroll], x[kRowUnroll];
#pragma unroll
    for (int i = 0; i < kRowUnroll; ++i) {
      g[i] = grad_k[(j + i) * stride];
      x[i] = pre_k[(j + i) * stride];
    }
#pragma unroll
    for (int i = 0; i < kRowUnroll; ++i)
      backward_vector<T, Backward, kVec>(g[i], x[i], d_pre_k + (j + i) * stride, sums);
  }
  for (; j < count; ++j)
    backward_vector<T, Backward, kVec>(grad_k[j * stride], pre_k[j * stride], d_pre_k + j * stride, sums);
  acc_t* chunk_partials = partials + chunk * n + k * kVec;
#pragma unroll
  for (int e = 0; e < kVec; ++e) chunk_partials[e] = sums[e];
}

// Calls f(functor) with the elementwise functor of gelu' for the approximation.
template <typename F>
void with_gelu_backward(GeluApproximation approximate, F&& f) {
  if (approximate == GeluApproximation::Tanh)
    f(elementwise::GeluTanhBackward{});
  else
    f(elementwise::GeluExactBackward{});
}

// The launches for checked tensors, the chunks' rows in kOrder (the library's choice by default;
// bench/experiments/gelu_bias_shapes.cu times the others). Returns false where the rows are not
// 16-byte vectors.
template <RowOrder kOrder = RowOrder::Interleaved>
bool backward_and_bias_rows(const Tensor& grad, const Tensor& pre, GeluApproximation approximate, const Tensor& d_pre,
                            const Tensor& d_bias) {
  const int64_t rows = pre.size(0);
  const int64_t n = pre.size(1);
  bool done = false;
  dispatch_floating(pre.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using acc_t = compute_t<T>;
    constexpr int kVec = kElementsPer16Bytes<T>;
    using Vector = AlignedVector<T, kVec>;
    // Every row read and written as whole vectors (d_bias is written one element at a time).
    if (n % kVec != 0) return;
    for (const Tensor* t : {&grad, &pre, &d_pre})
      if (!is_aligned_for<Vector>(t->raw_data())) return;
    done = true;
    if (n == 0) return;
    DeviceGuard guard(pre.device().index);
    const cudaStream_t stream = current_stream();
    T* const bias_out = static_cast<T*>(d_bias.raw_data());
    if (rows == 0) {  // a sum of no rows
      MG_CUDA_CHECK(cudaMemsetAsync(bias_out, 0, static_cast<size_t>(n) * sizeof(T), stream), kOp);
      return;
    }
    const int64_t vectors = n / kVec;
    // Whole warps, no more than a row's vectors need.
    const int threads =
        static_cast<int>(std::min<int64_t>(kColumnThreads, (vectors + kWarpSize - 1) / kWarpSize * kWarpSize));
    const int64_t column_blocks = (vectors + threads - 1) / threads;
    MG_CHECK(column_blocks <= std::numeric_limits<int32_t>::max(), "{}: rows of {} elements exceed the CUDA grid",
             kOp, n);
    Tensor partials;
    int64_t chunks = 0;
    with_gelu_backward(approximate, [&](auto backward) {
      const auto kernel = gelu_backward_bias_kernel<T, decltype(backward), kVec, kOrder>;
      // One wave: as many blocks as the SMs hold at once, in chunks of at least
      // kMinRowsPerChunk rows, and no more chunks than gridDim.y allows.
      const int64_t wanted_chunks = std::max<int64_t>(1, blocks_per_wave(kernel, threads, kOp) / column_blocks);
      const int64_t rows_per_chunk = std::max({(rows + wanted_chunks - 1) / wanted_chunks, kMinRowsPerChunk,
                                               (rows + kMaxGridY - 1) / kMaxGridY});
      chunks = (rows + rows_per_chunk - 1) / rows_per_chunk;
      const DType partials_dtype = std::is_same_v<T, double> ? kFloat64 : kFloat32;
      partials = empty({chunks, n}, TensorOptions(partials_dtype).device(pre.device()));
      kernel<<<dim3(static_cast<unsigned int>(column_blocks), static_cast<unsigned int>(chunks)), threads, 0, stream>>>(
          static_cast<const T*>(grad.raw_data()), static_cast<const T*>(pre.raw_data()),
          static_cast<T*>(d_pre.raw_data()), static_cast<acc_t*>(partials.raw_data()), rows, n, rows_per_chunk);
    });
    MG_CUDA_CHECK_LAUNCH(kOp);
    sum_column_partials(static_cast<const acc_t*>(partials.raw_data()), chunks, n, bias_out, stream);
    MG_CUDA_CHECK_LAUNCH(kOp);
  });
  return done;
}

}  // namespace

bool gelu_backward_and_bias_grad(const Tensor& grad, const Tensor& pre, GeluApproximation approximate,
                                 const Tensor& d_pre, const Tensor& d_bias) {
  MG_CHECK(pre.dim() == 2 && grad.sizes() == pre.sizes() && d_pre.sizes() == pre.sizes() && d_bias.dim() == 1 &&
               d_bias.size(0) == pre.size(1),
           "{}: gelu_backward_and_bias_grad takes grad, pre, d_pre [rows, n] and d_bias [n], got {}, {}, {} and {}",
           kOp, shape_str(grad.sizes()), shape_str(pre.sizes()), shape_str(d_pre.sizes()), shape_str(d_bias.sizes()));
  MG_CHECK(grad.dtype() == pre.dtype() && d_pre.dtype() == pre.dtype() && d_bias.dtype() == pre.dtype(),
           "{}: gelu_backward_and_bias_grad takes tensors of one dtype", kOp);
  MG_CHECK(pre.device().is_cuda() && grad.device() == pre.device() && d_pre.device() == pre.device() &&
               d_bias.device() == pre.device(),
           "{}: gelu_backward_and_bias_grad takes tensors on one GPU", kOp);
  MG_CHECK(grad.is_contiguous() && pre.is_contiguous() && d_pre.is_contiguous() && d_bias.is_contiguous(),
           "{}: gelu_backward_and_bias_grad takes contiguous tensors", kOp);
  return backward_and_bias_rows(grad, pre, approximate, d_pre, d_bias);
}

}  // namespace cuda
}  // namespace minigrad
