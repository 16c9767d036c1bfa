#pragma once
// A host emulation of the part of the CUDA execution model that the flash-attention kernels
// (cuda/flash_attention.cu, cuda/mma.cuh) and the row kernels (cuda/softmax_dropout.cu,
// cuda/softmax.cu, cuda/cross_entropy.cu) use, so that their own code runs, thread by thread,
// on a machine without a GPU (bench/experiments/warp_emulation/run and run-rows).
//
// What is emulated:
//   - a block is one fiber per thread (ucontext stacks, switched with _setjmp/_longjmp), run
//     cooperatively on one OS thread: a fiber runs until it reaches a barrier, then yields.
//     Blocks run one after the other.
//   - __syncthreads() is a barrier of the block's threads; the warp collectives (ldmatrix,
//     mma.sync, __shfl_xor_sync, __shfl_sync, __any_sync) are barriers of the warp's 32 lanes that
//     exchange the lanes' operands, as the hardware does, through a per-warp table.
//   - ldmatrix.m8n8 (x1, x2, x4, with or without .trans), mma.sync.m16n8k16 (f16 and bf16
//     inputs, f32 accumulators) and cp.async (+ commit_group, wait_group) follow the fragment
//     layouts of the PTX ISA, written here from the ISA's figures and not from cuda/mma.cuh:
//     a wrong lane -> row pointer or register order in mma.cuh gives wrong numbers.
//   - dynamic shared memory is one buffer per block (128-byte aligned, guard bands on both
//     sides); shared addresses are byte offsets into it, as __cvta_generic_to_shared gives.
//
// What is checked (each failure is counted in emu::errors and printed, the first 40 in full):
//   - shared-memory bounds and alignment of every ldmatrix row and cp.async destination;
//   - every cp.async source lies in the global memory the launch may read (before_launch);
//   - cp.async data lands only at the cp.async.wait_group that covers it: until then the
//     destination holds 0xFFFF (NaN in f16 and bf16), and an ldmatrix of it is an error;
//   - races between cp.async writes and ldmatrix reads of different threads inside one
//     __syncthreads() interval (read-after-write, write-after-read, write-after-write);
//   - ldmatrix reads of shared memory never written (it starts as 0x7FFF, also a NaN);
//   - the lanes of a warp meet at the same collective (not one lane at an mma while another
//     is at an ldmatrix), every thread reaches every __syncthreads(), nothing deadlocks;
//   - a thread does not exit with cp.async copies still in flight;
//   - the launch itself: 1-D or 2-D grid and block, dynamic shared memory above 48 KiB
//     only after cudaFuncSetAttribute allowed it, and never above sm_80's 163 KiB.
//
// What it cannot check: timing and occupancy; real concurrency (a fiber runs until its next
// barrier, so a race through plain loads and stores of shared or global memory goes unseen:
// only cp.async and ldmatrix accesses are tracked); the hardware's rounding (mma is summed in
// float64 and rounded once, exp2f and friends are the host's libm, no fused multiply-adds);
// register use and spills; bank conflicts.
//
// Built with g++ (not nvcc): the CUDA headers give the types (__half, __nv_bfloat16, dim3)
// and the host versions of the conversion intrinsics; this header then redefines the
// execution-space keywords and threadIdx/blockIdx/__syncthreads/the shuffles. It must be
// included before any other header that uses those names.
#include <setjmp.h>
#include <ucontext.h>

// glibc's fortified longjmp (__longjmp_chk) refuses to jump between the fibers' stacks.
#if defined(__USE_FORTIFY_LEVEL) && __USE_FORTIFY_LEVEL > 0
#error "emu.h: build with -U_FORTIFY_SOURCE -D_FORTIFY_SOURCE=0 (the fibers switch stacks with longjmp)"
#endif

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

// The CUDA headers define these as attributes nvcc understands; for g++ every function is a
// host function and inline does what __forceinline__ asks.
#undef __global__
#undef __device__
#undef __host__
#undef __forceinline__
#undef __launch_bounds__
#undef __align__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))

