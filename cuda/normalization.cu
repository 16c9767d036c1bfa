// The row normalizations (layer_norm, rms_norm, layer_norm_gelu) on contiguous rows of
// `n` elements, forward and backward. One kernel family: the norm kind and the epilogue
// are template parameters, the per-element formulas those of kernels/normalization.h, which
// the CPU loops (ops/normalization.cpp) call too. Statistics and sums in compute_t<T>
// (float for the float types, double for double).
//
// Forward (mean, then the squared deviations from it, then the output: two reductions and
// no cancellation when the mean is large against the spread):
//  - rows of up to 8192 elements are held in registers, as the softmax rows are
//    (cuda/row_kernels.cuh): x read once, y written once. weight and bias are read per
//    thread for its columns (tiny, and in L1/L2 for every row after the first).
//  - longer rows, and rows whose length or pointers rule out 16-byte vectors: a block per
//    row, three passes over the row. Rows of 16-byte vectors that fit shared memory twice an SM
//    (bfloat16 rows of up to about 56000 elements on sm_90) are staged there first, read from
//    memory once; the others read the row three times (the second and third from L2).
// Backward (one kernel for dx and the dweight/dbias partials, then a small reduction):
//  - each block owns rows blockIdx.x, blockIdx.x + gridDim.x, ... (a few blocks per SM)
//    and each thread the same columns in every row. Rows up to 8192 elements keep xhat and
//    dxhat in registers from the row's two sums to the writing of dx (x and grad read
//    once), and a thread sums dz * xhat and dz for its columns over its block's rows in
//    registers too; its columns of weight and bias are staged once, in compute_t<T>, in
//    shared memory (StagedAffine), not read again at every row. Longer rows (and rows that
//    rule out 16-byte vectors) read the row again for dx (from L2), and a second kernel reads
//    x and grad once more for the partials, by columns (affine_gradient_columns_kernel).
//  - the partials, [blocks, n], are summed over the blocks in a fixed order
//    (cuda/column_sums.cuh): dweight and dbias have the same bits on every run (no atomics).
#include <algorithm>
#include <cmath>
#include <type_traits>

#include <minigrad/core/dispatch.h>
#include <minigrad/cuda/block_reduce.cuh>
#include <minigrad/cuda/column_sums.cuh>
#include <minigrad/cuda/convert.cuh>
#include <minigrad/cuda/launch.cuh>
#include <minigrad/cuda/normalization.h>
#include <minigrad/cuda/row_kernels.cuh>
#include <minigrad/cuda/runtime.h>
#include <minigrad/cuda/vector.cuh>
#include <minigrad/kernels/elementwise_functors.h>  // compute_t: the half types in float, the others as themselves
#include <minigrad/kernels/normalization.h>

