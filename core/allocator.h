#pragma once
// How core reaches memory on a device without knowing CUDA.
//
// Each device type has one Allocator and one copy function. core registers the CPU's;
// the CUDA backend (cuda/) registers its caching allocator and its cudaMemcpy-based copy
// when it is linked in. A CPU-only build is the same code with nothing registered for CUDA:
// asking for a CUDA tensor then fails with a clear error.
#include <cstddef>

#include <minigrad/core/device.h>

namespace minigrad {

class Tensor;

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t nbytes, Device device) = 0;
  virtual void deallocate(void* ptr, size_t nbytes, Device device) = 0;
};

// Copies nbytes of contiguous memory between any two devices (either may be the CPU).
using DeviceCopyFn = void (*)(void* dst, Device dst_device, const void* src, Device src_device,
                              size_t nbytes);

void register_allocator(DeviceType type, Allocator* allocator);
Allocator* get_allocator(DeviceType type);  // throws if none is registered for `type`
bool has_allocator(DeviceType type);
// True when the CUDA backend is built in and found a GPU: CUDA tensors can be made.
inline bool cuda_is_available() { return has_allocator(DeviceType::CUDA); }

void register_device_copy(DeviceType type, DeviceCopyFn fn);

// The CPU allocator keeps freed buffers of 4 MiB and more for reuse (up to
// MINIGRAD_CPU_CACHE_MB MiB, default 512; none under AddressSanitizer), so that a loop
// reusing tensor sizes does not fault in fresh pages each step. cpu_empty_cache() gives
// them back to the system; cpu_cached_bytes() is what the cache holds now.
void cpu_empty_cache();
size_t cpu_cached_bytes();

// Kernels a device runs on its own memory, so that copies, conversions and fills between
// tensors on one device never pass through the host. Where a device has none (null), core
// stages strided or converting copies through the host instead.
//   copy_strided: dst = src converted to dst's dtype, src broadcast to dst's shape, any
//                 strides on both sides, both tensors on the one device.
//   fill:         every element of dst (any strides) = value converted to dst's dtype.
using DeviceStridedCopyFn = void (*)(const Tensor& dst, const Tensor& src);
using DeviceFillFn = void (*)(const Tensor& dst, double value);
struct DeviceKernels {
  DeviceStridedCopyFn copy_strided = nullptr;
  DeviceFillFn fill = nullptr;
};
DeviceKernels device_kernels(DeviceType type);  // registered with the allocator (cuda::Backend)

namespace cuda {
// Defined in cuda/: the CUDA backend's allocator, copy function and kernels, all null where no GPU
// is present (and in a build without CUDA, by cuda/no_cuda_backend.cpp). core asks once, when
// the registry is first used, so linking the backend is all it takes (no static initializer
// that a static library could drop).
struct Backend {
  Allocator* allocator = nullptr;
  DeviceCopyFn copy = nullptr;
  DeviceKernels kernels;
};
Backend probe_backend();
}  // namespace cuda
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes);

}  // namespace minigrad