namespace emu {

struct Index {
  unsigned x = 0, y = 0, z = 0;
};

constexpr int kMaxThreads = 1024;
constexpr int kWarpSize = 32;
constexpr size_t kStackBytes = 256 * 1024;   // per thread; the kernels keep their tiles in registers
constexpr size_t kDefaultShared = 48 * 1024;  // dynamic shared memory a launch gets without opt-in
constexpr size_t kMaxShared = 166912;         // sm_80's opt-in maximum (163 KiB); sm_90's is larger
constexpr size_t kGuardBytes = 2048;          // around the shared buffer, checked after each block
constexpr uint16_t kUnwritten = 0x7FFF;       // shared memory before anything wrote it (NaN)
constexpr uint16_t kInFlight = 0xFFFF;        // a cp.async destination until its data lands (NaN)
constexpr uint8_t kGuardByte = 0xA5;

// ---- errors ----

inline long errors = 0;
inline long error_prints = 0;
inline std::string kernel_name = "?";  // the running kernel's signature (enter_kernel)
inline Index block_idx, grid_dim, block_dim;

struct Fiber;
inline Fiber* cur = nullptr;  // the running thread; nullptr outside a kernel
inline unsigned current_thread();

#define EMU_ERR(...)                                                                                  \
  do {                                                                                                \
    ++::emu::errors;                                                                                  \
    if (::emu::error_prints++ < 40) {                                                                 \
      fprintf(stderr, "[emu] %s, block %u, thread %u: ", ::emu::kernel_name.c_str(), ::emu::block_idx.x, \
              ::emu::current_thread());                                                               \
      fprintf(stderr, __VA_ARGS__);                                                                   \
      fprintf(stderr, "\n");                                                                          \
    }                                                                                                 \
  } while (0)

// ---- threads as fibers ----

// A cp.async copy in flight: `bytes` bytes from src (src_bytes of them read, the rest zero)
// to the shared byte offset dst.
struct Copy {
  size_t dst;
  const char* src;
  int bytes, src_bytes;
};

// What a waiting thread waits for (the deadlock report).
enum class Wait { None, Block, Warp };

struct Fiber {
  jmp_buf context;     // where the fiber resumes (after its first start)
  ucontext_t initial;  // its first start, on its own stack
  char* stack = nullptr;
  bool started = false, done = false;
  Index tid;
  unsigned linear = 0;  // the thread's number in its block, x fastest: warps are its runs of 32
  unsigned collectives = 0;  // warp collectives so far: their sequence numbers
  Wait waiting = Wait::None;
  std::vector<Copy> open;                 // issued since the last commit_group
  std::deque<std::vector<Copy>> groups;   // committed, oldest first
};

struct Barrier {
  int expected = 0, arrived = 0;
  unsigned generation = 0;
};

inline Fiber fibers[kMaxThreads];
inline int nthreads = 0;
inline jmp_buf scheduler;  // where the last fiber of a block returns to
inline int idle_switches = 0;
inline Barrier block_barrier;
inline Barrier warp_barriers[kMaxThreads / kWarpSize];

inline unsigned current_thread() { return cur ? cur->linear : 0u; }
inline int lane() { return static_cast<int>(cur->linear) % kWarpSize; }
inline int warp() { return static_cast<int>(cur->linear) / kWarpSize; }

[[noreturn]] inline void deadlock() {
  fflush(stdout);
  fprintf(stderr, "[emu] %s, block %u: DEADLOCK, every live thread waits:", kernel_name.c_str(), block_idx.x);
  int shown = 0;
  for (int t = 0; t < nthreads && shown < 16; ++t)
    if (!fibers[t].done) {
      fprintf(stderr, " %d(%s)", t, fibers[t].waiting == Wait::Block ? "__syncthreads" : "warp collective");
      ++shown;
    }
  int finished = 0;
  for (int t = 0; t < nthreads; ++t) finished += fibers[t].done;
  fprintf(stderr, " ...; %d threads have exited\n", finished);
  abort();
}

inline void resume(Fiber* f) {
  cur = f;
  if (!f->started) {
    f->started = true;
    setcontext(&f->initial);
  }
  _longjmp(f->context, 1);
}

inline Fiber* next_live(Fiber* from) {
  const int i = static_cast<int>(from - fibers);
  for (int s = 1; s <= nthreads; ++s) {
    Fiber* f = &fibers[(i + s) % nthreads];
    if (!f->done) return f;
  }
  return nullptr;
}

// Only a thread waiting at a barrier switches. A whole round of switches in which no thread
// arrived anywhere or exited means every live thread waits for one that never comes.
__attribute__((noinline)) inline void switch_thread() {
  if (++idle_switches > 4 * nthreads + 16) deadlock();
  Fiber* n = next_live(cur);
  if (n == cur) return;
  if (!_setjmp(cur->context)) resume(n);
}

inline void arrive_and_wait(Barrier& b, Wait what) {
  idle_switches = 0;
  const unsigned generation = b.generation;
  if (++b.arrived == b.expected) {
    b.arrived = 0;
    ++b.generation;
    return;
  }
  cur->waiting = what;
  while (b.generation == generation) switch_thread();
  cur->waiting = Wait::None;
  idle_switches = 0;
}

inline std::function<void()> block_body;  // one thread's run of the kernel

inline void fiber_entry(int t) {
  block_body();
  fibers[t].done = true;
  idle_switches = 0;
  Fiber* n = next_live(&fibers[t]);
  if (!n) _longjmp(scheduler, 1);
  resume(n);
}

inline void syncthreads() { arrive_and_wait(block_barrier, Wait::Block); }

// Called by the first statement of every kernel (rewrite.py puts it there): the signature,
// template arguments included, for the messages.
inline void enter_kernel(const char* pretty_function) {
  if (kernel_name != pretty_function) kernel_name = pretty_function;
}

// ---- shared memory ----

inline std::vector<uint8_t> shared_storage;
inline uint8_t* shared_buf = nullptr;  // the block's dynamic shared memory
inline size_t shared_bytes = 0;

// Per 16-bit element of shared memory: who last wrote and read it by cp.async / ldmatrix.
struct Shadow {
  int write_epoch = -1, read_epoch = -1;  // __syncthreads() intervals
  int16_t writer = -1, reader = -1;       // reader -2: several threads
  int16_t in_flight = -1;                 // the thread whose cp.async to it has not landed
  bool written = false;
};
inline std::vector<Shadow> shadow;

inline int epoch() { return static_cast<int>(block_barrier.generation); }

template <typename T>
T* dynamic_shared(size_t alignment) {
  if (reinterpret_cast<uintptr_t>(shared_buf) % alignment) EMU_ERR("dynamic shared memory is not %zu-byte aligned", alignment);
  return reinterpret_cast<T*>(shared_buf);
}

// A generic pointer into shared memory as a shared-window address: the byte offset from the
// start of the dynamic shared memory (there is no static shared memory). A pointer outside it
// gives an address the users below report as out of bounds.
inline size_t cvta_generic_to_shared(const void* p) {
  return static_cast<size_t>(reinterpret_cast<uintptr_t>(p) - reinterpret_cast<uintptr_t>(shared_buf));
}

// The shadow index of shared address `address`, `bytes` long, or SIZE_MAX (reported) if it is
// not inside the block's dynamic shared memory or not aligned to `alignment`.
inline size_t shared_element(uint64_t address, size_t bytes, size_t alignment, const char* what) {
  if (shared_buf == nullptr || address > shared_bytes || address + bytes > shared_bytes) {
    EMU_ERR("%s: shared address %lld (%zu bytes) outside the %zu bytes of dynamic shared memory", what,
            static_cast<long long>(static_cast<int64_t>(address)), bytes, shared_bytes);
    return SIZE_MAX;
  }
  if (address % alignment) {
    EMU_ERR("%s: shared address %llu not %zu-byte aligned", what, static_cast<unsigned long long>(address), alignment);
    return SIZE_MAX;
  }
  return static_cast<size_t>(address / 2);
}

inline uint16_t shared_element_bits(size_t e) {
  uint16_t v;
  memcpy(&v, shared_buf + 2 * e, 2);
  return v;
}

inline void on_ldmatrix_read(size_t e) {
  Shadow& s = shadow[e];
  const int E = epoch();
  const int16_t me = static_cast<int16_t>(cur->linear);
  if (s.in_flight >= 0)
    EMU_ERR("ldmatrix reads shared element %zu while thread %d's cp.async to it is in flight", e, s.in_flight);
  else if (!s.written && shared_element_bits(e) == kUnwritten)
    EMU_ERR("ldmatrix reads shared element %zu, which nothing wrote", e);
  else if (s.write_epoch == E && s.writer != me)
    EMU_ERR("race on shared element %zu: cp.async by thread %d, ldmatrix by thread %d, no __syncthreads() between",
            e, s.writer, me);
  if (s.read_epoch != E) {
    s.read_epoch = E;
    s.reader = me;
  } else if (s.reader != me) {
    s.reader = -2;
  }
}

inline void on_copy_issued(size_t e) {
  Shadow& s = shadow[e];
  const int E = epoch();
  const int16_t me = static_cast<int16_t>(cur->linear);
  if (s.read_epoch == E && s.reader == -2)
    EMU_ERR("race on shared element %zu: read by the ldmatrix of several threads and overwritten by thread %d's "
            "cp.async, no __syncthreads() between", e, me);
  else if (s.read_epoch == E && s.reader != me)
    EMU_ERR("race on shared element %zu: read by thread %d's ldmatrix and overwritten by thread %d's cp.async, "
            "no __syncthreads() between", e, s.reader, me);
  if (s.in_flight >= 0 && s.in_flight != me)
    EMU_ERR("race on shared element %zu: cp.async of threads %d and %d in flight together", e, s.in_flight, me);
  else if (s.write_epoch == E && s.writer != me)
    EMU_ERR("race on shared element %zu: cp.async of threads %d and %d, no __syncthreads() between", e, s.writer, me);
  s.in_flight = me;
}

inline void on_copy_landed(size_t e) {
  Shadow& s = shadow[e];
  s.in_flight = -1;
  s.write_epoch = epoch();
  s.writer = static_cast<int16_t>(cur->linear);
  s.written = true;
}

// ---- global memory a launch may read by cp.async ----

inline std::vector<std::pair<const char*, const char*>> readable;
inline void add_readable(const void* p, size_t bytes) {
  readable.push_back({static_cast<const char*>(p), static_cast<const char*>(p) + bytes});
}
inline bool is_readable(const void* p, size_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (const auto& r : readable)
    if (c >= r.first && c + bytes <= r.second) return true;
  return false;
}
// Called with a pointer to the kernel's parameter before each launch: calls add_readable for
// what the kernel may read (the driver knows the parameter type; emu does not).
inline std::function<void(const void* params)> before_launch;

// ---- cp.async ----

// cp.async.{ca,cg}.shared.global [dst], [src], cp_size, src_size.
inline void cp_async(const char* cache_op, uint64_t dst, const void* src, int cp_size, uint64_t src_size) {
  const bool cg = strcmp(cache_op, "cg") == 0;
  if (cg ? cp_size != 16 : (cp_size != 4 && cp_size != 8 && cp_size != 16))
    EMU_ERR("cp.async.%s with cp-size %d", cache_op, cp_size);
  if (src_size > static_cast<uint64_t>(cp_size)) EMU_ERR("cp.async src-size %llu > cp-size %d", (unsigned long long)src_size, cp_size);
  const size_t e = shared_element(dst, cp_size, cp_size, "cp.async destination");
  if (reinterpret_cast<uintptr_t>(src) % cp_size) EMU_ERR("cp.async source %p not %d-byte aligned", src, cp_size);
  // With src-size 0 nothing is read, but the address must still be one the kernel may use.
  if (!is_readable(src, src_size > 0 ? src_size : 1))
    EMU_ERR("cp.async source %p (%llu bytes) outside the global memory this launch may read", src,
            (unsigned long long)src_size);
  if (e == SIZE_MAX) return;
  for (int i = 0; i < cp_size / 2; ++i) {
    on_copy_issued(e + i);
    memcpy(shared_buf + 2 * (e + i), &kInFlight, 2);
  }
  cur->open.push_back({static_cast<size_t>(dst), static_cast<const char*>(src), cp_size,
                       static_cast<int>(src_size < static_cast<uint64_t>(cp_size) ? src_size : cp_size)});
}

inline void cp_async_commit_group() {
  cur->groups.push_back(std::move(cur->open));
  cur->open.clear();
}

// The copies of this thread's oldest groups land until at most `pending` groups are left.
inline void cp_async_wait_group(int pending) {
  while (static_cast<int>(cur->groups.size()) > pending) {
    for (const Copy& c : cur->groups.front()) {
      uint8_t* d = shared_buf + c.dst;
      memcpy(d, c.src, static_cast<size_t>(c.src_bytes));
      memset(d + c.src_bytes, 0, static_cast<size_t>(c.bytes - c.src_bytes));
      for (int i = 0; i < c.bytes / 2; ++i) on_copy_landed(c.dst / 2 + i);
    }
    cur->groups.pop_front();
  }
}

// ---- warp collectives ----

enum class Collective : int { Ldmatrix, Mma, Shuffle, ShuffleIndexed, Vote, Syncwarp };
inline const char* collective_name(Collective c) {
  return c == Collective::Ldmatrix         ? "ldmatrix"
         : c == Collective::Mma            ? "mma.sync"
         : c == Collective::Shuffle        ? "__shfl_xor_sync"
         : c == Collective::ShuffleIndexed ? "__shfl_sync"
         : c == Collective::Vote           ? "__any_sync"
                                           : "__syncwarp";
}

// Each lane writes its operands into the warp's table, waits for the other 31, then reads
// theirs. Two tables, by the parity of the collective's sequence number: a lane that is
// already at the next collective does not overwrite operands the others are still reading.
struct WarpTable {
  unsigned sequence[32];
  Collective kind[32];
  int variant[32];  // what must agree besides the kind (ldmatrix's shape, a shuffle's mask)
  uint64_t address[32];
  uint32_t a[32][4], b[32][2];
  float value[32];
};
inline WarpTable warp_tables[kMaxThreads / kWarpSize][2];

inline WarpTable& begin_collective(Collective kind, int variant) {
  const unsigned sequence = cur->collectives++;
  WarpTable& t = warp_tables[warp()][sequence & 1u];
  const int l = lane();
  t.sequence[l] = sequence;
  t.kind[l] = kind;
  t.variant[l] = variant;
  return t;
}

inline void exchange(WarpTable& t) {
  arrive_and_wait(warp_barriers[warp()], Wait::Warp);
  const int l = lane();
  const int first = 0;
  if (t.kind[l] != t.kind[first] || t.sequence[l] != t.sequence[first] || t.variant[l] != t.variant[first])
    EMU_ERR("the lanes of warp %d diverge: lane 0 is at %s #%u, lane %d at %s #%u", warp(),
            collective_name(t.kind[first]), t.sequence[first], l, collective_name(t.kind[l]), t.sequence[l]);
}

// ldmatrix.sync.aligned.m8n8.x{count}[.trans].shared.b16: lanes 8i .. 8i+7 give the rows of
// 8x8 tile i (16 bytes each); every lane receives in d[i] the elements [g][2t, 2t+1] of tile
// i, or with .trans [2t][g] and [2t+1][g] (g = lane / 4, t = lane % 4).
inline void ldmatrix(int count, bool trans, uint64_t address, uint32_t* d) {
  WarpTable& table = begin_collective(Collective::Ldmatrix, count * 2 + trans);
  const int l = lane();
  size_t e = SIZE_MAX;
  if (l < 8 * count) {  // only these lanes' addresses are used
    e = shared_element(address, 16, 16, "ldmatrix row");
    if (e != SIZE_MAX)
      for (int i = 0; i < 8; ++i) on_ldmatrix_read(e + i);
  }
  table.address[l] = e == SIZE_MAX ? UINT64_MAX : e;
  exchange(table);
  auto element = [&](int tile, int row, int col) -> uint16_t {
    const uint64_t row_start = table.address[8 * tile + row];
    return row_start == UINT64_MAX ? kInFlight : shared_element_bits(row_start + col);
  };
  const int g = l / 4, t = l % 4;
  for (int i = 0; i < count; ++i) {
    const uint16_t lo = trans ? element(i, 2 * t, g) : element(i, g, 2 * t);
    const uint16_t hi = trans ? element(i, 2 * t + 1, g) : element(i, g, 2 * t + 1);
    d[i] = static_cast<uint32_t>(lo) | static_cast<uint32_t>(hi) << 16;
  }
}

enum class Type : int { F16, BF16 };

template <Type kType>
inline double element_value(uint16_t bits) {
  if constexpr (kType == Type::BF16) {
    const uint32_t x = static_cast<uint32_t>(bits) << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
  } else {
    return __half2float(__ushort_as_half(bits));
  }
}

// mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32: d = a b + c over the warp.
// Fragments (g = lane / 4, t = lane % 4; two elements a register, the lower index low):
//   a[0] = A[g][2t, 2t+1]  a[1] = A[g+8][2t, 2t+1]  a[2] = A[g][2t+8, 2t+9]  a[3] = A[g+8][2t+8, 2t+9]
//   b[0] = B[2t, 2t+1][g]  b[1] = B[2t+8, 2t+9][g]
//   c[0], c[1] = C[g][2t, 2t+1]  c[2], c[3] = C[g+8][2t, 2t+1]
// The products of 16-bit values are exact in float64; the sum is rounded to float32 once
// (the hardware's order and rounding of the partial sums are not modelled).
template <Type kType>
inline void mma_m16n8k16(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4]) {
  WarpTable& table = begin_collective(Collective::Mma, static_cast<int>(kType));
  const int l = lane();
  for (int i = 0; i < 4; ++i) table.a[l][i] = a[i];
  for (int i = 0; i < 2; ++i) table.b[l][i] = b[i];
  exchange(table);
  auto half_of = [](uint32_t r, int k) { return static_cast<uint16_t>(k % 2 ? r >> 16 : r & 0xFFFFu); };
  auto A = [&](int row, int k) {
    return element_value<kType>(half_of(table.a[(row % 8) * 4 + (k % 8) / 2][row / 8 + 2 * (k / 8)], k));
  };
  auto B = [&](int k, int n) { return element_value<kType>(half_of(table.b[n * 4 + (k % 8) / 2][k / 8], k)); };
  const int g = l / 4, t = l % 4;
  for (int e = 0; e < 4; ++e) {
    const int row = g + e / 2 * 8, col = 2 * t + e % 2;
    double sum = c[e];
    for (int k = 0; k < 16; ++k) sum += A(row, k) * B(k, col);
    d[e] = static_cast<float>(sum);
  }
}