namespace minigrad {
namespace cuda {
namespace {

using normalization::Epilogue;
using normalization::NormKind;

// The backward's register path: at most 16 elements a thread, each with four values in
// registers (xhat, dxhat and the dweight/dbias sums: 64 registers in float), up to 512
// threads a row: rows of up to 8192 elements.
constexpr int kBackwardElementsPerThread = 16;
constexpr int kBackwardMaxThreads = 512;
constexpr int64_t kBackwardMaxRegisterRow = int64_t{kBackwardElementsPerThread} * kBackwardMaxThreads;
constexpr int kBackwardTargetThreads = 256;

template <typename T>
struct ForwardArgs {
  const T* x;
  const T* weight;  // null: 1
  const T* bias;    // null: 0
  T* y;
  compute_t<T>* mean;  // null for rms_norm
  compute_t<T>* rstd;
  int64_t rows;
  int64_t n;
  compute_t<T> eps;
};

template <typename T>
struct BackwardArgs {
  const T* grad;
  const T* x;
  const T* weight;
  const T* bias;
  const compute_t<T>* mean;  // null for rms_norm
  const compute_t<T>* rstd;
  T* grad_input;                    // null: not wanted
  compute_t<T>* weight_partials;    // [gridDim.x, n], null: no dweight/dbias wanted
  compute_t<T>* bias_partials;
  int64_t rows;
  int64_t n;
};

// Elements e of vector k of a row of weight or bias (as acc_t), or `fallback` where absent.
template <typename acc_t, typename T, int kVec>
__device__ __forceinline__ void load_affine(const T* p, int64_t k, acc_t fallback, acc_t (&out)[kVec]) {
  if (p == nullptr) {
#pragma unroll
    for (int e = 0; e < kVec; ++e) out[e] = fallback;
    return;
  }
  convert_vector(reinterpret_cast<const AlignedVector<T, kVec>*>(p)[k], out);
}

// ---- forward ----

// A row in registers, held by a warp (kWarpPerRow) or by the block; thread t holds the
// row's vectors t, t + threads_per_row, ... (kVectorsPerThread of them).
template <typename T, NormKind kKind, Epilogue kEpilogue, int kVec, int kVectorsPerThread, bool kWarpPerRow>
__global__ void normalization_rows_kernel(ForwardArgs<T> a) {
  using acc_t = compute_t<T>;
  using Vector = AlignedVector<T, kVec>;
  __shared__ acc_t mean_partials[kWarpSize];
  __shared__ acc_t square_partials[kWarpSize];
  const RowThread<kWarpPerRow> me;
  if (me.row >= a.rows) return;  // a whole warp: the combines see all threads of a row
  const Vector* in = reinterpret_cast<const Vector*>(a.x + me.row * a.n);
  Vector* out = reinterpret_cast<Vector*>(a.y + me.row * a.n);
  const int64_t vectors = a.n / kVec;

  acc_t v[kVectorsPerThread][kVec];
  acc_t sum = 0;
#pragma unroll
  for (int j = 0; j < kVectorsPerThread; ++j) {
    const int64_t k = static_cast<int64_t>(j) * me.threads_per_row + me.thread;
    if (k < vectors) {
      convert_vector(in[k], v[j]);
#pragma unroll
      for (int e = 0; e < kVec; ++e) sum += v[j][e];
    }
  }
  acc_t mean = 0;
  if constexpr (kKind == NormKind::Layer)
    mean = row_allreduce<kWarpPerRow>(sum, Plus{}, acc_t(0), mean_partials) / static_cast<acc_t>(a.n);
  // v becomes x - mean in place: the squares and the output both use it (for rms_norm
  // mean is 0 and the subtraction compiles away).
  acc_t squares = 0;
#pragma unroll
  for (int j = 0; j < kVectorsPerThread; ++j) {
    if (static_cast<int64_t>(j) * me.threads_per_row + me.thread < vectors) {
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        v[j][e] -= mean;
        squares += v[j][e] * v[j][e];
      }
    }
  }
  squares = row_allreduce<kWarpPerRow>(squares, Plus{}, acc_t(0), square_partials);
  const acc_t rstd = rsqrt(squares / static_cast<acc_t>(a.n) + a.eps);
  if (me.thread == 0) {
    if (a.mean) a.mean[me.row] = mean;
    a.rstd[me.row] = rstd;
  }
#pragma unroll
  for (int j = 0; j < kVectorsPerThread; ++j) {
    const int64_t k = static_cast<int64_t>(j) * me.threads_per_row + me.thread;
    if (k < vectors) {
      acc_t w[kVec], b[kVec];
      load_affine<acc_t>(a.weight, k, acc_t(1), w);
      load_affine<acc_t>(a.bias, k, acc_t(0), b);
      Vector result;
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        const acc_t z = v[j][e] * rstd * w[e] + b[e];  // normalized(): (x - mean) * rstd
        result.values[e] = convert_element<T>(normalization::activate<kEpilogue>(z));
      }
      out[k] = result;
    }
  }
}

// Any row length: a block per row, three passes (the sum, the squared deviations, the
// output); kVec 1 where vectors do not fit the row. kStaged (16-byte vectors only): the row is
// copied into shared memory first (cuda/row_kernels.cuh's stage_row_vectors), and the passes
// read it there instead of from memory and L2.
template <typename T, NormKind kKind, Epilogue kEpilogue, int kVec, bool kStaged>
__global__ void __launch_bounds__(kOnlineThreads) normalization_long_rows_kernel(ForwardArgs<T> a) {
  using acc_t = compute_t<T>;
  using Vector = AlignedVector<T, kVec>;
  using Word = typename VectorWord<static_cast<int>(sizeof(Vector))>::type;
  __shared__ acc_t mean_partials[kWarpSize];
  __shared__ acc_t square_partials[kWarpSize];
  extern __shared__ __align__(16) unsigned char staged_bytes[];
  const Word* staged = reinterpret_cast<const Word*>(staged_bytes);
  const int64_t row = blockIdx.x;
  const Vector* in = reinterpret_cast<const Vector*>(a.x + row * a.n);
  Vector* out = reinterpret_cast<Vector*>(a.y + row * a.n);
  const int64_t vectors = a.n / kVec;
  if constexpr (kStaged) {
    stage_row_vectors(reinterpret_cast<const Word*>(in), reinterpret_cast<Word*>(staged_bytes), vectors, threadIdx.x,
                      blockDim.x);
    mma::wait_copies<0>();
  }
  auto load = [&](int64_t k, acc_t (&loaded)[kVec]) {
    if constexpr (kStaged)
      convert_vector(vector_from_bits<T, kVec>(staged[k]), loaded);
    else
      convert_vector(in[k], loaded);
  };

  acc_t mean = 0;
  if constexpr (kKind == NormKind::Layer) {
    acc_t sum = 0;
#pragma unroll 4
    for (int64_t k = threadIdx.x; k < vectors; k += blockDim.x) {
      acc_t loaded[kVec];
      load(k, loaded);
#pragma unroll
      for (int e = 0; e < kVec; ++e) sum += loaded[e];
    }
    mean = block_allreduce(sum, Plus{}, acc_t(0), mean_partials) / static_cast<acc_t>(a.n);
  }
  acc_t squares = 0;
#pragma unroll 4
  for (int64_t k = threadIdx.x; k < vectors; k += blockDim.x) {
    acc_t loaded[kVec];
    load(k, loaded);
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      const acc_t d = loaded[e] - mean;
      squares += d * d;
    }
  }
  squares = block_allreduce(squares, Plus{}, acc_t(0), square_partials);
  const acc_t rstd = rsqrt(squares / static_cast<acc_t>(a.n) + a.eps);
  if (threadIdx.x == 0) {
    if (a.mean) a.mean[row] = mean;
    a.rstd[row] = rstd;
  }
#pragma unroll 4
  for (int64_t k = threadIdx.x; k < vectors; k += blockDim.x) {
    acc_t loaded[kVec];
    load(k, loaded);
    acc_t w[kVec], b[kVec];
    load_affine<acc_t>(a.weight, k, acc_t(1), w);
    load_affine<acc_t>(a.bias, k, acc_t(0), b);
    Vector result;
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      const acc_t xhat = normalization::normalized<kKind>(loaded[e], mean, rstd);
      const acc_t z = xhat * w[e] + b[e];
      result.values[e] = convert_element<T>(normalization::activate<kEpilogue>(z));
    }
    out[k] = result;
  }
}

