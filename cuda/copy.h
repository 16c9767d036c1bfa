#pragma once
// The CUDA backend's copies and fills, registered with core (core/allocator.h): core's
// copy_into, copy_as, to(), item() and the creation functions reach them through
// cuda::probe_backend(), so core never includes a CUDA header.
#include <cstddef>

#include <minigrad/core/device.h>
#include <minigrad/core/tensor.h>

namespace minigrad {
namespace cuda {

// nbytes of contiguous memory between any two devices, one side a GPU (core's DeviceCopyFn).
// On the current stream of the GPU side. When the host is one side, it waits for the copy
// (the host reads or frees its buffer next); a copy within one GPU does not wait.
void copy_bytes_between(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes);

// dst = src converted to dst's dtype, src broadcast to dst's shape; any strides, any of the
// six dtypes on either side; both on one GPU. A same-dtype contiguous copy is a memcpy.
void copy_strided(const Tensor& dst, const Tensor& src);

// Every element of dst (any strides) = value converted to dst's dtype.
void fill(const Tensor& dst, double value);

}  // namespace cuda
}  // namespace minigrad