// ex2.approx.ftz.f32: 2^x with subnormal inputs and results flushed to zero (the host's
// exp2f stands for the hardware's 2-ulp approximation).
inline float ex2_approx_ftz(float x) {
  if (std::fpclassify(x) == FP_SUBNORMAL) x = 0.0f;
  const float y = std::exp2(x);
  return std::fpclassify(y) == FP_SUBNORMAL ? 0.0f : y;
}

// A full-warp shuffle (the only mask emulated): v of lane `source` (modulo 32). `kind` tells
// the two shuffles apart, so that lanes meeting at different ones are reported.
template <typename T>
inline T shuffle(Collective kind, unsigned mask, T v, int source) {
  static_assert(sizeof(T) == 4, "32-bit shuffles only");
  WarpTable& table = begin_collective(kind, static_cast<int>(mask));
  if (mask != 0xffffffffu)
    EMU_ERR("%s with mask %#x: only full-warp shuffles are emulated", collective_name(kind), mask);
  memcpy(&table.value[lane()], &v, 4);
  exchange(table);
  T out;
  memcpy(&out, &table.value[source % kWarpSize], 4);
  return out;
}

// __shfl_xor_sync(mask, v, lane_mask): v of lane lane ^ lane_mask.
template <typename T>
inline T shfl_xor_sync(unsigned mask, T v, int lane_mask) {
  return shuffle(Collective::Shuffle, mask, v, lane() ^ lane_mask);
}

