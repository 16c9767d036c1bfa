#pragma once
// The CUDA elementwise engine (declared in cuda/elementwise.h): two kernel templates serve
// every elementwise op, with one to four inputs, one output or two, contiguous or strided,
// broadcast or not. The cuda/elementwise_*.cu files compile them for the entries of
// kernels/elementwise_list.h.
//
// Functors. Each is called with its inputs' values, or with the output element's linear
// index first when it declares kTakesIndex; one that returns an OutputPair writes two
// outputs (launch_elementwise2). Both conventions are kernels/elementwise_functors.h's, and the
// CPU loops honour them too. A map with one output carries a second of type NoOutput,
// which every access skips at compile time: one kernel template serves both.
//
// Vectors. Each thread moves 16 bytes of an operand per access, the widest load or store
// one instruction does (LDG.128 / STG.128): float4 for float32, 8 halves, 2 doubles.
// N = 16 / (the widest operand's element size), one N for all operands, so that a thread
// handles the same N elements of each (a comparison of floats reads 16 bytes and writes 4
// bools). The vectors are cuda/vector.cuh's AlignedVector.
//
// The fast path, contiguous_kernel: every operand contiguous, of one shape, 16-byte aligned
// (the common case: activations, their backward, same-shape arithmetic). Vector v of every
// operand is at data + v * N, and the last n % N elements, which make no whole vector, are
// done one at a time.
//
// Everything else, rows_kernel. make_strided_layout (cuda/strided_layout.cuh) first merges
// the dims that every operand steps through together. The last merged dim is then a row of
// `columns` elements and the dims before it number the rows: x + bias over [16384, 8192] is
// 16384 rows of 8192 (the bias has stride 0 between rows); a transposed input keeps two
// dims. A thread finds where its row starts in each operand once (a multiply-add per outer
// dim, a division per outer dim beyond the first) and then walks along the row, where a
// column's offset is column x stride: no division per element. (The GPU has no integer
// divider; a 64-bit division is a software routine of several dozen instructions.) Rows are
// read N elements at a time when every operand allows it: stride 1 along the row and every
// row start aligned, or, for an input, stride 0 (one value broadcast along the row, read
// once); otherwise one element per access (misaligned slices, transposes).
//
// Slots. A slot is one vector, or one element when N = 1. Each thread takes one slot of
// each operand (16 bytes; 8 single elements when N = 1, 16 bytes of bfloat16), a block's
// threads side by side so that each access of a warp covers consecutive memory (coalesced),
// and issues the loads of all its inputs before it uses the first.
//
// Grid. 128 threads a block and one tile of 128 slots per block: the grid covers the whole
// tensor (131072 blocks for 2^27 bfloat16 elements) and the block scheduler starts a new
// block wherever one finishes. Measured on an H200 (docs/perf-notes.md), bf16 relu ran at
// 1.00 of the cudaMemcpy rate this way, where a grid of resident blocks looping over tiles
// ran at 0.89 and 2 or 4 slots per thread at 0.96-0.97 (more bytes in flight per thread did
// not help once the grid is full); bf16 gelu ran at 0.998 with 128 threads a block, 0.98
// with 256 and 0.95 with 512. A block loops only beyond the grid's limits (2^31 - 1 tiles in
// x; 65535 groups of rows in y). Rows shorter than a tile share a block: 2^row_shift threads
// per row, the power of two that covers a row with a thread's slots.
//
// Values. Each input element is converted to its compute type (float16/bfloat16 to float,
// one hardware conversion each, cuda/convert.cuh), the functor runs, and its result is
// rounded to out_t by one conversion: the CPU loop's arithmetic, never a copy in float.
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include <minigrad/core/shape.h>
#include <minigrad/cuda/convert.cuh>
#include <minigrad/cuda/elementwise.h>
#include <minigrad/cuda/runtime.h>
#include <minigrad/cuda/strided_layout.cuh>
#include <minigrad/cuda/vector.cuh>
#include <minigrad/kernels/elementwise_functors.h>