// ---- backward ----

// The weight and bias of one vector of columns, in compute_t<T> (1 and 0 where absent); the
// bias only where the epilogue needs it (z = xhat * w + b goes through act'; without an
// epilogue dx needs w alone).
template <typename T, Epilogue kEpilogue, int kVec>
struct AffineVector {
  using acc_t = compute_t<T>;
  static constexpr bool kNeedsBias = kEpilogue != Epilogue::Identity;
  acc_t w[kVec];
  acc_t b[kVec];

  AffineVector() = default;
  // Vector k, read from memory.
  __device__ __forceinline__ AffineVector(const BackwardArgs<T>& a, int64_t k) {
    load_affine<acc_t>(a.weight, k, acc_t(1), w);
    if constexpr (kNeedsBias) load_affine<acc_t>(a.bias, k, acc_t(0), b);
  }
};

// The register path's weight and bias, staged in shared memory once by each block in
// compute_t<T>. A thread works on the same columns in every row; read from memory at each row,
// they cost it, per vector, two loads, their addresses, the conversions and the defaults of
// absent ones, where from here they are two to four 16-byte shared loads. Each thread stages
// and reads only its own columns, so no barrier guards them. Layout: 16-byte chunk c of vector
// k at [c][k] (weight's, then bias's, which only an epilogue reads), so a warp reading
// consecutive vectors reads consecutive chunks: no bank conflicts.
template <typename T, Epilogue kEpilogue, int kVec>
struct StagedAffine {
  using acc_t = compute_t<T>;
  using Affine = AffineVector<T, kEpilogue, kVec>;
  static constexpr int kPer16Bytes = 16 / static_cast<int>(sizeof(acc_t));
  static constexpr int kChunk = kVec < kPer16Bytes ? kVec : kPer16Bytes;  // elements a chunk
  static constexpr int kChunks = kVec / kChunk;
  using Chunk = AlignedVector<acc_t, kChunk>;

  static int64_t shared_bytes(int64_t n) { return 2 * n * static_cast<int64_t>(sizeof(acc_t)); }

  Chunk* weight;  // [kChunks][vectors]
  Chunk* bias;
  int64_t vectors;

  __device__ StagedAffine(void* shared, int64_t vectors)
      : weight(static_cast<Chunk*>(shared)), bias(static_cast<Chunk*>(shared) + kChunks * vectors), vectors(vectors) {}

  __device__ __forceinline__ void stage(const BackwardArgs<T>& a, int64_t k) const {
    const Affine v(a, k);
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      Chunk w, b;
#pragma unroll
      for (int e = 0; e < kChunk; ++e) {
        w.values[e] = v.w[c * kChunk + e];
        if constexpr (Affine::kNeedsBias) b.values[e] = v.b[c * kChunk + e];
      }
      weight[c * vectors + k] = w;
      if constexpr (Affine::kNeedsBias) bias[c * vectors + k] = b;
    }
  }
  __device__ __forceinline__ Affine load(int64_t k) const {
    Affine v;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const Chunk w = weight[c * vectors + k];
#pragma unroll
      for (int e = 0; e < kChunk; ++e) v.w[c * kChunk + e] = w.values[e];
      if constexpr (Affine::kNeedsBias) {
        const Chunk b = bias[c * vectors + k];
#pragma unroll
        for (int e = 0; e < kChunk; ++e) v.b[c * kChunk + e] = b.values[e];
      }
    }
    return v;
  }
};

