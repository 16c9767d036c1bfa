// Experiment: variants of the bf16 elementwise kernels, timed side by side in one run
// against minigrad's engine (the production path) and the copy ceiling, each checked
// against the engine's output (poisoned with NaN first). Not part of the build: the
// measuring tool behind the engine's choices in docs/perf-notes.md ("The elementwise engine
// at the copy rate"). Built on the CPU machine and run on the GPU by
// bench/experiments/run-variants, which says how.
//
// What varies:
//   memory path   one tile per block (no loop) vs a grid-stride loop over resident blocks;
//                 threads per block; 16-byte slots per thread and operand; cache hints
//                 (plain, ld.global.nc, evict-first .cs loads/stores, L2 256B prefetch)
//   GELU's math   gelu_math.h (GeluCurrent) vs the same A&S formula written here with the
//                 MUFU reciprocal and ex2 and the constant folded (GeluFast) vs erff. The
//                 first round of docs/perf-notes.md ran GeluCurrent when gelu_math.h still
//                 had IEEE division and exp2f.
//   add + row     [R, C] + [C]: a 2-D grid, the bias row kept in registers for several rows
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <minigrad/cuda/elementwise.h>
#include <minigrad/cuda/runtime.h>
#include <minigrad/minigrad.h>
#include <minigrad/kernels/elementwise_functors.h>

using namespace minigrad;

#define CK(expr)                                                                         \
  do {                                                                                   \
    cudaError_t e_ = (expr);                                                             \
    if (e_ != cudaSuccess) {                                                             \
      std::printf("CUDA error %s at line %d: %s\n", cudaGetErrorString(e_), __LINE__, #expr); \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)

// ---- bf16 packing: 8 elements in a uint4 ----
__device__ __forceinline__ void unpack8(uint4 w, float f[8]) {
  const uint32_t u[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = __uint_as_float(u[i] << 16);
    f[2 * i + 1] = __uint_as_float(u[i] & 0xffff0000u);
  }
}
__device__ __forceinline__ uint4 pack8(const float f[8]) {
  uint32_t u[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    __nv_bfloat162 h = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
    std::memcpy(&u[i], &h, 4);
  }
  return make_uint4(u[0], u[1], u[2], u[3]);
}

// Cache hints: 0 plain, 1 ld.global.nc, 2 .cs (evict first) loads and stores,
// 3 ld.global.nc.L1::no_allocate.L2::256B + st.global.cs
template <int H>
__device__ __forceinline__ uint4 ld(const uint4* p) {
  if constexpr (H == 0) return *p;
  if constexpr (H == 1) return __ldg(p);
  if constexpr (H == 2) return __ldcs(p);
  if constexpr (H == 3) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
  }
}
template <int H>
__device__ __forceinline__ void st(uint4* p, uint4 v) {
  if constexpr (H == 0 || H == 1)
    *p = v;
  else
    __stcs(p, v);
}

// ---- functors ----
struct ReluF {
  __device__ float operator()(float v) const { return v < 0.f ? 0.f : v; }
};
struct CopyF {
  __device__ float operator()(float v) const { return v; }
};
struct GeluCurrent {  // what gelu_math.h has
  __device__ float operator()(float v) const { return gelu_math::gelu_exact(v); }
};
struct GeluErff {
  __device__ float operator()(float v) const { return 0.5f * v * (1.f + erff(v * 0.70710678118654752f)); }
};
__device__ __forceinline__ float ex2_approx(float v) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
  return r;
}
__device__ __forceinline__ float rcp_approx(float v) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
  return r;
}
// A&S 26.2.17 with the MUFU ops, 1/sqrt(2 pi) folded into the coefficients.
struct FastPhi {
  float cdf, pdf;
};
__device__ __forceinline__ FastPhi fast_phi(float x) {
  const float k = 0.39894228040143267794f;
  const float e = ex2_approx(x * x * -0.72134752044448170368f);  // exp(-x^2/2)
  const float t = rcp_approx(fmaf(0.2316419f, fabsf(x), 1.f));
  const float poly =
      k * 0.319381530f +
      t * (k * -0.356563782f + t * (k * 1.781477937f + t * (k * -1.821255978f + t * (k * 1.330274429f))));
  const float tail = e * (t * poly);
  return {x >= 0.f ? 1.f - tail : tail, e * k};
}
struct GeluFast {
  __device__ float operator()(float v) const { return v * fast_phi(v).cdf; }
};
struct GeluFastBackward {
  __device__ float operator()(float g, float v) const {
    const FastPhi p = fast_phi(v);
    return g * (p.cdf + v * p.pdf);
  }
};
struct GeluCurrentBackward {
  __device__ float operator()(float g, float v) const { return g * gelu_math::gelu_exact_derivative(v); }
};
struct ReluBackwardF {
  __device__ float operator()(float g, float v) const { return v > 0.f ? g : 0.f; }
};

