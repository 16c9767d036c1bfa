#include "core/storage.h"

#include <array>
#include <cstdlib>
#include <cstring>

#ifdef __linux__
#include <sys/mman.h>
#endif

#include "core/error.h"

namespace minigrad {
namespace {

// CPU memory. Large buffers are 64-byte aligned, so vectorized loops start on a cache line;
// small ones come from plain malloc (16-byte aligned): aligned_alloc splits heap chunks, and
// on tiny tensors it was 17% of the instructions of an op with autograd (docs/perf-notes.md).
//
// Buffers of 4 MiB and more are 2 MiB aligned and asked to be backed by transparent huge
// pages (where the kernel's setting is "madvise", the default of many distributions). Such a
// buffer is fresh memory from the kernel (glibc maps it on its own), and its first touch
// faults once per page: with 4 KiB pages the faults cost more than the op itself (a fresh
// 32 MiB buffer took 140 ms to touch on the 2-core development VM, 2 ms with 2 MiB pages;
// docs/perf-notes.md). The alignment wastes at most 2 MiB on a buffer of at least 4 MiB.
class CpuAllocator final : public Allocator {
 public:
  static constexpr size_t kAlignAbove = 4096;
  static constexpr size_t kHugePage = size_t(2) << 20;
  static constexpr size_t kHugeAbove = size_t(4) << 20;
  void* allocate(size_t nbytes, Device) override {
    if (nbytes == 0) return nullptr;
    void* p = nullptr;
    if (nbytes < kAlignAbove) {
      p = std::malloc(nbytes);
    } else if (nbytes < kHugeAbove) {
      p = std::aligned_alloc(64, (nbytes + 63) / 64 * 64);
    } else {
      const size_t rounded = (nbytes + kHugePage - 1) / kHugePage * kHugePage;
      p = std::aligned_alloc(kHugePage, rounded);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
      if (p != nullptr) madvise(p, rounded, MADV_HUGEPAGE);  // advice only: failure changes nothing
#endif
    }
    MG_CHECK(p != nullptr, "empty: out of CPU memory allocating {} bytes", nbytes);
    return p;
  }
  void deallocate(void* ptr, size_t, Device) override { std::free(ptr); }
};

void cpu_copy(void* dst, Device, const void* src, Device, size_t nbytes) {
  if (nbytes) std::memcpy(dst, src, nbytes);
}

constexpr size_t kDeviceTypes = 2;

struct Registry {
  std::array<Allocator*, kDeviceTypes> allocators{};
  std::array<DeviceCopyFn, kDeviceTypes> copies{};
  std::array<DeviceKernels, kDeviceTypes> kernels{};  // none for the CPU: core's own loops do its work
  Registry() {
    static CpuAllocator cpu;
    allocators[static_cast<size_t>(DeviceType::CPU)] = &cpu;
    copies[static_cast<size_t>(DeviceType::CPU)] = &cpu_copy;
    const cuda::Backend backend = cuda::probe_backend();
    allocators[static_cast<size_t>(DeviceType::CUDA)] = backend.allocator;
    copies[static_cast<size_t>(DeviceType::CUDA)] = backend.copy;
    kernels[static_cast<size_t>(DeviceType::CUDA)] = backend.kernels;
  }
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

void register_allocator(DeviceType type, Allocator* allocator) {
  registry().allocators[static_cast<size_t>(type)] = allocator;
}

bool has_allocator(DeviceType type) { return registry().allocators[static_cast<size_t>(type)] != nullptr; }

Allocator* get_allocator(DeviceType type) {
  Allocator* a = registry().allocators[static_cast<size_t>(type)];
  MG_CHECK(a != nullptr,
           "cannot allocate a tensor on cuda: this build of minigrad has no CUDA backend, or no GPU is present "
           "(check minigrad::cuda_is_available())");
  return a;
}

void register_device_copy(DeviceType type, DeviceCopyFn fn) { registry().copies[static_cast<size_t>(type)] = fn; }

DeviceKernels device_kernels(DeviceType type) { return registry().kernels[static_cast<size_t>(type)]; }

// A copy touching a device goes through that device's copy function (it knows both sides).
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes) {
  const Device owner = dst_device.is_cpu() ? src_device : dst_device;
  DeviceCopyFn fn = registry().copies[static_cast<size_t>(owner.type)];
  MG_CHECK(fn != nullptr, "copy: no copy function for {}: this build of minigrad has no CUDA backend", owner);
  fn(dst, dst_device, src, src_device, nbytes);
}

Storage::Storage(size_t nbytes, Device device)
    : nbytes_(nbytes), device_(device), allocator_(get_allocator(device.type)) {
  data_ = allocator_->allocate(nbytes, device);
}

Storage::~Storage() {
  if (data_) allocator_->deallocate(data_, nbytes_, device_);
}

}  // namespace minigrad