// One vector of a row: xhat and dz = grad * act'(z), and dxhat = dz * w, from the vector's
// gradient g and input x.
template <typename T, NormKind kKind, Epilogue kEpilogue, int kVec>
struct GradientVector {
  using acc_t = compute_t<T>;
  using Vector = AlignedVector<T, kVec>;
  acc_t xhat[kVec];
  acc_t dz[kVec];
  acc_t dxhat[kVec];

  __device__ __forceinline__ GradientVector(const Vector& g, const Vector& x,
                                            const AffineVector<T, kEpilogue, kVec>& wb, acc_t mean, acc_t rstd) {
    convert_vector(x, xhat);
    convert_vector(g, dz);
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      xhat[e] = normalization::normalized<kKind>(xhat[e], mean, rstd);
      if constexpr (kEpilogue != Epilogue::Identity)
        dz[e] *= normalization::activate_derivative<kEpilogue>(xhat[e] * wb.w[e] + wb.b[e]);
      dxhat[e] = dz[e] * wb.w[e];
    }
  }
  // Vector k of row `row`, everything read from memory.
  __device__ __forceinline__ GradientVector(const BackwardArgs<T>& a, int64_t row, int64_t k, acc_t mean, acc_t rstd)
      : GradientVector(reinterpret_cast<const Vector*>(a.grad + row * a.n)[k],
                       reinterpret_cast<const Vector*>(a.x + row * a.n)[k], AffineVector<T, kEpilogue, kVec>(a, k),
                       mean, rstd) {}
};

// What the register path reads of a row: its statistics, and the thread's vectors of grad and
// x, as loaded (still in T). Loaded a row ahead: the loads of the block's next row are in
// flight while the current row's sums wait on the block's barrier and its dx is written.
//
// The vectors are held as the unsigned words of the load (VectorWord), not as
// AlignedVectors: held as 16-bit bfloat16 elements, each predicated load went to scratch
// registers and was merged into the held ones 16 bits at a time right away, so each load
// waited for the one before it instead of all being in flight at once.
template <typename T, int kVec, int kVectorsPerThread>
struct RowLoads {
  using acc_t = compute_t<T>;
  using Vector = AlignedVector<T, kVec>;
  using Word = typename VectorWord<static_cast<int>(sizeof(Vector))>::type;
  acc_t mean = 0;
  acc_t rstd = 0;
  Word g[kVectorsPerThread];
  Word x[kVectorsPerThread];

  __device__ __forceinline__ void load(const BackwardArgs<T>& a, int64_t row, int64_t vectors) {
    if (row >= a.rows) return;
    mean = a.mean ? a.mean[row] : acc_t(0);
    rstd = a.rstd[row];
    const Word* g_row = reinterpret_cast<const Word*>(a.grad + row * a.n);
    const Word* x_row = reinterpret_cast<const Word*>(a.x + row * a.n);
#pragma unroll
    for (int j = 0; j < kVectorsPerThread; ++j) {
      const int64_t k = static_cast<int64_t>(j) * blockDim.x + threadIdx.x;
      if (k < vectors) {
        g[j] = g_row[k];
        x[j] = x_row[k];
      }
    }
  }
};

// dx for vector k of a row, by the row's InputGradient (kernels/normalization.h).
template <typename T, NormKind kKind, Epilogue kEpilogue, int kVec>
__device__ __forceinline__ void write_input_gradient(const BackwardArgs<T>& a, int64_t row, int64_t k,
                                                     compute_t<T> mean,
                                                     const normalization::InputGradient<kKind, compute_t<T>>& dx) {
  const GradientVector<T, kKind, kEpilogue, kVec> v(a, row, k, mean, dx.rstd);
  AlignedVector<T, kVec> result;
#pragma unroll
  for (int e = 0; e < kVec; ++e) result.values[e] = convert_element<T>(dx(v.dxhat[e], v.xhat[e]));
  reinterpret_cast<AlignedVector<T, kVec>*>(a.grad_input + row * a.n)[k] = result;
}

