// Reductions on the GPU: sum (and mean) and prod over any dims, max and min with their
// positions, and the running sum (cumsum, at the end of this file). (The backwards are
// built from public ops in ops/reduce.cpp: they need no kernels here.)
//
// Every reduction reads x as [outer, reduced, inner] (ReductionLayout): the reduced dims
// merged into one, the kept dims into at most two, each with one stride. That covers a
// reduction over one dim, over the leading or trailing dims, and their transposes without
// a copy; when the reduced dims are scattered among kept ones ([R, K, R]) or the dims do
// not merge, the launcher first copies x into a contiguous [kept..., reduced...] tensor.
//
// Two kernels then cover every layout:
//  - reduce_rows_kernel, when the elements one output folds are adjacent in memory (a row):
//    a warp per row of up to 1024 elements, a block of 256 per longer row; 16-byte loads;
//    shuffles combine. (A sum over the last dim, a full sum.)
//  - reduce_columns_kernel, when they are strided and neighbouring outputs are neighbours
//    in memory (columns): each thread owns up to 8 adjacent outputs (a 16-byte vector) and
//    walks down the reduced dim, so a warp reads 512 contiguous bytes per row, and up to 8
//    threads per column share the walk, combined in shared memory. (The broadcasting
//    backward: [16384, 8192] -> [8192].)
// Blocks have 256 threads: 8 per SM fill its 2048 thread slots, and a block-wide combine
// of 8 warps costs one barrier. When the outputs are too few to fill the GPU, blockIdx.y
// also splits the reduced dim among blocks: each block writes a partial result and a
// second launch of the same kernels reduces the partials. No atomics: the grouping depends
// only on the sizes and the GPU, so a reduction gives the same bits on every run.
#include <algorithm>
#include <limits>
#include <optional>
#include <vector>

#include <minigrad/core/shape.h>
#include <minigrad/cuda/vector.cuh>
#include <minigrad/cuda/block_reduce.cuh>
#include <minigrad/cuda/convert.cuh>
#include <minigrad/cuda/launch.cuh>
#include <minigrad/cuda/reduce.h>
#include <minigrad/cuda/runtime.h>
#include <minigrad/kernels/reduce_combine.h>

