// Copies and fills on the GPU: the bytes between devices, the copy-with-conversion kernels
// behind copy_into / to() / contiguous(), and the fill kernel behind zeros / ones / full.
//
// A copy of one dtype between contiguous tensors is cudaMemcpyAsync. A conversion between
// contiguous, 16-byte-aligned tensors (x.to(kFloat32) of a bfloat16 tensor, which every
// half-precision reduction does) moves whole 16-byte vectors. Everything else (strides,
// broadcasting, misaligned slices) goes through one strided kernel, one element per thread
// per step, its offsets from the merged layout (cuda/strided_layout.cuh).
#include <algorithm>

#include <minigrad/core/shape.h>
#include <minigrad/cuda/vector.cuh>
#include <minigrad/cuda/convert.cuh>
#include <minigrad/cuda/copy.h>
#include <minigrad/cuda/runtime.h>
#include <minigrad/cuda/strided_layout.cuh>

namespace minigrad {
namespace cuda {
namespace {

constexpr int kThreads = 256;
// Grid-stride loops: one thread per element up to this many blocks, then each thread takes
// several. 65535 blocks x 256 threads = 16.8M threads, over 60 times the 132 SMs x 2048
// threads an H200 keeps resident, so the cap never leaves an SM idle.
constexpr int64_t kMaxBlocks = 65535;

unsigned int blocks_for(int64_t n) {
  return static_cast<unsigned int>(std::min((n + kThreads - 1) / kThreads, kMaxBlocks));
}

// dst[i] = src[i] converted, both contiguous and aligned to their vectors. Each access
// moves at most 16 bytes (the widest a thread can do in one instruction): N elements, with
// N set by the wider dtype (bfloat16 -> float32: 4, loads of 8 bytes, stores of 16). Each
// thread loads kVectorsPerThread vectors before it converts and stores the first: it is
// the bytes in flight that keep HBM busy. On an H200, against 4.2 TB/s for a plain copy,
// this kernel converts bfloat16 -> float32 at 3.9 TB/s and float32 -> bfloat16 at 4.2; a
// first version, one element per thread per step, reached 2.0. The last n % N elements
// are done one each by the grid's first threads.
constexpr int kVectorsPerThread = 4;

template <typename Dst, typename Src>
constexpr int kConvertVectorSize = static_cast<int>(16 / (sizeof(Dst) > sizeof(Src) ? sizeof(Dst) : sizeof(Src)));

template <typename Dst, typename Src>
__global__ void convert_contiguous_kernel(Dst* __restrict__ dst, const Src* __restrict__ src, int64_t n) {
  constexpr int N = kConvertVectorSize<Dst, Src>;
  using SrcVector = AlignedVector<Src, N>;
  using DstVector = AlignedVector<Dst, N>;
  const SrcVector* src_vectors = reinterpret_cast<const SrcVector*>(src);
  DstVector* dst_vectors = reinterpret_cast<DstVector*>(dst);
  const int64_t vectors = n / N;
  const int64_t tile = static_cast<int64_t>(blockDim.x) * kVectorsPerThread;
  for (int64_t first = static_cast<int64_t>(blockIdx.x) * tile + threadIdx.x; first < vectors;
       first += static_cast<int64_t>(gridDim.x) * tile) {
    SrcVector in[kVectorsPerThread];
#pragma unroll
    for (int k = 0; k < kVectorsPerThread; ++k) {
      const int64_t v = first + static_cast<int64_t>(k) * blockDim.x;
      if (v < vectors) in[k] = src_vectors[v];
    }
#pragma unroll
    for (int k = 0; k < kVectorsPerThread; ++k) {
      const int64_t v = first + static_cast<int64_t>(k) * blockDim.x;
      if (v < vectors) {
        DstVector out;
#pragma unroll
        for (int j = 0; j < N; ++j) out.values[j] = convert_element<Dst>(in[k].values[j]);
        dst_vectors[v] = out;
      }
    }
  }
  const int64_t thread = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t i = vectors * N + thread;
  if (thread < N && i < n) dst[i] = convert_element<Dst>(src[i]);
}

// dst[i] = src[i] converted, for i in [0, n) of the layout's shape (operand 0: dst, 1: src).
// Each element costs a division per merged dim beyond the first (a multiply-high and a shift,
// kernels/index_divisor.h) and 64-bit offset arithmetic; the elementwise engine's row walk
// (cuda/elementwise.cuh) finds a row's start once and steps along it instead.
template <typename Dst, typename Src>
__global__ void copy_kernel(Dst* dst, const Src* src, int64_t n, StridedLayout<2> layout) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t off[2];
    layout.offsets(i, off);
    dst[off[0]] = convert_element<Dst>(src[off[1]]);
  }
}

template <typename T>
__global__ void fill_kernel(T* dst, double value, int64_t n, StridedLayout<1> layout) {
  const T converted = convert_element<T>(value);
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t off[1];
    layout.offsets(i, off);
    dst[off[0]] = converted;
  }
}

}  // namespace