// A row's two sums, sum(dxhat) and sum(dxhat * xhat), combined across the block at once:
// one barrier a row instead of two.
template <typename acc_t>
struct RowSums {
  acc_t dxhat;
  acc_t dxhat_xhat;
};
struct PlusRowSums {
  template <typename acc_t>
  __device__ RowSums<acc_t> operator()(RowSums<acc_t> a, RowSums<acc_t> b) const {
    return {a.dxhat + b.dxhat, a.dxhat_xhat + b.dxhat_xhat};
  }
};

// kVectorsPerThread > 0: the thread's columns are vectors t, t + blockDim.x, ... (that
// many); their xhat and dxhat stay in registers for the row, their dweight/dbias sums until
// the block's last row, and the next row's loads (RowLoads) are issued before this row's
// combine.
// kVectorsPerThread == 0: any row length, dx only (a.weight_partials null): the dweight and
// dbias partials of such rows come from affine_gradient_columns_kernel.
//
// Blocks of up to 512 threads: at most 128 registers a thread (65536 an SM).
template <typename T, NormKind kKind, Epilogue kEpilogue, int kVec, int kVectorsPerThread>
__global__ void __launch_bounds__(kBackwardMaxThreads) normalization_backward_kernel(BackwardArgs<T> a) {
  using acc_t = compute_t<T>;
  __shared__ RowSums<acc_t> sum_partials[kWarpSize];
  constexpr bool kInRegisters = kVectorsPerThread > 0;
  constexpr int kHeld = kInRegisters ? kVectorsPerThread : 1;
  const int64_t vectors = a.n / kVec;
  const bool affine = kInRegisters && a.weight_partials != nullptr;
  acc_t* weight_partials = affine ? a.weight_partials + static_cast<int64_t>(blockIdx.x) * a.n : nullptr;
  acc_t* bias_partials = affine ? a.bias_partials + static_cast<int64_t>(blockIdx.x) * a.n : nullptr;
  acc_t dw[kHeld][kVec] = {};
  acc_t db[kHeld][kVec] = {};
  // kInRegisters: the row's xhat and dxhat, kept from the sums to the writing of dx.
  acc_t held_xhat[kHeld][kVec];
  acc_t held_dxhat[kHeld][kVec];
  RowLoads<T, kVec, kHeld> next;
  extern __shared__ __align__(16) unsigned char staged_affine[];
  const StagedAffine<T, kEpilogue, kVec> affine_columns(staged_affine, vectors);
  if constexpr (kInRegisters) {
    next.load(a, blockIdx.x, vectors);
#pragma unroll
    for (int j = 0; j < kVectorsPerThread; ++j) {
      const int64_t k = static_cast<int64_t>(j) * blockDim.x + threadIdx.x;
      if (k < vectors) affine_columns.stage(a, k);
    }
  }

  for (int64_t row = blockIdx.x; row < a.rows; row += gridDim.x) {
    RowSums<acc_t> sums{0, 0};
    acc_t mean, rstd;
    auto add_to_sums = [&](const GradientVector<T, kKind, kEpilogue, kVec>& v) {
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        sums.dxhat += v.dxhat[e];
        sums.dxhat_xhat += v.dxhat[e] * v.xhat[e];
      }
    };
    if constexpr (kInRegisters) {
      mean = next.mean;
      rstd = next.rstd;
#pragma unroll
      for (int j = 0; j < kVectorsPerThread; ++j) {
        const int64_t k = static_cast<int64_t>(j) * blockDim.x + threadIdx.x;
        if (k < vectors) {
          const GradientVector<T, kKind, kEpilogue, kVec> v(vector_from_bits<T, kVec>(next.g[j]),
                                                            vector_from_bits<T, kVec>(next.x[j]),
                                                            affine_columns.load(k), mean, rstd);
          add_to_sums(v);
#pragma unroll
          for (int e = 0; e < kVec; ++e) {
            held_xhat[j][e] = v.xhat[e];
            held_dxhat[j][e] = v.dxhat[e];
          }
          if (affine) {
#pragma unroll
            for (int e = 0; e < kVec; ++e) {
              dw[j][e] += v.dz[e] * v.xhat[e];
              db[j][e] += v.dz[e];
            }
          }
        }
      }
      next.load(a, row + gridDim.x, vectors);
    } else {
      mean = a.mean ? a.mean[row] : acc_t(0);
      rstd = a.rstd[row];
      for (int64_t k = threadIdx.x; k < vectors; k += blockDim.x)
        add_to_sums(GradientVector<T, kKind, kEpilogue, kVec>(a, row, k, mean, rstd));
    }
    sums = block_allreduce(sums, PlusRowSums{}, RowSums<acc_t>{0, 0}, sum_partials);
    if (a.grad_input) {
      const normalization::InputGradient<kKind, acc_t> dx(rstd, sums.dxhat, sums.dxhat_xhat,
                                                          static_cast<acc_t>(a.n));
      if constexpr (kInRegisters) {
        AlignedVector<T, kVec>* out = reinterpret_cast<AlignedVector<T, kVec>*>(a.grad_input + row * a.n);
#pragma unroll
        for (int j = 0; j < kVectorsPerThread; ++j) {
          const int64_t k = static_cast<int64_t>(j) * blockDim.x + threadIdx.x;
          if (k < vectors) {
            AlignedVector<T, kVec> result;
#pragma unroll
            for (int e = 0; e < kVec; ++e)
              result.values[e] = convert_element<T>(dx(held_dxhat[j][e], held_xhat[j][e]));
            out[k] = result;
          }
        }
      } else {
        for (int64_t k = threadIdx.x; k < vectors; k += blockDim.x)
          write_input_gradient<T, kKind, kEpilogue, kVec>(a, row, k, mean, dx);
      }
    }
    __syncthreads();  // the next row's combines reuse the shared partials
  }
  if constexpr (kInRegisters) {
    if (!affine) return;
#pragma unroll
    for (int j = 0; j < kVectorsPerThread; ++j) {
      const int64_t k = static_cast<int64_t>(j) * blockDim.x + threadIdx.x;
      if (k < vectors) {
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          weight_partials[k * kVec + e] = dw[j][e];
          bias_partials[k * kVec + e] = db[j][e];
        }
      }
    }
  }
}