// __shfl_sync(mask, v, src_lane): v of lane src_lane.
template <typename T>
inline T shfl_sync(unsigned mask, T v, int src_lane) {
  return shuffle(Collective::ShuffleIndexed, mask, v, src_lane);
}

// __any_sync(mask, predicate) for a full warp: whether any lane's predicate is true.
inline bool any_sync(unsigned mask, bool predicate) {
  WarpTable& table = begin_collective(Collective::Vote, static_cast<int>(mask));
  if (mask != 0xffffffffu) EMU_ERR("__any_sync with mask %#x: only full warps are emulated", mask);
  table.value[lane()] = predicate ? 1.0f : 0.0f;
  exchange(table);
  for (int i = 0; i < kWarpSize; ++i)
    if (table.value[i] != 0.0f) return true;
  return false;
}

// __syncwarp() for a full warp: the lanes wait for each other (the fibers run one at a time, so
// what a lane wrote before it is what the others read after).
inline void syncwarp(unsigned mask = 0xffffffffu) {
  WarpTable& table = begin_collective(Collective::Syncwarp, static_cast<int>(mask));
  if (mask != 0xffffffffu) EMU_ERR("__syncwarp with mask %#x: only full warps are emulated", mask);
  exchange(table);
}

// ---- the runtime calls the host side makes ----