void copy_bytes_between(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes) {
  if (nbytes == 0) return;
  if (dst_device.is_cpu() || src_device.is_cpu()) {
    const int gpu = dst_device.is_cpu() ? src_device.index : dst_device.index;
    const cudaMemcpyKind kind = dst_device.is_cpu() ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice;
    DeviceGuard guard(gpu);
    const cudaStream_t stream = current_stream(gpu);
    MG_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, kind, stream), "copy");
    MG_CUDA_CHECK(cudaStreamSynchronize(stream), "copy");
    return;
  }
  if (dst_device == src_device) {  // ordered after the stream's earlier work: nothing to wait for
    DeviceGuard guard(dst_device.index);
    MG_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToDevice, current_stream(dst_device.index)),
                  "copy");
    return;
  }
  // Two GPUs, two stream orders. Wait for the work that wrote src on its stream, copy on
  // dst's stream (after the work that last used dst), and wait for the copy too: src's
  // stream may reuse src's memory as soon as the caller lets go of it.
  {
    DeviceGuard guard(src_device.index);
    MG_CUDA_CHECK(cudaStreamSynchronize(current_stream(src_device.index)), "copy");
  }
  DeviceGuard guard(dst_device.index);
  const cudaStream_t stream = current_stream(dst_device.index);
  MG_CUDA_CHECK(cudaMemcpyPeerAsync(dst, dst_device.index, src, src_device.index, nbytes, stream), "copy");
  MG_CUDA_CHECK(cudaStreamSynchronize(stream), "copy");
}

void copy_strided(const Tensor& dst, const Tensor& src) {
  MG_CHECK(dst.device().is_cuda() && dst.device() == src.device(),
           "copy_: the CUDA copy kernel needs both tensors on one GPU, got {} and {}", dst.device(), src.device());
  const Shape src_strides = broadcast_strides(src, dst.sizes());
  const int64_t n = dst.numel();
  if (n == 0) return;
  const auto layout = make_strided_layout<2>(dst.sizes(), {dst.strides().data(), src_strides.data()}, "copy_");
  DeviceGuard guard(dst.device().index);
  const cudaStream_t stream = current_stream(dst.device().index);
  if (dst.dtype() == src.dtype() && layout.is_contiguous()) {  // the copy engines run at full bandwidth
    MG_CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), src.raw_data(), static_cast<size_t>(n) * dst.element_size(),
                                  cudaMemcpyDeviceToDevice, stream),
                  "copy_");
    return;
  }
  dispatch_all(dst.dtype(), [&](auto dst_tag) {
    using dst_t = decltype(dst_tag);
    dispatch_all(src.dtype(), [&](auto src_tag) {
      using src_t = decltype(src_tag);
      dst_t* dst_data = static_cast<dst_t*>(dst.raw_data());
      const src_t* src_data = static_cast<const src_t*>(src.raw_data());
      constexpr int N = kConvertVectorSize<dst_t, src_t>;
      if (layout.is_contiguous() && is_aligned_for<AlignedVector<dst_t, N>>(dst_data) &&
          is_aligned_for<AlignedVector<src_t, N>>(src_data)) {
        const int64_t tiles = (n / N + kThreads * kVectorsPerThread - 1) / (kThreads * kVectorsPerThread);
        const auto blocks = static_cast<unsigned int>(std::clamp<int64_t>(tiles, 1, kMaxBlocks));  // 1: the tail alone
        convert_contiguous_kernel<<<blocks, kThreads, 0, stream>>>(dst_data, src_data, n);
      } else {
        copy_kernel<<<blocks_for(n), kThreads, 0, stream>>>(dst_data, src_data, n, layout);
      }
      MG_CUDA_CHECK_LAUNCH("copy_");
    });
  });
}

void fill(const Tensor& dst, double value) {
  MG_CHECK(dst.device().is_cuda(), "fill_: the CUDA fill kernel needs a tensor on a GPU, got {}", dst.device());
  const int64_t n = dst.numel();
  if (n == 0) return;
  const auto layout = make_strided_layout<1>(dst.sizes(), {dst.strides().data()}, "fill_");
  DeviceGuard guard(dst.device().index);
  const cudaStream_t stream = current_stream(dst.device().index);
  dispatch_all(dst.dtype(), [&](auto tag) {
    using scalar_t = decltype(tag);
    fill_kernel<<<blocks_for(n), kThreads, 0, stream>>>(static_cast<scalar_t*>(dst.raw_data()), value, n, layout);
    MG_CUDA_CHECK_LAUNCH("fill_");
  });
}

}  // namespace cuda
}  // namespace minigrad
