#pragma once
// How core reaches memory on a device without knowing CUDA.
//
// Each device type has one Allocator and one copy function. core registers the CPU's;
// the CUDA backend (cuda/) registers its caching allocator and its cudaMemcpy-based copy
// when it is linked in. A CPU-only build is the same code with nothing registered for CUDA:
// asking for a CUDA tensor then fails with a clear error.
#include <cstddef>

#include "core/device.h"

namespace minigrad {

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

void register_device_copy(DeviceType type, DeviceCopyFn fn);
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes);

}  // namespace minigrad