namespace minigrad {
namespace cuda {
namespace {

// ---- what a reduction folds ----
// An Op has a state_t, the identity state, lift (one element, or a partial state, at its
// position along the reduced dim, to a state), combine (two states to one, associative
// and commutative) and fold (combine with one lifted element: the inner loop's step).

// What a sum of in_t accumulates in: double for float32 and float64 (a float32 accumulator
// stops growing at 2^24 when adding ones; in a memory-bound kernel the double adds cost
// nothing; the CPU kernel adds float32 in runs of 8 in float before double), float for the half types, uint64 for int64 and bool: an
// unsigned sum wraps around modulo 2^64 where a signed one would be undefined, and the
// total converted back to int64 is the two's-complement result the CPU (and PyTorch) give.
template <typename in_t>
struct SumAccumulator {
  using type = double;
};
template <>
struct SumAccumulator<Half> {
  using type = float;
};
template <>
struct SumAccumulator<BFloat16> {
  using type = float;
};
template <>
struct SumAccumulator<int64_t> {
  using type = uint64_t;
};
template <>
struct SumAccumulator<bool> {
  using type = uint64_t;
};

template <typename acc_t>
struct SumOp {
  using state_t = acc_t;
  __device__ state_t identity() const { return acc_t(0); }
  template <typename T>
  __device__ state_t lift(T value, int64_t) const {
    return convert_element<acc_t>(value);
  }
  __device__ state_t combine(state_t a, state_t b) const { return a + b; }
  template <typename T>
  __device__ state_t fold(state_t state, T element, int64_t position) const {
    return combine(state, lift(element, position));
  }
};

// The product: SumOp's accumulators, multiplied (uint64 wraps around as int64's two's
// complement product does).
template <typename acc_t>
struct ProdOp {
  using state_t = acc_t;
  __device__ state_t identity() const { return acc_t(1); }
  template <typename T>
  __device__ state_t lift(T value, int64_t) const {
    return convert_element<acc_t>(value);
  }
  __device__ state_t combine(state_t a, state_t b) const { return a * b; }
  template <typename T>
  __device__ state_t fold(state_t state, T element, int64_t position) const {
    return combine(state, lift(element, position));
  }
};

template <typename value_t>
struct ExtremumState {
  value_t value;
  int64_t index;
};

// The running maximum or minimum and its position. value_t is float for the half types
// (exact), the element type otherwise.
template <typename value_t>
struct ExtremumOp {
  using state_t = ExtremumState<value_t>;
  Extremum kind;
  value_t start;  // below (Max) or above (Min) every value of value_t
  // Every element beats the identity: a value equal to `start` wins on its smaller index.
  __device__ state_t identity() const { return {start, INT64_MAX}; }
  template <typename T>
  __device__ state_t lift(T value, int64_t position) const {
    return {convert_element<value_t>(value), position};
  }
  __device__ state_t lift(state_t partial, int64_t) const { return partial; }
  __device__ state_t combine(state_t a, state_t b) const {
    return extremum_prefers(kind, b.value, b.index, a.value, a.index) ? b : a;
  }
  // An element on the losing side of the running extremum (a number, so no NaN) loses
  // whatever its position: most elements cost one comparison, and only the rest the full
  // rule (with its NaN tests and 64-bit index comparison), which float16 data would
  // otherwise make the bottleneck at 8 elements per 16-byte load.
  template <typename T>
  __device__ state_t fold(state_t best, T element, int64_t position) const {
    const state_t candidate = lift(element, position);
    if (kind == Extremum::Max ? candidate.value < best.value : candidate.value > best.value) return best;
    return combine(best, candidate);
  }
};

// ---- where the results go: the output tensors, or partial states for a second pass ----

template <typename out_t, typename acc_t>
struct SumOutput {
  out_t* out;
  acc_t divisor;
  __device__ void write(int64_t output, int64_t, acc_t sum) const {
    out[output] = convert_element<out_t>(sum / divisor);
  }
};

template <typename out_t, typename value_t>
struct ExtremumOutput {
  out_t* values;
  int64_t* indices;
  __device__ void write(int64_t output, int64_t, ExtremumState<value_t> best) const {
    values[output] = convert_element<out_t>(best.value);
    indices[output] = best.index;
  }
};

template <typename state_t>
struct PartialsOutput {
  state_t* partials;
  int64_t output_stride;
  int64_t split_stride;
  __device__ void write(int64_t output, int64_t split, state_t partial) const {
    partials[output * output_stride + split * split_stride] = partial;
  }
};

// ---- the layout ----

// x read as [outer, reduced, inner]: element (o, r, i) at o * outer_stride + r *
// reduced_stride + i * inner_stride. Output o * inner + i is the fold over r: outputs are
// the kept dims in order. With one kept group, it is the inner one (outer is 1).
struct ReductionLayout {
  int64_t outer = 1, reduced = 1, inner = 1;
  int64_t outer_stride = 0, reduced_stride = 0, inner_stride = 0;