// ---- kernels ----
// One tile of THREADS x VECS vectors: all loads first, then compute and store.
template <int THREADS, int VECS, int H, class F>
__device__ __forceinline__ void unary_tile_body(const F& f, const uint4* __restrict__ in, uint4* __restrict__ out,
                                                int64_t nvec, int64_t tile) {
  const int64_t base = tile * (THREADS * VECS) + threadIdx.x;
  uint4 v[VECS];
#pragma unroll
  for (int k = 0; k < VECS; ++k)
    if (base + k * THREADS < nvec) v[k] = ld<H>(in + base + k * THREADS);
#pragma unroll
  for (int k = 0; k < VECS; ++k) {
    if (base + k * THREADS < nvec) {
      float a[8];
      unpack8(v[k], a);
#pragma unroll
      for (int j = 0; j < 8; ++j) a[j] = f(a[j]);
      st<H>(out + base + k * THREADS, pack8(a));
    }
  }
}

// A grid that covers the tensor: one tile per block.
template <int THREADS, int VECS, int H, class F>
__global__ void __launch_bounds__(THREADS)
    unary_tile(F f, const uint4* __restrict__ in, uint4* __restrict__ out, int64_t nvec) {
  unary_tile_body<THREADS, VECS, H>(f, in, out, nvec, blockIdx.x);
}

// A grid of resident blocks, each looping over tiles (the engine before this round).
template <int THREADS, int VECS, int H, class F>
__global__ void __launch_bounds__(THREADS)
    unary_loop(F f, const uint4* __restrict__ in, uint4* __restrict__ out, int64_t nvec) {
  for (int64_t tile = blockIdx.x; tile * (THREADS * VECS) < nvec; tile += gridDim.x)
    unary_tile_body<THREADS, VECS, H>(f, in, out, nvec, tile);
}

template <int THREADS, int VECS, int H, class F>
__global__ void __launch_bounds__(THREADS) binary_tile(F f, const uint4* __restrict__ a_in,
                                                       const uint4* __restrict__ b_in, uint4* __restrict__ out,
                                                       int64_t nvec) {
  const int64_t base = static_cast<int64_t>(blockIdx.x) * (THREADS * VECS) + threadIdx.x;
  uint4 va[VECS], vb[VECS];
#pragma unroll
  for (int k = 0; k < VECS; ++k)
    if (base + k * THREADS < nvec) {
      va[k] = ld<H>(a_in + base + k * THREADS);
      vb[k] = ld<H>(b_in + base + k * THREADS);
    }
#pragma unroll
  for (int k = 0; k < VECS; ++k) {
    if (base + k * THREADS < nvec) {
      float a[8], b[8];
      unpack8(va[k], a);
      unpack8(vb[k], b);
#pragma unroll
      for (int j = 0; j < 8; ++j) a[j] = f(a[j], b[j]);
      st<H>(out + base + k * THREADS, pack8(a));
    }
  }
}

// out[r, c] = x[r, c] + bias[c]: blockIdx.x = the tile of columns, blockIdx.y = a group of ROWS
// rows; the bias vectors are loaded once per thread and reused for its ROWS rows.
template <int THREADS, int VECS, int ROWS, int H>
__global__ void __launch_bounds__(THREADS) add_row(const uint4* __restrict__ x, const uint4* __restrict__ bias,
                                                   uint4* __restrict__ out, int64_t rows, int64_t row_vecs) {
  const int64_t col = static_cast<int64_t>(blockIdx.x) * (THREADS * VECS) + threadIdx.x;
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * ROWS;
  uint4 vb[VECS], vx[ROWS][VECS];
#pragma unroll
  for (int k = 0; k < VECS; ++k)
    if (col + k * THREADS < row_vecs) vb[k] = bias[col + k * THREADS];
#pragma unroll
  for (int r = 0; r < ROWS; ++r)
#pragma unroll
    for (int k = 0; k < VECS; ++k)
      if (row0 + r < rows && col + k * THREADS < row_vecs) vx[r][k] = ld<H>(x + (row0 + r) * row_vecs + col + k * THREADS);
#pragma unroll
  for (int r = 0; r < ROWS; ++r)
#pragma unroll
    for (int k = 0; k < VECS; ++k)
      if (row0 + r < rows && col + k * THREADS < row_vecs) {
        float a[8], b[8];
        unpack8(vx[r][k], a);
        unpack8(vb[k], b);
#pragma unroll
        for (int j = 0; j < 8; ++j) a[j] += b[j];
        st<H>(out + (row0 + r) * row_vecs + col + k * THREADS, pack8(a));
      }
}