// The dweight and dbias partials of rows the register path does not hold: thread t of
// block (x, y) owns vector k = x * blockDim.x + t of the columns and sums dz * xhat and dz
// over the rows of chunk y, in order, into partials row y. It reads x and grad a second
// time (the dx kernel read them first): 2 n elements a row, where keeping a partials row per
// block up to date in global memory cost a read and a write of both sums, 16 bytes an
// element in float, for every row.
template <typename T, NormKind kKind, Epilogue kEpilogue, int kVec>
__global__ void affine_gradient_columns_kernel(BackwardArgs<T> a, int64_t rows_per_chunk) {
  using acc_t = compute_t<T>;
  const int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= a.n / kVec) return;
  const int64_t begin = static_cast<int64_t>(blockIdx.y) * rows_per_chunk;
  const int64_t end = begin + rows_per_chunk < a.rows ? begin + rows_per_chunk : a.rows;
  acc_t dw[kVec] = {};
  acc_t db[kVec] = {};
  for (int64_t row = begin; row < end; ++row) {
    const acc_t mean = a.mean ? a.mean[row] : acc_t(0);
    const GradientVector<T, kKind, kEpilogue, kVec> v(a, row, k, mean, a.rstd[row]);
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      dw[e] += v.dz[e] * v.xhat[e];
      db[e] += v.dz[e];
    }
  }
  const int64_t at = static_cast<int64_t>(blockIdx.y) * a.n + k * kVec;
#pragma unroll
  for (int e = 0; e < kVec; ++e) {
    a.weight_partials[at + e] = dw[e];
    a.bias_partials[at + e] = db[e];
  }
}

// ---- launching ----

// Threads for a block that loops over a row of `vectors` vectors: whole warps, at most `max`.
int block_threads_for(int64_t vectors, int max) {
  const int64_t warps = (vectors + kWarpSize - 1) / kWarpSize;
  return static_cast<int>(std::min<int64_t>(std::max<int64_t>(warps, 1) * kWarpSize, max));
}

template <typename T>
const T* data_or_null(const Tensor& t) {
  return t.defined() ? static_cast<const T*>(t.raw_data()) : nullptr;
}
template <typename T>
T* mutable_data_or_null(const Tensor& t) {
  return t.defined() ? static_cast<T*>(t.raw_data()) : nullptr;
}