  __host__ __device__ int64_t outputs() const { return outer * inner; }
  // Where output `output`'s elements start (r = 0).
  __host__ __device__ int64_t output_offset(int64_t output) const {
    return (output / inner) * outer_stride + (output % inner) * inner_stride;
  }
};

// The layout of a tensor of `sizes` and `strides` reduced over the dims marked in
// `reduced`, or nothing when they do not merge into [outer, reduced, inner]. Size-1 dims
// drop out; neighbours merge when both are kept or both reduced and the outer one's stride
// spans the inner one (as in a view).
std::optional<ReductionLayout> three_group_layout(const Shape& sizes, const Shape& strides,
                                                  const std::vector<bool>& reduced) {
  struct Group {
    int64_t size, stride;
    bool reduced;
  };
  std::vector<Group> groups;  // outermost first
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 1) continue;
    if (!groups.empty() && groups.back().reduced == reduced[d] && groups.back().stride == strides[d] * sizes[d]) {
      groups.back().size *= sizes[d];
      groups.back().stride = strides[d];
    } else {
      groups.push_back({sizes[d], strides[d], static_cast<bool>(reduced[d])});
    }
  }
  ReductionLayout layout;
  size_t g = 0;
  if (g < groups.size() && !groups[g].reduced) {
    layout.outer = groups[g].size;
    layout.outer_stride = groups[g++].stride;
  }
  if (g < groups.size() && groups[g].reduced) {
    layout.reduced = groups[g].size;
    layout.reduced_stride = groups[g++].stride;
  }
  if (g < groups.size() && !groups[g].reduced) {
    layout.inner = groups[g].size;
    layout.inner_stride = groups[g++].stride;
  }
  if (g != groups.size()) return std::nullopt;
  if (layout.inner == 1) {  // one kept group: make it the inner one
    layout.inner = layout.outer;
    layout.inner_stride = layout.outer_stride;
    layout.outer = 1;
    layout.outer_stride = 0;
  }
  return layout;
}

// The tensor a reduction kernel reads and its layout: x itself where its dims allow, else
// a contiguous copy with the kept dims first and the reduced ones last, which always
// reads as [kept, reduced]. An empty x folds nothing into each output.
struct LaidOut {
  Tensor source;
  ReductionLayout layout;
};

LaidOut lay_out(const Tensor& x, const std::vector<bool>& reduced) {
  if (x.numel() == 0) {
    ReductionLayout empty_fold;
    empty_fold.reduced = 0;
    for (size_t d = 0; d < reduced.size(); ++d)
      if (!reduced[d]) empty_fold.inner *= x.sizes()[d];
    return {x, empty_fold};
  }
  if (std::optional<ReductionLayout> layout = three_group_layout(x.sizes(), x.strides(), reduced)) return {x, *layout};
  Shape sizes, strides;
  std::vector<bool> packed_reduced;
  for (bool take_reduced : {false, true})
    for (size_t d = 0; d < reduced.size(); ++d)
      if (reduced[d] == take_reduced) {
        sizes.push_back(x.sizes()[d]);
        strides.push_back(x.strides()[d]);
        packed_reduced.push_back(take_reduced);
      }
  const Tensor packed = copy_as(as_strided(x, sizes, strides, x.storage_offset()), x.dtype(), x.device());
  return {packed, *three_group_layout(packed.sizes(), packed.strides(), packed_reduced)};
}

// ---- the kernels ----

constexpr int kThreads = 256;
// Vectors (or elements) each thread loads before folding any: four independent 16-byte
// loads in flight per thread, 2048 threads per SM, 128 KiB in flight per SM, several times
// what the H200's ~4.8 TB/s at ~1 us latency needs.
constexpr int kUnroll = 4;

// Folds positions [begin, end) of a contiguous row into `state`: this thread takes every
// `threads`-th element or vector, starting at `thread`. Elements before the row's first
// 16-byte boundary and after its last whole vector go one per thread; the rest as vectors.
template <typename in_t, typename Op>
__device__ typename Op::state_t fold_row(const Op& op, typename Op::state_t state, const in_t* row, int64_t begin,
                                          int64_t end, int thread, int threads) {
  constexpr int kVec = kElementsPer16Bytes<in_t>;
  if constexpr (kVec == 1) {
    for (int64_t r = begin + thread; r < end; r += threads) state = op.fold(state, row[r], r);
    return state;
  } else {
    using Vector = AlignedVector<in_t, kVec>;
    const int64_t misaligned = static_cast<int64_t>(reinterpret_cast<uintptr_t>(row + begin) % 16 / sizeof(in_t));
    const int64_t head = ::min(end - begin, misaligned == 0 ? int64_t{0} : kVec - misaligned);
    if (thread < head) state = op.fold(state, row[begin + thread], begin + thread);
    const int64_t body = begin + head;
    const int64_t vectors = (end - body) / kVec;
    const Vector* vec = reinterpret_cast<const Vector*>(row + body);
    auto fold_vector = [&](const Vector& v, int64_t j) {
#pragma unroll
      for (int e = 0; e < kVec; ++e) state = op.fold(state, v.values[e], body + j * kVec + e);
    };
    int64_t j = thread;
    for (; j + (kUnroll - 1) * threads < vectors; j += kUnroll * threads) {
      Vector loaded[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) loaded[u] = vec[j + u * threads];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) fold_vector(loaded[u], j + u * threads);
    }
    for (; j < vectors; j += threads) fold_vector(vec[j], j);
    const int64_t tail = body + vectors * kVec;
    if (tail + thread < end) state = op.fold(state, row[tail + thread], tail + thread);
    return state;
  }
}