// ---- checks ----
// Counts elements of a and b (bf16) whose bits differ, and those more than 1 ulp apart.
__global__ void compare_bf16(const uint16_t* a, const uint16_t* b, int64_t n, unsigned long long* counts) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if (a[i] != b[i]) {
      atomicAdd(&counts[0], 1ull);
      const int da = static_cast<int16_t>(a[i]) < 0 ? -(a[i] & 0x7fff) : a[i];
      const int db = static_cast<int16_t>(b[i]) < 0 ? -(b[i] & 0x7fff) : b[i];
      if (abs(da - db) > 1) atomicAdd(&counts[1], 1ull);
    }
  }
}

// The largest absolute error of GELU and GELU' in float over a sweep of [-lo, lo], against
// double (erfc for the left tail's accuracy). Errors as float bits (positive floats order as ints).
__global__ void accuracy(int variant, int64_t n, float lo, unsigned int* worst) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float x = -lo + 2.f * lo * static_cast<float>(static_cast<double>(i) / static_cast<double>(n - 1));
    const double xd = x;
    const double cdf = 0.5 * erfc(-xd * 0.70710678118654752440);
    const double pdf = 0.39894228040143267794 * exp(-0.5 * xd * xd);
    const double ref = xd * cdf, dref = cdf + xd * pdf;
    float y, dy;
    if (variant == 0) {
      y = gelu_math::gelu_exact(x);
      dy = gelu_math::gelu_exact_derivative(x);
    } else if (variant == 1) {
      y = GeluFast()(x);
      dy = GeluFastBackward()(1.f, x);
    } else {
      y = GeluErff()(x);
      const float c = 0.5f * (1.f + erff(x * 0.70710678118654752f));
      dy = c + x * 0.39894228040143267794f * expf(-0.5f * x * x);
    }
    atomicMax(&worst[0], __float_as_uint(static_cast<float>(fabs(y - ref))));
    atomicMax(&worst[1], __float_as_uint(static_cast<float>(fabs(dy - dref))));
  }
}

// ---- timing ----
double median_ms(const std::function<void()>& work, int runs = 60) {
  for (int i = 0; i < 5; ++i) work();
  std::vector<cudaEvent_t> a(runs), b(runs);
  for (int i = 0; i < runs; ++i) {
    CK(cudaEventCreate(&a[i]));
    CK(cudaEventCreate(&b[i]));
  }
  for (int i = 0; i < runs; ++i) {
    CK(cudaEventRecord(a[i], cuda::current_stream()));
    work();
    CK(cudaEventRecord(b[i], cuda::current_stream()));
  }
  CK(cudaEventSynchronize(b.back()));
  std::vector<double> ms(runs);
  for (int i = 0; i < runs; ++i) {
    float t;
    CK(cudaEventElapsedTime(&t, a[i], b[i]));
    ms[i] = t;
    CK(cudaEventDestroy(a[i]));
    CK(cudaEventDestroy(b[i]));
  }
  std::sort(ms.begin(), ms.end());
  return ms[runs / 2];
}

struct Result {
  std::string name;
  double ms, roofline;
  unsigned long long differ, far;
};
std::vector<Result> results;
double g_copy_gbps = 0;
unsigned long long* g_counts = nullptr;

void check_and_time(const std::string& name, double bytes, const Tensor& out, const Tensor& reference,
                    const std::function<void()>& work) {
  CK(cudaMemsetAsync(out.raw_data(), 0xff, out.numel() * 2, cuda::current_stream()));  // poison: NaN
  work();
  CK(cudaGetLastError());
  CK(cudaMemsetAsync(g_counts, 0, 16, cuda::current_stream()));
  compare_bf16<<<1024, 256, 0, cuda::current_stream()>>>(static_cast<const uint16_t*>(out.raw_data()),
                                                         static_cast<const uint16_t*>(reference.raw_data()),
                                                         out.numel(), g_counts);
  unsigned long long counts[2];
  CK(cudaMemcpy(counts, g_counts, 16, cudaMemcpyDeviceToHost));
  const double ms = median_ms(work);
  const double roof = bytes / (g_copy_gbps * 1e9) / (ms * 1e-3);
  results.push_back({name, ms, roof, counts[0], counts[1]});
  std::printf("%-44s %8.4f ms  roofline %.3f  differ %llu (>1ulp %llu)\n", name.c_str(), ms, roof, counts[0],
              counts[1]);
  std::fflush(stdout);
}

