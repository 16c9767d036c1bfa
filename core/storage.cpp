#include <minigrad/core/storage.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>
#include <unordered_map>
#include <vector>

#ifdef __linux__
#include <sys/mman.h>
#endif

#include <minigrad/core/error.h>

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
//
// Even with huge pages, the kernel zeroes every fresh page on its first touch, and those
// faults do not spread over threads: gelu of a 32 MiB tensor spent a third of its time
// there, and two threads ran it only 1.6x faster than one. So freed large buffers are kept
// for reuse (LargeBufferCache), as the CUDA caching allocator keeps device blocks: a loop
// that allocates tensors of the same sizes each step (every training loop) touches fresh
// memory in its first step only.
class LargeBufferCache {
 public:
  // Up to MINIGRAD_CPU_CACHE_MB MiB of freed buffers (default 512; 0: none, every buffer
  // goes back to the system at once). Under AddressSanitizer none either, so that a use
  // after free of a tensor's memory is still caught.
  LargeBufferCache() {
#if defined(__SANITIZE_ADDRESS__)
    limit_ = 0;
#else
    limit_ = size_t(512) << 20;
    if (const char* s = std::getenv("MINIGRAD_CPU_CACHE_MB")) {
      char* end = nullptr;
      const unsigned long long mib = std::strtoull(s, &end, 10);
      MG_CHECK(end != s && *end == '\0', "MINIGRAD_CPU_CACHE_MB='{}': expected a number of MiB (0 disables the cache)",
               s);
      limit_ = static_cast<size_t>(mib) << 20;
    }
#endif
  }

  // A cached buffer of exactly `bytes` (a multiple of 2 MiB), or nullptr.
  void* take(size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.find(bytes);
    if (it == free_.end() || it->second.empty()) return nullptr;
    void* p = it->second.back();
    it->second.pop_back();
    cached_ -= bytes;
    return p;
  }

  // Keeps a freed buffer when it fits under the limit; false: the caller frees it.
  bool keep(void* p, size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (cached_ + bytes > limit_) return false;
    free_[bytes].push_back(p);
    cached_ += bytes;
    return true;
  }

  void release_all() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [bytes, buffers] : free_)
      for (void* p : buffers) std::free(p);
    free_.clear();
    cached_ = 0;
  }

  size_t cached_bytes() {
    std::lock_guard<std::mutex> lock(mutex_);
    return cached_;
  }

 private:
  std::mutex mutex_;
  std::unordered_map<size_t, std::vector<void*>> free_;  // by size, in whole 2 MiB pages
  size_t cached_ = 0;
  size_t limit_ = 0;
};

// Never destroyed: a tensor that outlives static destruction (a global) still frees into it.
LargeBufferCache& large_buffer_cache() {
  static LargeBufferCache* cache = new LargeBufferCache();
  return *cache;
}

class CpuAllocator final : public Allocator {
 public:
  static constexpr size_t kAlignAbove = 4096;
  static constexpr size_t kHugePage = size_t(2) << 20;
  static constexpr size_t kHugeAbove = size_t(4) << 20;
  static size_t huge_bytes(size_t nbytes) { return (nbytes + kHugePage - 1) / kHugePage * kHugePage; }

  void* allocate(size_t nbytes, Device) override {
    if (nbytes == 0) return nullptr;
    void* p = nullptr;
    if (nbytes < kAlignAbove) {
      p = std::malloc(nbytes);
    } else if (nbytes < kHugeAbove) {
      p = std::aligned_alloc(64, (nbytes + 63) / 64 * 64);
    } else {
      const size_t rounded = huge_bytes(nbytes);
      p = large_buffer_cache().take(rounded);
      if (p != nullptr) return p;
      p = std::aligned_alloc(kHugePage, rounded);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
      if (p != nullptr) madvise(p, rounded, MADV_HUGEPAGE);  // advice only: failure changes nothing
#endif
      if (p == nullptr) {  // the cache may hold the memory that is missing
        large_buffer_cache().release_all();
        p = std::aligned_alloc(kHugePage, rounded);
      }
    }
    MG_CHECK(p != nullptr, "empty: out of CPU memory allocating {} bytes", nbytes);
    return p;
  }

  void deallocate(void* ptr, size_t nbytes, Device) override {
    if (nbytes >= kHugeAbove && large_buffer_cache().keep(ptr, huge_bytes(nbytes))) return;
    std::free(ptr);
  }
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

void cpu_empty_cache() { large_buffer_cache().release_all(); }
size_t cpu_cached_bytes() { return large_buffer_cache().cached_bytes(); }

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

Storage::Storage(void* data, size_t nbytes, Device device, std::function<void(void*)> deleter)
    : data_(data), nbytes_(nbytes), device_(device), deleter_(std::move(deleter)) {}

Storage::~Storage() {
  if (allocator_ == nullptr) {  // the caller's memory: theirs to free, through the deleter
    if (deleter_) deleter_(data_);
    return;
  }
  if (data_) allocator_->deallocate(data_, nbytes_, device_);
}

}  // namespace minigrad