// One row per warp (threads_per_row 32) or per block (threads_per_row == blockDim.x);
// blockIdx.y takes positions [blockIdx.y * chunk, ...) of the row. Rows are contiguous
// (reduced_stride 1).
template <typename in_t, typename Op, typename Output>
__global__ void reduce_rows_kernel(const in_t* x, ReductionLayout layout, Op op, Output output, int64_t chunk,
                                   int threads_per_row) {
  using state_t = typename Op::state_t;
  __shared__ state_t warp_results[kWarpSize];
  const int rows_per_block = blockDim.x / threads_per_row;
  const int thread = threadIdx.x % threads_per_row;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * rows_per_block + threadIdx.x / threads_per_row;
  const int64_t begin = static_cast<int64_t>(blockIdx.y) * chunk;
  const int64_t end = ::min(begin + chunk, layout.reduced);
  const bool has_row = row < layout.outputs();
  state_t state = op.identity();
  if (has_row) state = fold_row(op, state, x + layout.output_offset(row), begin, end, thread, threads_per_row);
  // Every thread takes part in the combine (full-warp shuffles, the block's barrier).
  auto combine = [&op](const state_t& a, const state_t& b) { return op.combine(a, b); };
  if (threads_per_row == kWarpSize)
    state = warp_allreduce(state, combine);
  else
    state = block_allreduce(state, combine, op.identity(), warp_results);
  if (has_row && thread == 0) output.write(row, blockIdx.y, state);
}

// At most 8 outputs per thread: the shared-memory tile of 256 threads x 8 states stays
// within 32 KiB even for 16-byte states ({value, index} pairs).
template <typename in_t>
constexpr int kColumnVector = std::min(kElementsPer16Bytes<in_t>, 8);

// A block of 256 threads: blockDim.x threads across adjacent column vectors (a warp reads
// 32 neighbouring vectors of one row: contiguous bytes), blockDim.y threads sharing each
// column's walk down the reduced dim, combined through shared memory. blockIdx.y takes
// positions [blockIdx.y * chunk, ...) of the reduced dim.
template <typename in_t, typename Op, typename Output, int kVec>
__global__ void reduce_columns_kernel(const in_t* x, ReductionLayout layout, Op op, Output output, int64_t chunk) {
  using state_t = typename Op::state_t;
  using Vector = AlignedVector<in_t, kVec>;
  __shared__ state_t tile[kThreads * kVec];
  const int64_t first = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * kVec;
  const int64_t begin = static_cast<int64_t>(blockIdx.y) * chunk;
  const int64_t end = ::min(begin + chunk, layout.reduced);
  const int64_t step = layout.reduced_stride;
  const int threads_y = static_cast<int>(blockDim.y);
  state_t state[kVec];
#pragma unroll
  for (int e = 0; e < kVec; ++e) state[e] = op.identity();
  // The kVec columns are adjacent in memory, and all exist or none (the launcher checks).
  if (first < layout.outputs()) {
    const in_t* column = x + layout.output_offset(first);
    auto fold_vector = [&](const Vector& v, int64_t r) {
#pragma unroll
      for (int e = 0; e < kVec; ++e) state[e] = op.fold(state[e], v.values[e], r);
    };
    int64_t r = begin + threadIdx.y;
    for (; r + (kUnroll - 1) * threads_y < end; r += kUnroll * threads_y) {
      Vector loaded[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        loaded[u] = *reinterpret_cast<const Vector*>(column + (r + u * threads_y) * step);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) fold_vector(loaded[u], r + u * threads_y);
    }
    for (; r < end; r += threads_y) fold_vector(*reinterpret_cast<const Vector*>(column + r * step), r);
  }
  // tile[y][x * kVec + e]: a fixed tree down the thread rows.
  auto at = [&](int y, int e) -> state_t& { return tile[(y * blockDim.x + threadIdx.x) * kVec + e]; };
#pragma unroll
  for (int e = 0; e < kVec; ++e) at(threadIdx.y, e) = state[e];
  __syncthreads();
  for (int half = threads_y / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.y) < half)