inline cudaError_t last_error = cudaSuccess;
inline std::map<const void*, size_t> max_dynamic_shared;  // cudaFuncSetAttribute's, per kernel

inline cudaError_t get_device(int* device) {
  *device = 0;
  return cudaSuccess;
}
// The device attributes the emulated host code asks for: the shared-memory opt-in the emulator
// allows (kMaxShared), and kMultiprocessors SMs. Any other is an error, so a new question gets an
// answer written here.
constexpr int kMultiprocessors = 2;  // few: the kernels that loop over rows by the grid loop here
inline cudaError_t device_get_attribute(int* value, cudaDeviceAttr attribute, int) {
  if (attribute == cudaDevAttrMaxSharedMemoryPerBlockOptin) {
    *value = static_cast<int>(kMaxShared);
  } else if (attribute == cudaDevAttrMultiProcessorCount) {
    *value = kMultiprocessors;
  } else {
    return last_error = cudaErrorInvalidValue;
  }
  return cudaSuccess;
}
// cudaOccupancyMaxActiveBlocksPerMultiprocessor: one block an SM (the emulator has no occupancy).
template <typename Kernel>
cudaError_t occupancy_max_active_blocks(int* blocks, Kernel, int, size_t) {
  *blocks = 1;
  return cudaSuccess;
}
inline cudaError_t func_set_attribute(const void* kernel, cudaFuncAttribute attribute, int value) {
  if (attribute != cudaFuncAttributeMaxDynamicSharedMemorySize) return cudaSuccess;
  if (value < 0 || static_cast<size_t>(value) > kMaxShared) return last_error = cudaErrorInvalidValue;
  max_dynamic_shared[kernel] = static_cast<size_t>(value);
  return cudaSuccess;
}
template <typename Kernel>
cudaError_t func_set_attribute(Kernel* kernel, cudaFuncAttribute attribute, int value) {
  return func_set_attribute(reinterpret_cast<const void*>(kernel), attribute, value);
}
inline cudaError_t get_last_error() {
  const cudaError_t e = last_error;
  last_error = cudaSuccess;
  return e;
}