namespace minigrad {
namespace cuda {
namespace elementwise_engine {

constexpr int kThreads = 128;
constexpr int64_t kMaxGridX = 2147483647;  // the hardware's limits on gridDim.x
constexpr int64_t kMaxGridY = 65535;       // and gridDim.y
constexpr int kFullSM = 2048 / kThreads;   // blocks that fill an SM: 2048 threads on sm_80 and sm_90
// Operands of one map: an output and four inputs (AdamW's p, g, m, v), or two outputs and
// three inputs. Each is 80 bytes of rows_kernel's parameters, far below the 4 KiB limit.
constexpr int kMaxOperands = 5;

using elementwise::NoOutput;  // the second output of a map that has one

// The slots a thread loads before computing: one 16-byte vector of each operand, or 8
// single elements when N = 1.
template <int N>
constexpr int kSlotsPerThread = N > 1 ? 1 : 8;

// The elements per 16-byte access of the widest operand.
template <typename... Ts>
constexpr int vector_width() {
  return std::min({kElementsPer16Bytes<Ts>...});
}

// The rows: the merged dims before the last (outer), and the last (columns). The outer
// dims are stored innermost first (outer_sizes[0] is the dim just before the columns).
struct Rows {
  int outer_ndim = 0;
  IndexDivisor outer_sizes[kMaxDims];  // innermost first
  int64_t count = 1;         // the number of rows: the product of outer_sizes
  int64_t columns = 1;       // the elements of a row
  int row_shift = 0;         // 2^row_shift threads share a row: at most kThreads
};

// One operand: its element at row 0, column 0, and its strides in elements.
template <typename T>
struct Operand {
  T* data = nullptr;
  int64_t column_stride = 0;
  int64_t outer_strides[kMaxDims] = {};  // innermost first, as Rows::outer_sizes
};

// ---- device side ----

// The row's coordinates in the outer dims, innermost first (row-major: the innermost
// outer dim is the fastest).
struct RowCoordinates {
  int64_t index[kMaxDims];
};

// The loops are unrolled over kOuterDims (kMaxDims, or 1 where the host knows there is one
// outer dim: rows_kernel), so that every array index is a compile-time
// constant (the arrays stay in registers, not local memory), and leave at outer_ndim, so
// that a thread does the work of the dims there are and no more: x + bias (one outer dim)
// costs one multiply-add per operand and no division. (A test inside the loop instead of
// the exit computed all eight dims under predicates: 976 instructions for a thread's 8
// bfloat16 elements, and x + bias ran at 0.54 of the copy rate. With the exit placed before
// the store of the last coordinate, ptxas kept the coordinates in a 64-byte stack frame, in
// local memory, and x + bias ran at 0.76: `nvcc -Xptxas -v` shows the stack frame.)
template <int kOuterDims>
__device__ __forceinline__ RowCoordinates unravel_row(const Rows& rows, int64_t row) {
  RowCoordinates c{};
  c.index[0] = row;
#pragma unroll
  for (int d = 0; d + 1 < kOuterDims; ++d) {
    if (d + 1 >= rows.outer_ndim) break;  // the outermost dim takes what is left
    const auto [quotient, remainder] = rows.outer_sizes[d].divide_with_remainder(row);
    c.index[d] = remainder;
    c.index[d + 1] = quotient;
    row = quotient;
  }
  return c;
}

// One row of one operand: where it starts, and the stride between its columns.
// One row of one operand: where it starts, and the stride between its columns.
template <typename T>
struct RowOf {
  T* data;
  int64_t stride;
};

template <int kOuterDims, typename T>
__device__ __forceinline__ RowOf<T> row_of(const Operand<T>& operand, const RowCoordinates& c, int outer_ndim) {
  if constexpr (std::is_same_v<std::remove_const_t<T>, NoOutput>) {
    return {nullptr, 0};  // a map with one output: nothing to find
  } else {
    int64_t offset = 0;
#pragma unroll
    for (int d = 0; d < kOuterDims; ++d) {
      if (d >= outer_ndim) break;
      offset += c.index[d] * operand.outer_strides[d];
    }
    return {operand.data + offset, operand.column_stride};
  }
}

// Slot `slot` of a row. N > 1: N consecutive elements in one aligned access, or one value
// repeated when the stride is 0 (only where kRowBroadcast says an input may have stride 0
// along its row: the kernel for x + bias knows that none has, and tests nothing). N = 1:
// the element at slot x stride.
template <int N, bool kRowBroadcast, typename T>
__device__ __forceinline__ AlignedVector<T, N> load_slot(RowOf<const T> row, int64_t slot) {
  AlignedVector<T, N> x;
  if constexpr (N == 1) {
    x.values[0] = row.data[slot * row.stride];
  } else if (kRowBroadcast && row.stride == 0) {
    const T value = row.data[0];
#pragma unroll
    for (int j = 0; j < N; ++j) x.values[j] = value;
  } else {
    x = load_vector<N>(row.data + slot * N);
  }
  return x;
}

// The output's stride is 1 whenever N > 1 (the host checks). The second output of a map
// that has one output (NoOutput) is not stored.
template <int N, typename T>
__device__ __forceinline__ void store_slot(RowOf<T> row, int64_t slot, const AlignedVector<T, N>& y) {
  if constexpr (std::is_same_v<T, NoOutput>) {
    return;
  } else if constexpr (N == 1) {
    row.data[slot * row.stride] = y.values[0];
  } else {
    store_vector<N>(row.data + slot * N, y);
  }
}

// A thread's slots of one input, loaded together.
template <typename T, int N>
struct Chunk {
  AlignedVector<T, N> slot[kSlotsPerThread<N>];
};

template <int N, bool kRowBroadcast, typename T>
__device__ __forceinline__ Chunk<T, N> load_chunk(RowOf<const T> row, int64_t first_slot, int slot_step,
                                                   int64_t whole_slots) {
  Chunk<T, N> chunk;
#pragma unroll
  for (int k = 0; k < kSlotsPerThread<N>; ++k) {
    const int64_t slot = first_slot + k * slot_step;
    if (slot < whole_slots) chunk.slot[k] = load_slot<N, kRowBroadcast>(row, slot);
  }
  return chunk;
}

// One element: the inputs in their compute types, f (given the output element's linear
// index when it takes one: call_functor), its result rounded to out0_t; or, for a functor
// that returns an OutputPair, both results rounded to out0_t and out1_t. An index that f
// does not take is dead code, removed by the compiler.
template <typename out0_t, typename out1_t>
struct ElementResults {
  out0_t first;
  out1_t second;
};

template <typename out0_t, typename out1_t, typename F, typename... in_t>
__device__ __forceinline__ ElementResults<out0_t, out1_t> apply_functor(const F& f, int64_t index, in_t... x) {
  const auto result = elementwise::call_functor(f, index, convert_element<compute_t<in_t>>(x)...);
  if constexpr (std::is_same_v<out1_t, NoOutput>) {
    static_assert(!elementwise::is_output_pair<std::remove_cv_t<decltype(result)>>::value,
                  "a functor that returns an OutputPair needs two outputs: launch_elementwise2");
    return {convert_element<out0_t>(result), NoOutput{}};
  } else {
    static_assert(elementwise::is_output_pair<std::remove_cv_t<decltype(result)>>::value,
                  "launch_elementwise2 needs a functor that returns an OutputPair");
    return {convert_element<out0_t>(result.first), convert_element<out1_t>(result.second)};
  }
}

// Element `column` of a row, whose first element has the linear index row_index, computed
// and stored one at a time (the tails that make no whole vector).
template <typename out0_t, typename out1_t, typename F, typename... in_t>
__device__ __forceinline__ void map_element(const F& f, int64_t row_index, int64_t column, RowOf<out0_t> out0,
                                            RowOf<out1_t> out1, RowOf<const in_t>... in) {
  const ElementResults<out0_t, out1_t> y =
      apply_functor<out0_t, out1_t>(f, row_index + column, in.data[column * in.stride]...);
  out0.data[column * out0.stride] = y.first;
  if constexpr (!std::is_same_v<out1_t, NoOutput>) out1.data[column * out1.stride] = y.second;
}

// A thread's share of a row: slots first_slot, first_slot + slot_step, ... (those below
// whole_slots), loaded, computed and stored. The chunks are the arguments of
// compute_and_store, so every load is issued before the first value is used. row_index is
// the linear index of the row's first element (the index of column c is row_index + c).
template <int N, bool kRowBroadcast, typename out0_t, typename out1_t, typename F, typename... in_t>
__device__ __forceinline__ void map_slots(const F& f, int64_t row_index, RowOf<out0_t> out0, RowOf<out1_t> out1,
                                          int64_t first_slot, int slot_step, int64_t whole_slots,
                                          RowOf<const in_t>... in) {
  auto compute_and_store = [&](const Chunk<in_t, N>&... chunk) {
#pragma unroll
    for (int k = 0; k < kSlotsPerThread<N>; ++k) {
      const int64_t slot = first_slot + k * slot_step;
      if (slot < whole_slots) {
        AlignedVector<out0_t, N> result0;
        AlignedVector<out1_t, N> result1;
#pragma unroll
        for (int j = 0; j < N; ++j) {
          const ElementResults<out0_t, out1_t> y =
              apply_functor<out0_t, out1_t>(f, row_index + slot * N + j, chunk.slot[k].values[j]...);
          result0.values[j] = y.first;
          result1.values[j] = y.second;
        }
        store_slot<N>(out0, slot, result0);
        store_slot<N>(out1, slot, result1);
      }
    }
  };
  compute_and_store(load_chunk<N, kRowBroadcast>(in, first_slot, slot_step, whole_slots)...);
}

// The fast path: every operand contiguous, of one shape, aligned to N elements, so vector v
// of each is at data + v * N. One tile of kThreads x kSlotsPerThread vectors per block; the
// loop runs once unless the tensor has more tiles than the grid can number.
template <int N, typename out0_t, typename out1_t, typename F, typename... in_t>
__global__ void __launch_bounds__(kThreads)
    contiguous_kernel(F f, int64_t n, out0_t* out0, out1_t* out1, const in_t*... in) {
  const int64_t vectors = n / N;
  const int64_t tile = int64_t{kThreads} * kSlotsPerThread<N>;
  for (int64_t first = static_cast<int64_t>(blockIdx.x) * tile + threadIdx.x; first < vectors;
       first += static_cast<int64_t>(gridDim.x) * tile)
    map_slots<N, false>(f, 0, RowOf<out0_t>{out0, 1}, RowOf<out1_t>{out1, 1}, first, kThreads, vectors,
                        RowOf<const in_t>{in, 1}...);
  // The last n % N elements make no whole vector: one each, by the first threads of block 0.
  const int64_t element = vectors * N + threadIdx.x;
  if (blockIdx.x == 0 && element < n)
    map_element(f, 0, element, RowOf<out0_t>{out0, 1}, RowOf<out1_t>{out1, 1}, RowOf<const in_t>{in, 1}...);
}

// Everything else: rows (see the top of this file). 2^row_shift threads share a row;
// blockIdx.x numbers the row's tiles and blockIdx.y the groups of rows (a block loops over
// groups only beyond the grid's 65535 in y). At most kOuterDims outer dims (unravel_row).
// Merging dims keeps their row-major order, so row r's first element has the output's
// linear index r x columns.
//
// Registers: with one slot a thread, the bytes in flight are the resident threads' loads,
// so a kernel that leaves SMs part empty runs slower. Written plainly, this kernel takes 40
// registers (ptxas -v), 1536 resident threads of 2048, and bf16 x + bias ran at 0.83 of the
// copy rate (H200). For one outer dim and 2-byte types (the common broadcast of half
// types) it asks for a full SM, which caps it at 32 registers, and x + bias ran at 0.91;
// ptxas then spills a few bytes in three ops (division, where, pow; 4-36 bytes), none in
// the others. Wider types spill more under the cap (up to 220 bytes for double division)
// and keep 40.
//
// kRowBroadcast: whether an input may have stride 0 along its rows (a [rows, 1] operand:
// x - mean(x, -1, keepdim)), read as one value repeated. The host sends such maps to the
// kernel for any number of outer dims, so that the one-outer-dim kernel (x + bias) loads
// every vector without testing a stride.
template <int N, int kOuterDims, bool kRowBroadcast, typename out0_t, typename out1_t, typename F,
          typename... in_t>
__global__ void __launch_bounds__(kThreads, kOuterDims == 1 && N == 8 ? kFullSM : 1)
    rows_kernel(F f, Rows rows, Operand<out0_t> out0, Operand<out1_t> out1, Operand<const in_t>... in) {
  const int slot_step = 1 << rows.row_shift;
  const int rows_per_block = kThreads >> rows.row_shift;
  const int thread = static_cast<int>(threadIdx.x);
  const int64_t whole_slots = rows.columns / N;
  const int64_t first_slot =
      static_cast<int64_t>(blockIdx.x) * slot_step * kSlotsPerThread<N> + (thread & (slot_step - 1));
  for (int64_t row = static_cast<int64_t>(blockIdx.y) * rows_per_block + (thread >> rows.row_shift);
       row < rows.count; row += static_cast<int64_t>(gridDim.y) * rows_per_block) {
    const RowCoordinates coordinates = unravel_row<kOuterDims>(rows, row);
    const int64_t row_index = row * rows.columns;
    // Where the row starts in each operand, found once and used by the vectors and the tail.
    auto map_row = [&](RowOf<out0_t> out0_row, RowOf<out1_t> out1_row, RowOf<const in_t>... in_rows) {
      map_slots<N, kRowBroadcast>(f, row_index, out0_row, out1_row, first_slot, slot_step, whole_slots, in_rows...);
      // The row's last columns % N elements, one at a time, by the thread whose next slot
      // they would be. The outputs' stride is 1 here (N > 1), said so to the compiler.
      if constexpr (N > 1) {
        const int leftover = static_cast<int>(rows.columns - whole_slots * N);
#pragma unroll
        for (int k = 0; k < kSlotsPerThread<N>; ++k) {
          if (leftover > 0 && first_slot + k * slot_step == whole_slots) {
            for (int j = 0; j < leftover; ++j)
              map_element(f, row_index, whole_slots * N + j, RowOf<out0_t>{out0_row.data, 1},
                          RowOf<out1_t>{out1_row.data, 1}, in_rows...);
          }
        }
      }
    };
    map_row(row_of<kOuterDims>(out0, coordinates, rows.outer_ndim),
            row_of<kOuterDims>(out1, coordinates, rows.outer_ndim),
            row_of<kOuterDims>(in, coordinates, rows.outer_ndim)...);
  }
}

// ---- host side ----

// Operand k of the merged layout: its pointer, and its strides along and between rows.
template <typename T, int kOperands>
Operand<T> make_operand(void* data, const StridedLayout<kOperands>& layout, int k) {
  Operand<T> operand;
  operand.data = static_cast<T*>(data);
  if (layout.ndim > 0) {
    operand.column_stride = layout.strides[k][layout.ndim - 1];
    const int outer_ndim = layout.ndim - 1;
    for (int d = 0; d < outer_ndim; ++d) operand.outer_strides[d] = layout.strides[k][outer_ndim - 1 - d];
  }
  return operand;
}

// Whether every operand can be accessed n elements at a time along its rows: stride 1 and
// each row start aligned to n elements (the pointer, and every stride between rows), or,
// for an input, stride 0. Operands 0 .. outputs - 1 are the outputs.
template <int kOperands>
bool rows_allow_vectors(const StridedLayout<kOperands>& layout, const std::array<const void*, kOperands>& data,
                        const std::array<size_t, kOperands>& element_sizes, int outputs, int n) {
  if (layout.ndim == 0 || layout.sizes[layout.ndim - 1].value() < n) return false;
  for (int k = 0; k < kOperands; ++k) {
    const int64_t column_stride = layout.strides[k][layout.ndim - 1];
    if (k >= outputs && column_stride == 0) continue;
    if (column_stride != 1) return false;
    if (reinterpret_cast<uintptr_t>(data[k]) % (n * element_sizes[k]) != 0) return false;
    for (int d = 0; d + 1 < layout.ndim; ++d)
      if (layout.strides[k][d] % n != 0) return false;
  }
  return true;
}

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// One map: out0 (and out1 when out1_t is not NoOutput) = f(inputs...). The layout's
// operands are the outputs, then the inputs.
template <typename out0_t, typename out1_t, typename... in_t>
struct Launcher {
  static constexpr int kOutputs = std::is_same_v<out1_t, NoOutput> ? 1 : 2;
  static constexpr int kOperands = kOutputs + static_cast<int>(sizeof...(in_t));
  static constexpr int kVector = vector_width<out0_t, out1_t, in_t...>();  // NoOutput (1 byte) never narrows it
  using Inputs = std::array<const Tensor*, sizeof...(in_t)>;