#pragma unroll
      for (int e = 0; e < kVec; ++e) at(threadIdx.y, e) = op.combine(at(threadIdx.y, e), at(threadIdx.y + half, e));
    __syncthreads();
  }
  if (threadIdx.y == 0 && first < layout.outputs())
#pragma unroll
    for (int e = 0; e < kVec; ++e) output.write(first + e, blockIdx.y, at(0, e));
}

// ---- launching ----

// How blockIdx.y splits a reduced dim of `length`.
struct Split {
  int64_t count = 1;
  int64_t chunk = 0;
};

// Splits so that `blocks` (the blocks one chunk of every output takes) become two whole
// waves: equal blocks run in waves, and a grid that spills into a wave it leaves mostly
// empty pays for that whole wave (4.1 waves take as long as 5). No chunk is shorter than
// `min_chunk`.
Split split_reduced_dim(int64_t blocks, int64_t length, int64_t min_chunk, int64_t wave) {
  constexpr int64_t kWaves = 2;
  if (length == 0 || blocks * kWaves > wave) return {1, length};
  const int64_t most = (length + min_chunk - 1) / min_chunk;
  const int64_t count = std::clamp<int64_t>(std::min(kWaves * wave / blocks, most), 1, 65535);  // gridDim.y's limit
  const int64_t chunk = (length + count - 1) / count;
  return {(length + chunk - 1) / chunk, chunk};
}

// Rows up to this long get a warp each: each lane folds 32 elements or fewer. Longer rows
// get a block each (and more blocks when rows are few).
constexpr int64_t kWarpRowLength = 1024;
// Rows shorter than a warp are folded by the column kernel, one thread per row: a warp per
// row would leave most lanes idle.
constexpr int64_t kMinRowLength = kWarpSize;
// Splitting stops at 16 elements (or positions down a column) per thread: below that the
// block's fixed costs (combines, barriers) dominate.
constexpr int64_t kMinChunkPerThread = 16;
// Threads down each column: 8, or fewer when the reduced dim is shorter, so no thread row
// of the block idles (a [2, N] -> [N] sum uses 2 and widens the block to 128 columns).
constexpr int kMaxColumnThreadsY = 8;

unsigned int grid_size(int64_t blocks, const char* op) {
  MG_CHECK(blocks <= std::numeric_limits<int32_t>::max(), "{}: {} blocks exceed the CUDA grid", op, blocks);
  return static_cast<unsigned int>(blocks);
}