int main() {
  const int64_t R = 16384, C = 8192, n = R * C, nvec = n / 8;
  const Device gpu = Device::cuda(0);
  const TensorOptions o = TensorOptions(kBFloat16).device(gpu);
  manual_seed(1);
  const Tensor x = randn({R, C}, o), g = randn({R, C}, o), bias = randn({C}, o);
  Tensor out = empty({R, C}, o), ref = empty({R, C}, o);
  CK(cudaMalloc(&g_counts, 16));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  const cudaStream_t s = cuda::current_stream();

  // copy ceiling, after warming the clocks
  auto copy = [&] { CK(cudaMemcpyAsync(out.raw_data(), x.raw_data(), n * 2, cudaMemcpyDeviceToDevice, s)); };
  for (int i = 0; i < 4000; ++i) copy();
  CK(cudaDeviceSynchronize());
  const double copy_ms = median_ms(copy, 100);
  g_copy_gbps = 2.0 * n * 2 / (copy_ms * 1e-3) / 1e9;
  std::printf("copy ceiling: %.4f ms, %.0f GB/s (%s, %d SMs)\n", copy_ms, g_copy_gbps, prop.name, sms);

  const double fwd_bytes = 2.0 * n * 2, bwd_bytes = 3.0 * n * 2, add_bytes = (2.0 * n + C) * 2;
  const auto* xin = static_cast<const uint4*>(x.raw_data());
  const auto* gin = static_cast<const uint4*>(g.raw_data());
  const auto* bin = static_cast<const uint4*>(bias.raw_data());
  auto* op = static_cast<uint4*>(out.raw_data());

  // ---- relu: the engine, then the memory-path variants ----
  auto engine_relu = [&] { cuda::launch_elementwise<BFloat16, BFloat16>("relu", ref, x, elementwise::Relu{}); };
  engine_relu();
  check_and_time("relu engine (contiguous_kernel)", fwd_bytes, ref, ref, engine_relu);
  engine_relu();
  check_and_time("copy kernel tile 256x2 plain", fwd_bytes, out, x, [&] {
    unary_tile<256, 2, 0><<<(nvec + 511) / 512, 256, 0, s>>>(CopyF{}, xin, op, nvec);
  });

#define TILE(T, V, H)                                                                                \
  check_and_time("relu tile " #T "x" #V " hint" #H, fwd_bytes, out, ref, [&] {                         \
    unary_tile<T, V, H><<<(nvec + T * V - 1) / (T * V), T, 0, s>>>(ReluF{}, xin, op, nvec);             \
  });
  TILE(128, 1, 0) TILE(128, 2, 0) TILE(256, 1, 0) TILE(256, 2, 0) TILE(512, 1, 0) TILE(128, 1, 1)
  TILE(256, 1, 1) TILE(256, 1, 2) TILE(256, 4, 0)
#define LOOP(T, V, H, BPS)                                                                             \
  check_and_time("relu loop " #T "x" #V " hint" #H " " #BPS "/SM", fwd_bytes, out, ref, [&] {            \
    unary_loop<T, V, H><<<sms * BPS, T, 0, s>>>(ReluF{}, xin, op, nvec);                                 \
  });
  LOOP(256, 2, 0, 8) LOOP(256, 1, 0, 16)

  // ---- gelu forward: the engine, then math x memory variants ----
  auto engine_gelu = [&] { cuda::launch_elementwise<BFloat16, BFloat16>("gelu", ref, x, elementwise::GeluExact{}); };
  engine_gelu();
  check_and_time("gelu engine", fwd_bytes, ref, ref, engine_gelu);
  engine_gelu();