// The backward's launches, kTargetThreads threads a row where the register budget allows
// (bench/experiments/normalization_backward_threads.cu times the choices side by side).
template <int kTargetThreads = kBackwardTargetThreads>
void backward_rows(const char* op, const Tensor& grad, const Tensor& x, const Tensor& weight, const Tensor& bias,
                   const Tensor& mean, const Tensor& rstd, int64_t hidden, NormKind kind, Epilogue epilogue,
                   const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias) {
  const Rows rows{x.numel() / hidden, hidden};
  if (rows.count == 0) return;
  DeviceGuard guard(x.device().index);
  const cudaStream_t stream = current_stream();
  const bool affine = grad_weight.defined() || grad_bias.defined();
  dispatch_floating(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using acc_t = compute_t<T>;
    BackwardArgs<T> args{static_cast<const T*>(grad.raw_data()),
                         static_cast<const T*>(x.raw_data()),
                         data_or_null<T>(weight),
                         data_or_null<T>(bias),
                         data_or_null<acc_t>(mean),
                         static_cast<const acc_t*>(rstd.raw_data()),
                         mutable_data_or_null<T>(grad_input),
                         nullptr,
                         nullptr,
                         rows.count,
                         rows.length};
    Tensor partials;
    int64_t blocks = 0;
    normalization::with_norm_variant(kind, epilogue, [&](auto kind_constant, auto epilogue_constant) {
      constexpr NormKind kKind = decltype(kind_constant)::value;
      constexpr Epilogue kEpilogue = decltype(epilogue_constant)::value;
      with_vector_width<T>(rows.length, {args.grad, args.x, args.grad_input, args.weight, args.bias},
                           [&](auto vector_width) {
        constexpr int kVec = decltype(vector_width)::value;
        const int64_t vectors = rows.length / kVec;
        // The partials: `count` rows of dweight sums, then as many of dbias sums.
        auto allocate_partials = [&](int64_t count) {
          blocks = count;
          partials = empty({2, count, rows.length},
                           TensorOptions(x.dtype() == kFloat64 ? kFloat64 : kFloat32).device(x.device()));
          args.weight_partials = static_cast<acc_t*>(partials.raw_data());
          args.bias_partials = args.weight_partials + count * rows.length;
        };
        // A few blocks per SM (as many as fit), each looping over its rows; never more
        // blocks than rows, so every block's slice of the partials is written.
        auto grid_for = [&](auto kernel, int threads, int shared_bytes) {
          return std::min<int64_t>(rows.count, blocks_per_wave(kernel, threads, op, shared_bytes));
        };
        // The register path, with weight and bias staged in shared_bytes of shared memory.
        auto launch = [&](auto kernel, int threads, int shared_bytes) {
          allow_shared_memory(kernel, shared_bytes, op);
          const int64_t grid = grid_for(kernel, threads, shared_bytes);
          if (affine) allocate_partials(grid);
          kernel<<<static_cast<unsigned int>(grid), threads, shared_bytes, stream>>>(args);
        };
        // Rows the registers do not hold: dx by the loop kernel, then the partials by columns,
        // about 4 blocks an SM in all (256 threads, a vector of columns each).
        auto launch_loop = [&] {
          if (args.grad_input) {
            const auto kernel = normalization_backward_kernel<T, kKind, kEpilogue, kVec, 0>;
            const int threads = block_threads_for(vectors, kBackwardMaxThreads);
            BackwardArgs<T> dx_only = args;
            dx_only.weight_partials = dx_only.bias_partials = nullptr;
            kernel<<<static_cast<unsigned int>(grid_for(kernel, threads, 0)), threads, 0, stream>>>(dx_only);
          }
          if (!affine) return;
          constexpr int kColumnThreads = 256;
          const int64_t column_blocks = (vectors + kColumnThreads - 1) / kColumnThreads;
          constexpr int64_t kMaxGridY = 65535;
          const int64_t wanted_chunks =
              std::clamp<int64_t>((4 * multiprocessor_count(op) + column_blocks - 1) / column_blocks, 1, kMaxGridY);
          const int64_t rows_per_chunk = (rows.count + wanted_chunks - 1) / wanted_chunks;
          const int64_t chunks = (rows.count + rows_per_chunk - 1) / rows_per_chunk;
          allocate_partials(chunks);
          affine_gradient_columns_kernel<T, kKind, kEpilogue, kVec>
              <<<dim3(static_cast<unsigned int>(column_blocks), static_cast<unsigned int>(chunks)), kColumnThreads, 0,
                 stream>>>(args, rows_per_chunk);
        };
        // Taken here, not inside the `if constexpr` below: there g++ 12 (as nvcc's host compiler
        // too) took compute_t<T> of the half types as the primary template's T itself, so the
        // launch asked for half the shared memory the kernel stages (bench/experiments/
        // warp_emulation found it: the kernel wrote past its dynamic shared memory).
        const int64_t staged_bytes = StagedAffine<T, kEpilogue, kVec>::shared_bytes(rows.length);
        if constexpr (kVec == 1) {
          launch_loop();
        } else {
          constexpr int kMaxVectorsPerThread = kBackwardElementsPerThread / kVec;
          // Rows of up to 8192 elements, whose weight and bias fit the device's shared memory (all
          // but double rows of more than about 6000 elements on GPUs of 99 KiB a block).
          if (rows.length > kBackwardMaxRegisterRow || staged_bytes + 1024 > max_shared_memory_per_block(op)) {
            launch_loop();
          } else {
            // 256 threads a row where the register budget allows (up to 512 for the longest
            // rows): each thread has a few vectors of work between the row's barriers.
            with_vectors_per_thread<kMaxVectorsPerThread>(
                (vectors + kTargetThreads - 1) / kTargetThreads, [&](auto per_thread) {
                  constexpr int kPerThread = decltype(per_thread)::value;
                  launch(normalization_backward_kernel<T, kKind, kEpilogue, kVec, kPerThread>,
                         block_threads_for((vectors + kPerThread - 1) / kPerThread, kBackwardMaxThreads),
                         static_cast<int>(staged_bytes));
                });
          }
        }
        MG_CUDA_CHECK_LAUNCH(op);
      });
    });
    if (!affine) return;
    // dweight's partials, then dbias's right after them (allocate_partials): one launch sums both.
    sum_column_partials(args.weight_partials, blocks, rows.length,
                        ColumnSumOutputs<T>{{mutable_data_or_null<T>(grad_weight), mutable_data_or_null<T>(grad_bias)}},
                        2, stream);
    MG_CUDA_CHECK_LAUNCH(op);
  });
}