// Runs the reduction `op` of x (read through `layout`) and hands each output's state to
// `output`. Splits the reduced dim among blocks when the outputs alone would leave SMs
// idle, then reduces the partial states with a second call.
template <typename in_t, typename Op, typename Output>
void launch_reduction(const char* name, const in_t* x, const ReductionLayout& layout, const Op& op,
                      const Output& output) {
  using state_t = typename Op::state_t;
  const int64_t outputs = layout.outputs();
  if (outputs == 0) return;
  const cudaStream_t stream = current_stream();

  if (layout.reduced_stride == 1 && layout.reduced >= kMinRowLength) {
    const int threads_per_row = layout.reduced <= kWarpRowLength ? kWarpSize : kThreads;
    const int64_t rows_per_block = kThreads / threads_per_row;
    const int64_t row_blocks = (outputs + rows_per_block - 1) / rows_per_block;
    const Split split =
        threads_per_row == kWarpSize
            ? Split{1, layout.reduced}
            : split_reduced_dim(
                  row_blocks, layout.reduced, kThreads * kMinChunkPerThread,
                  blocks_per_wave(reduce_rows_kernel<in_t, Op, PartialsOutput<state_t>>, kThreads, "reduce"));
    const dim3 grid(grid_size(row_blocks, name), static_cast<unsigned int>(split.count));
    if (split.count == 1) {
      reduce_rows_kernel<<<grid, kThreads, 0, stream>>>(x, layout, op, output, split.chunk, threads_per_row);
      MG_CUDA_CHECK_LAUNCH(name);
      return;
    }
    // Partials as [outputs, splits]: each output's partials are a contiguous row.
    Workspace partials(sizeof(state_t) * static_cast<size_t>(outputs * split.count), current_device());
    state_t* partial = static_cast<state_t*>(partials.data());
    reduce_rows_kernel<<<grid, kThreads, 0, stream>>>(x, layout, op, PartialsOutput<state_t>{partial, split.count, 1},
                                                       split.chunk, threads_per_row);
    MG_CUDA_CHECK_LAUNCH(name);
    ReductionLayout second;
    second.reduced = split.count;
    second.reduced_stride = 1;
    second.inner = outputs;
    second.inner_stride = split.count;
    launch_reduction(name, static_cast<const state_t*>(partial), second, op, output);
    return;
  }

  constexpr int kVec = kColumnVector<in_t>;
  using Vector = AlignedVector<in_t, kVec>;
  const size_t vector_bytes = sizeof(Vector);
  const bool vectorized = kVec > 1 && layout.inner_stride == 1 && layout.inner % kVec == 0 &&
                          is_aligned_for<Vector>(x) && layout.reduced_stride * sizeof(in_t) % vector_bytes == 0 &&
                          layout.outer_stride * sizeof(in_t) % vector_bytes == 0;
  const int vec = vectorized ? kVec : 1;
  int threads_y = kMaxColumnThreadsY;
  while (threads_y > 1 && threads_y > layout.reduced) threads_y /= 2;
  const int threads_x = kThreads / threads_y;
  const int64_t column_blocks = (outputs + threads_x * vec - 1) / (threads_x * vec);
  const int64_t wave =
      vectorized ? blocks_per_wave(reduce_columns_kernel<in_t, Op, PartialsOutput<state_t>, kVec>, kThreads, "reduce")
                 : blocks_per_wave(reduce_columns_kernel<in_t, Op, PartialsOutput<state_t>, 1>, kThreads, "reduce");
  const Split split = split_reduced_dim(column_blocks, layout.reduced, threads_y * kMinChunkPerThread, wave);
  const dim3 grid(grid_size(column_blocks, name), static_cast<unsigned int>(split.count));
  const dim3 block(threads_x, threads_y);
  auto launch = [&](const auto& to) {
    if (vectorized)
      reduce_columns_kernel<in_t, Op, std::decay_t<decltype(to)>, kVec>
          <<<grid, block, 0, stream>>>(x, layout, op, to, split.chunk);
    else
      reduce_columns_kernel<in_t, Op, std::decay_t<decltype(to)>, 1>
          <<<grid, block, 0, stream>>>(x, layout, op, to, split.chunk);
    MG_CUDA_CHECK_LAUNCH(name);
  };
  if (split.count == 1) {
    launch(output);
    return;
  }
  // Partials as [splits, outputs]: the second pass is again a column reduction.
  Workspace partials(sizeof(state_t) * static_cast<size_t>(outputs * split.count), current_device());
  state_t* partial = static_cast<state_t*>(partials.data());
  launch(PartialsOutput<state_t>{partial, 1, outputs});
  ReductionLayout second;
  second.reduced = split.count;
  second.reduced_stride = outputs;
  second.inner = outputs;
  second.inner_stride = 1;
  launch_reduction(name, static_cast<const state_t*>(partial), second, op, output);
}

}  // namespace

void sum_reduce(const Tensor& x, const std::vector<bool>& reduced, double divisor, const Tensor& out) {
  DeviceGuard guard(x.device().index);
  const LaidOut laid_out = lay_out(x, reduced);
  dispatch_all(x.dtype(), [&](auto tag) {
    using in_t = decltype(tag);
    using acc_t = typename SumAccumulator<in_t>::type;
    using out_t = std::conditional_t<std::is_same_v<acc_t, uint64_t>, int64_t, in_t>;
    launch_reduction("sum", static_cast<const in_t*>(laid_out.source.raw_data()), laid_out.layout, SumOp<acc_t>{},
                     SumOutput<out_t, acc_t>{static_cast<out_t*>(out.raw_data()), static_cast<acc_t>(divisor)});
  });
}