// kernel<<<grid, block, shared, stream>>>(args...), as rewrite.py writes it: runs the blocks one
// after the other, each to the end, then checks what a block leaves behind.
template <typename... P, typename... A>
void launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t dynamic_shared_bytes, cudaStream_t, const A&... args) {
  static_assert(sizeof...(P) == sizeof...(A) && sizeof...(P) > 0, "one argument per kernel parameter");
  const int threads = static_cast<int>(block.x * block.y);
  if (grid.z != 1 || block.z != 1 || threads > kMaxThreads || threads < 1 || grid.x < 1 || grid.y < 1) {
    fprintf(stderr, "[emu] launch of %u x %u x %u blocks of %u x %u x %u threads: only 1-D or 2-D blocks of 1 to %d "
            "threads in 1-D or 2-D grids are emulated\n", grid.x, grid.y, grid.z, block.x, block.y, block.z,
            kMaxThreads);
    last_error = cudaErrorInvalidConfiguration;
    return;
  }
  const auto allowed = max_dynamic_shared.find(reinterpret_cast<const void*>(kernel));
  const size_t limit = allowed == max_dynamic_shared.end() ? kDefaultShared : allowed->second;
  if (dynamic_shared_bytes > (limit > kDefaultShared ? limit : kDefaultShared)) {
    fprintf(stderr, "[emu] launch with %zu bytes of dynamic shared memory; the kernel's limit is %zu\n",
            dynamic_shared_bytes, limit);
    last_error = cudaErrorInvalidValue;
    return;
  }
  static std::tuple<std::decay_t<P>...> params;  // the fibers read the kernel's arguments from here
  params = std::tuple<std::decay_t<P>...>(static_cast<std::decay_t<P>>(args)...);
  readable.clear();
  if (before_launch) before_launch(&std::get<0>(params));  // the flash kernels' one Params
  block_body = [kernel] { std::apply(kernel, params); };
  nthreads = threads;
  grid_dim = Index{grid.x, grid.y, 1};
  block_dim = Index{block.x, block.y, 1};
  for (unsigned blk = 0; blk < grid.x * grid.y; ++blk) {
    block_idx = Index{blk % grid.x, blk / grid.x, 0};
    shared_bytes = dynamic_shared_bytes;
    shared_storage.assign(shared_bytes + 2 * kGuardBytes + 128, kGuardByte);
    const uintptr_t start = (reinterpret_cast<uintptr_t>(shared_storage.data()) + kGuardBytes + 127) & ~uintptr_t{127};
    shared_buf = reinterpret_cast<uint8_t*>(start);
    for (size_t i = 0; i + 1 < shared_bytes; i += 2) memcpy(shared_buf + i, &kUnwritten, 2);
    shadow.assign(shared_bytes / 2, Shadow{});
    block_barrier = Barrier{threads, 0, 0};
    for (int w = 0; w < (threads + kWarpSize - 1) / kWarpSize; ++w)
      warp_barriers[w] = Barrier{threads - w * kWarpSize < kWarpSize ? threads - w * kWarpSize : kWarpSize, 0, 0};
    for (int t = 0; t < threads; ++t) {
      Fiber& f = fibers[t];
      if (!f.stack) f.stack = static_cast<char*>(malloc(kStackBytes));
      f.started = f.done = false;
      f.linear = static_cast<unsigned>(t);
      f.tid = Index{f.linear % block.x, f.linear / block.x, 0};
      f.collectives = 0;
      f.waiting = Wait::None;
      f.open.clear();
      f.groups.clear();
      getcontext(&f.initial);
      f.initial.uc_stack.ss_sp = f.stack;
      f.initial.uc_stack.ss_size = kStackBytes;
      f.initial.uc_link = nullptr;
      makecontext(&f.initial, reinterpret_cast<void (*)()>(&fiber_entry), 1, t);
    }
    idle_switches = 0;
    if (!_setjmp(scheduler)) resume(&fibers[0]);
    cur = nullptr;
    for (int t = 0; t < threads; ++t) {
      size_t in_flight = fibers[t].open.size();  // an empty group still pending is no copy
      for (const auto& group : fibers[t].groups) in_flight += group.size();
      if (in_flight) EMU_ERR("thread %d exits with %zu cp.async copies never waited for", t, in_flight);
    }
    const uint8_t* storage_end = shared_storage.data() + shared_storage.size();
    for (const uint8_t* g = shared_storage.data(); g < storage_end; ++g)
      if ((g < shared_buf || g >= shared_buf + shared_bytes) && *g != kGuardByte) {
        EMU_ERR("a write %td bytes from the start of dynamic shared memory (size %zu), outside it", g - shared_buf,
                shared_bytes);
        break;
      }
  }
  shared_buf = nullptr;
  shared_bytes = 0;
}

}  // namespace emu