// The forward's launches, rows held kMaxElements elements a thread at most (so with the fewest
// threads that hold them) when they fit the registers.
template <int kMaxElements = kElementsPerThread>
void forward_rows(const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t hidden,
                  NormKind kind, Epilogue epilogue, double eps, const Tensor& y, const Tensor& mean,
                  const Tensor& rstd) {
  const Rows rows{x.numel() / hidden, hidden};
  if (rows.count == 0) return;
  DeviceGuard guard(x.device().index);
  const cudaStream_t stream = current_stream();
  dispatch_floating(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using acc_t = compute_t<T>;
    const ForwardArgs<T> args{static_cast<const T*>(x.raw_data()),
                              data_or_null<T>(weight),
                              data_or_null<T>(bias),
                              static_cast<T*>(y.raw_data()),
                              mutable_data_or_null<acc_t>(mean),
                              static_cast<acc_t*>(rstd.raw_data()),
                              rows.count,
                              rows.length,
                              static_cast<acc_t>(eps)};
    normalization::with_norm_variant(kind, epilogue, [&](auto kind_constant, auto epilogue_constant) {
      constexpr NormKind kKind = decltype(kind_constant)::value;
      constexpr Epilogue kEpilogue = decltype(epilogue_constant)::value;
      with_vector_width<T>(rows.length, {args.x, args.y, args.weight, args.bias}, [&](auto vector_width) {
        constexpr int kVec = decltype(vector_width)::value;
        // Rows the registers do not hold: staged in shared memory where two blocks' rows fit an SM.
        auto launch_long = [&](unsigned int grid, int block_threads) {
          if constexpr (kVec > 1) {
            const int64_t staged_bytes = rows.length * static_cast<int64_t>(sizeof(T));
            if (fits_staged_rows(staged_bytes, 2, op)) {
              const auto kernel = normalization_long_rows_kernel<T, kKind, kEpilogue, kVec, true>;
              allow_shared_memory(kernel, static_cast<int>(staged_bytes), op);
              kernel<<<grid, block_threads, static_cast<size_t>(staged_bytes), stream>>>(args);
              return;
            }
          }
          normalization_long_rows_kernel<T, kKind, kEpilogue, kVec, false><<<grid, block_threads, 0, stream>>>(args);
        };
        if constexpr (kVec == 1) {
          // Unaligned or odd rows: the loop kernel, with as many threads as the row has use for.
          launch_long(blocks_for_rows(rows.count, 1, op), block_threads_for(rows.length, kOnlineThreads));
        } else {
          launch_for_rows<kVec, kMaxElements>(
              rows, op,
              [&](auto per_thread, auto warp_per_row, unsigned int grid, int block_threads) {
                normalization_rows_kernel<T, kKind, kEpilogue, kVec, decltype(per_thread)::value,
                                          decltype(warp_per_row)::value>
                    <<<grid, block_threads, 0, stream>>>(args);
              },
              launch_long);
        }
        MG_CUDA_CHECK_LAUNCH(op);
      });
    });
  });
}

}  // namespace

void normalization_forward(const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t hidden,
                           NormKind kind, Epilogue epilogue, double eps, const Tensor& y, const Tensor& mean,
                           const Tensor& rstd) {
  forward_rows(op, x, weight, bias, hidden, kind, epilogue, eps, y, mean, rstd);
}

void normalization_backward(const char* op, const Tensor& grad, const Tensor& x, const Tensor& weight,
                            const Tensor& bias, const Tensor& mean, const Tensor& rstd, int64_t hidden, NormKind kind,
                            Epilogue epilogue, const Tensor& grad_input, const Tensor& grad_weight,
                            const Tensor& grad_bias) {
  backward_rows(op, grad, x, weight, bias, mean, rstd, hidden, kind, epilogue, grad_input, grad_weight, grad_bias);
}

}  // namespace cuda
}  // namespace minigrad