#define GTILE(F, T, V, H)                                                                             \
  check_and_time("gelu " #F " tile " #T "x" #V " hint" #H, fwd_bytes, out, ref, [&] {                 \
    unary_tile<T, V, H><<<(nvec + T * V - 1) / (T * V), T, 0, s>>>(F{}, xin, op, nvec);                \
  });
  GTILE(GeluCurrent, 256, 1, 0) GTILE(GeluFast, 128, 1, 0) GTILE(GeluFast, 256, 1, 0) GTILE(GeluFast, 256, 2, 0)
  GTILE(GeluFast, 512, 1, 0)
  auto engine_gelu_tanh = [&] {
    cuda::launch_elementwise<BFloat16, BFloat16>("gelu_tanh", out, x, elementwise::GeluTanh{});
  };
  check_and_time("gelu_tanh engine", fwd_bytes, out, out, engine_gelu_tanh);

  // ---- backward kernels (grad, x) ----
  auto engine_gelu_bwd = [&] {
    cuda::launch_elementwise<BFloat16, BFloat16, BFloat16>("gelu_backward", ref, g, x, elementwise::GeluExactBackward{});
  };
  engine_gelu_bwd();
  check_and_time("gelu bwd engine", bwd_bytes, ref, ref, engine_gelu_bwd);
  engine_gelu_bwd();
#define BTILE(F, T, V, H)                                                                             \
  check_and_time("bwd " #F " tile " #T "x" #V " hint" #H, bwd_bytes, out, ref, [&] {                  \
    binary_tile<T, V, H><<<(nvec + T * V - 1) / (T * V), T, 0, s>>>(F{}, gin, xin, op, nvec);          \
  });
  BTILE(GeluCurrentBackward, 256, 1, 0) BTILE(GeluFastBackward, 128, 1, 0) BTILE(GeluFastBackward, 256, 1, 0)
  BTILE(GeluFastBackward, 512, 1, 0)
  auto engine_gelu_tanh_bwd = [&] {
    cuda::launch_elementwise<BFloat16, BFloat16, BFloat16>("gelu_backward", out, g, x, elementwise::GeluTanhBackward{});
  };
  check_and_time("gelu_tanh bwd engine", bwd_bytes, out, out, engine_gelu_tanh_bwd);
  auto engine_relu_bwd = [&] {
    cuda::launch_elementwise<BFloat16, BFloat16, BFloat16>("relu_backward", ref, g, x, elementwise::ReluBackward{});
  };
  engine_relu_bwd();
  check_and_time("relu bwd engine", bwd_bytes, ref, ref, engine_relu_bwd);
  engine_relu_bwd();
  BTILE(ReluBackwardF, 128, 1, 0) BTILE(ReluBackwardF, 256, 1, 0) BTILE(ReluBackwardF, 512, 1, 0)
  BTILE(ReluBackwardF, 128, 2, 0) BTILE(ReluBackwardF, 256, 1, 1)

  // ---- add with a broadcast row ----
  auto engine_add = [&] { cuda::launch_elementwise<BFloat16, BFloat16, BFloat16>("add", ref, x, bias, elementwise::Add{}); };
  engine_add();
  check_and_time("add row engine (rows_kernel)", add_bytes, ref, ref, engine_add);
  engine_add();
#define ATILE(T, V, RW, H)                                                                             \
  check_and_time("add row " #T "x" #V " rows" #RW " hint" #H, add_bytes, out, ref, [&] {                \
    const dim3 grid(static_cast<unsigned>((C / 8 + T * V - 1) / (T * V)), static_cast<unsigned>((R + RW - 1) / RW)); \
    add_row<T, V, RW, H><<<grid, T, 0, s>>>(xin, bin, op, R, C / 8);                                    \
  });
  ATILE(256, 1, 1, 0) ATILE(128, 1, 1, 0) ATILE(256, 1, 2, 0) ATILE(128, 2, 2, 0)

  // ---- accuracy of the GELU variants in float ----
  unsigned int* worst;
  CK(cudaMalloc(&worst, 8));
  const char* names[] = {"gelu_math.h", "A&S MUFU rcp/ex2 (harness)", "erff/expf"};
  for (int v = 0; v < 3; ++v) {
    CK(cudaMemset(worst, 0, 8));
    accuracy<<<1024, 256>>>(v, int64_t{1} << 26, 10.f, worst);
    unsigned int w[2];
    CK(cudaMemcpy(w, worst, 8, cudaMemcpyDeviceToHost));
    float e[2];
    std::memcpy(e, w, 8);
    std::printf("accuracy %-24s over [-10, 10]: GELU abs err %.3g, GELU' abs err %.3g\n", names[v], e[0], e[1]);
  }
  std::printf("\nsummary (roofline against copy %.0f GB/s):\n", g_copy_gbps);
  for (const Result& r : results)
    std::printf("  %-44s %8.4f ms %.3f%s\n", r.name.c_str(), r.ms, r.roofline, r.far ? "  WRONG (>1 ulp)" : "");
  return 0;
}