#define threadIdx (::emu::cur->tid)
#define blockIdx (::emu::block_idx)
#define gridDim (::emu::grid_dim)
#define blockDim (::emu::block_dim)
#define __syncthreads() ::emu::syncthreads()
#define __shfl_xor_sync(mask, v, lane_mask) ::emu::shfl_xor_sync((mask), (v), (lane_mask))
#define __shfl_sync(mask, v, src_lane) ::emu::shfl_sync((mask), (v), (src_lane))
#define __any_sync(mask, predicate) ::emu::any_sync((mask), (predicate))
#define __syncwarp(...) ::emu::syncwarp(__VA_ARGS__)
// The device intrinsics the row kernels (cuda/block_reduce.cuh, cuda/convert.cuh) call.
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline float emu_uint_as_float(unsigned x) {
  float f;
  memcpy(&f, &x, 4);
  return f;
}
#define __uint_as_float emu_uint_as_float
// rsqrt, which the normalization kernels call unqualified.
inline float rsqrt(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
// CUDA's device min and max of ints, which kernels call unqualified.
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
// atomicAdd on global memory: the emulation runs one fiber at a time, so a plain add is
// atomic. The order of the adds is the fibers' order, one of the orders a GPU may take.
template <typename T>
inline T atomicAdd(T* address, T value) {
  const T old = *address;
  *address = old + value;
  return old;
}