  template <typename F>
  static void run(const char* op, const Tensor& out0, const Tensor* out1, const Inputs& inputs, const F& f) {
    static_assert(kOperands <= kMaxOperands, "too many operands for one elementwise map");
    if (out0.numel() == 0) return;
    run_with(op, out0, out1, inputs, f, std::index_sequence_for<in_t...>{});
  }

  // I... numbers the inputs: input I is operand kOutputs + I of the layout.
  template <typename F, size_t... I>
  static void run_with(const char* op, const Tensor& out0, const Tensor* out1, const Inputs& inputs, const F& f,
                       std::index_sequence<I...>) {
    const std::array<Shape, sizeof...(in_t)> input_strides = {broadcast_strides(*inputs[I], out0.sizes())...};
    std::array<const int64_t*, kOperands> strides{};
    std::array<const void*, kOperands> data{};
    std::array<size_t, kOperands> element_sizes{};
    strides[0] = out0.strides().data();
    data[0] = out0.raw_data();
    element_sizes[0] = sizeof(out0_t);
    if constexpr (kOutputs == 2) {
      strides[1] = out1->strides().data();
      data[1] = out1->raw_data();
      element_sizes[1] = sizeof(out1_t);
    }
    ((strides[kOutputs + I] = input_strides[I].data(), data[kOutputs + I] = inputs[I]->raw_data(),
      element_sizes[kOutputs + I] = sizeof(in_t)),
     ...);
    const StridedLayout<kOperands> layout = make_strided_layout<kOperands>(out0.sizes(), strides, op);
    const bool vectorized = rows_allow_vectors<kOperands>(layout, data, element_sizes, kOutputs, kVector);

    const int device = out0.device().index;
    DeviceGuard guard(device);
    const cudaStream_t stream = current_stream(device);
    out1_t* const out1_data = kOutputs == 2 ? static_cast<out1_t*>(out1->raw_data()) : nullptr;

    if (vectorized && layout.is_contiguous()) {
      const int64_t n = out0.numel();
      const int64_t tiles = ceil_div(n / kVector, int64_t{kThreads} * kSlotsPerThread<kVector>);
      const auto blocks = static_cast<unsigned int>(std::clamp<int64_t>(tiles, 1, kMaxGridX));
      contiguous_kernel<kVector, out0_t, out1_t, F, in_t...><<<blocks, kThreads, 0, stream>>>(
          f, n, static_cast<out0_t*>(out0.raw_data()), out1_data, static_cast<const in_t*>(data[kOutputs + I])...);
      MG_CUDA_CHECK_LAUNCH(op);
      return;
    }

    Rows rows;
    if (layout.ndim > 0) {
      rows.outer_ndim = layout.ndim - 1;
      rows.columns = layout.sizes[layout.ndim - 1].value();
      for (int d = 0; d < rows.outer_ndim; ++d) {
        rows.outer_sizes[d] = layout.sizes[rows.outer_ndim - 1 - d];
        rows.count *= rows.outer_sizes[d].value();
      }
    }
    const int slots_per_thread = vectorized ? kSlotsPerThread<kVector> : kSlotsPerThread<1>;
    const int64_t slots = ceil_div(rows.columns, vectorized ? kVector : 1);
    while ((1 << rows.row_shift) < kThreads && (int64_t{1} << rows.row_shift) * slots_per_thread < slots)
      ++rows.row_shift;
    const int64_t tiles = ceil_div(slots, (int64_t{1} << rows.row_shift) * slots_per_thread);
    const int64_t row_groups = ceil_div(rows.count, kThreads >> rows.row_shift);
    MG_CHECK(tiles <= kMaxGridX, "{}: a row of {} elements is too long for the grid", op, rows.columns);
    const int64_t groups_in_grid = std::min(row_groups, kMaxGridY);
    const dim3 grid(static_cast<unsigned int>(tiles), static_cast<unsigned int>(groups_in_grid));
    const Operand<out0_t> out0_operand = make_operand<out0_t>(out0.raw_data(), layout, 0);
    Operand<out1_t> out1_operand;
    if constexpr (kOutputs == 2) out1_operand = make_operand<out1_t>(out1_data, layout, 1);
    // Three kernels: vectors with one outer dim and no input broadcast along the rows (the
    // common broadcast, x + bias), vectors for the rest, and single elements (strided or
    // misaligned operands, any number of dims).
    bool row_broadcast = false;
    if (layout.ndim > 0)
      for (int k = kOutputs; k < kOperands; ++k) row_broadcast |= layout.strides[k][layout.ndim - 1] == 0;
    if (vectorized && rows.outer_ndim <= 1 && !row_broadcast)
      rows_kernel<kVector, 1, false, out0_t, out1_t, F, in_t...><<<grid, kThreads, 0, stream>>>(
          f, rows, out0_operand, out1_operand,
          make_operand<const in_t>(inputs[I]->raw_data(), layout, kOutputs + I)...);
    else if (vectorized)
      rows_kernel<kVector, kMaxDims, true, out0_t, out1_t, F, in_t...><<<grid, kThreads, 0, stream>>>(
          f, rows, out0_operand, out1_operand,
          make_operand<const in_t>(inputs[I]->raw_data(), layout, kOutputs + I)...);
    else
      rows_kernel<1, kMaxDims, true, out0_t, out1_t, F, in_t...><<<grid, kThreads, 0, stream>>>(
          f, rows, out0_operand, out1_operand,
          make_operand<const in_t>(inputs[I]->raw_data(), layout, kOutputs + I)...);
    MG_CUDA_CHECK_LAUNCH(op);
  }
};

}  // namespace elementwise_engine

template <typename F, typename out_t, typename... in_t>
void ElementwiseKernel<F, out_t, in_t...>::launch(const char* op, const Tensor& out0, const Tensor* out1,
                                                   const Inputs& inputs, const F& f) {
  using Outputs = elementwise::output_types<out_t>;
  elementwise_engine::Launcher<typename Outputs::first, typename Outputs::second, in_t...>::run(op, out0, out1,
                                                                                              inputs, f);
}

}  // namespace cuda
}  // namespace minigrad

// The engine compiled for one entry of kernels/elementwise_list.h, written inside namespace
// minigrad::cuda: cuda/elementwise_math.cu holds
//   MG_ELEMENTWISE_MATH_KERNELS(MG_INSTANTIATE_ELEMENTWISE)
#define MG_INSTANTIATE_ELEMENTWISE(F, ...) template struct ElementwiseKernel<F, __VA_ARGS__>;