void extremum_reduce(const Tensor& x, const std::vector<bool>& reduced, Extremum kind, const Tensor& values,
                     const Tensor& indices) {
  DeviceGuard guard(x.device().index);
  const LaidOut laid_out = lay_out(x, reduced);
  const char* name = kind == Extremum::Max ? "max" : "min";
  dispatch_all(x.dtype(), [&](auto tag) {
    using in_t = decltype(tag);
    using value_t = std::conditional_t<is_half_type<in_t>, float, in_t>;
    launch_reduction(name, static_cast<const in_t*>(laid_out.source.raw_data()), laid_out.layout,
                     ExtremumOp<value_t>{kind, extremum_start<value_t>(kind)},
                     ExtremumOutput<in_t, value_t>{static_cast<in_t*>(values.raw_data()), indices.data_ptr<int64_t>()});
  });
}

void prod_reduce(const Tensor& x, const std::vector<bool>& reduced, const Tensor& out) {
  DeviceGuard guard(x.device().index);
  const LaidOut laid_out = lay_out(x, reduced);
  // Three dtypes, not six: the launcher's kernels for each cost as much to compile as the
  // sum's, for an op that is rarely hot.
  auto dispatch_prod_types = [](DType t, auto&& f) {
    switch (t) {
      case DType::Float32: f(float{}); return;
      case DType::Float64: f(double{}); return;
      case DType::Int64: f(int64_t{}); return;
      default: MG_CHECK(false, "prod: the CUDA kernel takes float32, float64 or int64, got {}", t);
    }
  };
  dispatch_prod_types(x.dtype(), [&](auto tag) {
    using in_t = decltype(tag);
    using acc_t = typename SumAccumulator<in_t>::type;
    using out_t = std::conditional_t<std::is_same_v<acc_t, uint64_t>, int64_t, in_t>;
    launch_reduction("prod", static_cast<const in_t*>(laid_out.source.raw_data()), laid_out.layout, ProdOp<acc_t>{},
                     SumOutput<out_t, acc_t>{static_cast<out_t*>(out.raw_data()), acc_t(1)});
  });
}

namespace {

// ---- cumsum ----
// One thread per line (o, i) walks its `length` elements in order: the same order, and so
// the same bits, as the CPU loop. Neighbouring threads take neighbouring i, so for inner > 1
// a warp reads contiguous memory at each step; a scan along the last dim (inner == 1) reads
// with a stride instead, which a per-row scan accepts for its simplicity.
template <typename in_t, typename acc_t, typename out_t>
__global__ void cumsum_kernel(const in_t* x, out_t* out, int64_t outer, int64_t length, int64_t inner,
                              bool reverse) {
  const int64_t line = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (line >= outer * inner) return;
  const int64_t base = (line / inner) * length * inner + line % inner;
  acc_t total = acc_t(0);
  for (int64_t step = 0; step < length; ++step) {
    const int64_t at = base + (reverse ? length - 1 - step : step) * inner;
    total += convert_element<acc_t>(x[at]);
    out[at] = convert_element<out_t>(total);
  }
}

}  // namespace

void cumsum(const Tensor& x, int64_t outer, int64_t length, int64_t inner, bool reverse, const Tensor& out) {
  DeviceGuard guard(x.device().index);
  const int64_t lines = outer * inner;
  if (lines == 0 || length == 0) return;
  dispatch_all(x.dtype(), [&](auto tag) {
    using in_t = decltype(tag);
    using acc_t = typename SumAccumulator<in_t>::type;
    using out_t = std::conditional_t<std::is_same_v<acc_t, uint64_t>, int64_t, in_t>;
    const int64_t blocks = (lines + kThreads - 1) / kThreads;
    cumsum_kernel<in_t, acc_t, out_t><<<grid_size(blocks, "cumsum"), kThreads, 0, current_stream()>>>(
        static_cast<const in_t*>(x.raw_data()), static_cast<out_t*>(out.raw_data()), outer, length, inner, reverse);
    MG_CUDA_CHECK_LAUNCH("cumsum");
  });
}

}  // namespace cuda
}  // namespace minigrad
