// The caching device allocator, and the CUDA backend's registration with core.
//
// cudaMalloc and cudaFree are slow (tens of microseconds to milliseconds) and cudaFree
// synchronizes the whole device, so an op must not call them. Instead, memory a tensor
// gives back stays with minigrad, cached, and the next tensor of about the same size takes
// it: after the first step of a training loop every request is served from the cache
// (allocator_stats().cuda_malloc_calls stays flat).
//
// Size classes. A request is rounded up: under 1 MiB to a multiple of 512 B (requests a
// few bytes apart then share blocks; at most 511 B wasted), from 1 MiB to a multiple of
// 2 MiB (the GPU's large page: cudaMalloc reserves whole 2 MiB pages for such a request
// anyway). Each block is one cudaMalloc; blocks are never split or merged.
//
// Reuse. The cache holds free blocks by size in a std::multimap; a request takes the
// smallest cached block at least its rounded size, if that block is at most 1/8 larger
// (without splitting, a bigger block's excess is wasted while it is in use; 1/8 bounds the
// waste at 12.5%).
//
// Streams. A block remembers the stream that was current when it was allocated, goes back
// to that stream's cache when freed, and is reused only by allocations on that same
// stream. That is safe without events or synchronization: work on one stream runs in
// order, so a kernel that uses the block after its reuse runs after every kernel that used
// it before. (A tensor used on another stream too must be synchronized by its user before
// it dies.)
//
// Out of memory. When cudaMalloc fails, the allocator returns every cached block of that
// device to the driver and tries once more, then throws an error with the numbers.
#include <algorithm>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include <minigrad/core/allocator.h>
#include <minigrad/cuda/copy.h>
#include <minigrad/cuda/runtime.h>

namespace minigrad {
namespace cuda {
namespace {

constexpr size_t kSmallRequest = size_t{1} << 20;  // 1 MiB
constexpr size_t kSmallGranule = 512;
constexpr size_t kLargeGranule = size_t{2} << 20;  // 2 MiB

size_t round_size(size_t nbytes) {
  const size_t granule = nbytes < kSmallRequest ? kSmallGranule : kLargeGranule;
  return (nbytes + granule - 1) / granule * granule;
}

std::string format_bytes(size_t n) {
  if (n < 1024) return fmt::format("{} B", n);
  if (n < (size_t{1} << 20)) return fmt::format("{:.1f} KiB", static_cast<double>(n) / 1024);
  if (n < (size_t{1} << 30)) return fmt::format("{:.1f} MiB", static_cast<double>(n) / (1 << 20));
  return fmt::format("{:.2f} GiB", static_cast<double>(n) / (1 << 30));
}

struct Block {
  size_t size = 0;  // rounded: what the block holds, not what was asked for
  cudaStream_t stream = nullptr;
};

// Everything the allocator knows about one device.
struct DevicePool {
  std::unordered_map<void*, Block> live;                        // held by tensors
  std::map<cudaStream_t, std::multimap<size_t, void*>> cached;  // free, by stream, by size
  AllocatorStats stats;
};

class CachingAllocator final : public Allocator {
 public:
  explicit CachingAllocator(int devices) : pools_(static_cast<size_t>(devices)) {}

  void* allocate(size_t nbytes, Device device) override {
    if (nbytes == 0) return nullptr;
    check_device(device.index, "empty");
    const size_t size = round_size(nbytes);
    const cudaStream_t stream = current_stream(device.index);
    std::lock_guard<std::mutex> lock(mutex_);
    DevicePool& pool = pools_[static_cast<size_t>(device.index)];
    Block block{size, stream};
    void* ptr = take_cached(pool, block);
    if (ptr == nullptr) ptr = malloc_block(device.index, pool, size, nbytes);
    pool.live.emplace(ptr, block);
    pool.stats.allocated_bytes += block.size;
    pool.stats.peak_allocated_bytes = std::max(pool.stats.peak_allocated_bytes, pool.stats.allocated_bytes);
    return ptr;
  }

  // Called from Storage's destructor: an error here ends the program (std::terminate), which
  // is the right end for freeing memory this allocator never handed out.
  void deallocate(void* ptr, size_t, Device device) override {
    if (ptr == nullptr) return;
    std::lock_guard<std::mutex> lock(mutex_);
    DevicePool& pool = pools_[static_cast<size_t>(device.index)];
    const auto it = pool.live.find(ptr);
    MG_CHECK(it != pool.live.end(), "CUDA allocator: freeing {} on {}, which it did not allocate", ptr, device);
    const Block block = it->second;
    pool.live.erase(it);
    pool.cached[block.stream].emplace(block.size, ptr);
    pool.stats.allocated_bytes -= block.size;
  }

  AllocatorStats stats(int device) {
    check_device(device, "allocator_stats");
    std::lock_guard<std::mutex> lock(mutex_);
    return pools_[static_cast<size_t>(device)].stats;
  }

  void reset_peak(int device) {
    check_device(device, "reset_peak_stats");
    std::lock_guard<std::mutex> lock(mutex_);
    AllocatorStats& s = pools_[static_cast<size_t>(device)].stats;
    s.peak_allocated_bytes = s.allocated_bytes;
  }

  void empty_cache() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t d = 0; d < pools_.size(); ++d) release_cached(static_cast<int>(d), pools_[d], "empty_cache");
  }

 private:
  // The best-fitting cached block of block.stream's cache, or nullptr. On a hit, block.size
  // becomes that block's size.
  static void* take_cached(DevicePool& pool, Block& block) {
    const auto stream_cache = pool.cached.find(block.stream);
    if (stream_cache == pool.cached.end()) return nullptr;
    std::multimap<size_t, void*>& by_size = stream_cache->second;
    const auto it = by_size.lower_bound(block.size);
    if (it == by_size.end() || it->first > block.size + block.size / 8) return nullptr;
    void* ptr = it->second;
    block.size = it->first;
    by_size.erase(it);
    return ptr;
  }

  // A new block from the driver; on failure, the cache goes back to the driver and the
  // driver is asked once more.
  void* malloc_block(int device, DevicePool& pool, size_t size, size_t requested) {
    DeviceGuard guard(device);
    void* ptr = nullptr;
    cudaError_t err = cudaMalloc(&ptr, size);
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // not sticky: clear it before trying again
      release_cached(device, pool, "empty");
      err = cudaMalloc(&ptr, size);
    }
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      size_t free_bytes = 0, total_bytes = 0;
      (void)cudaMemGetInfo(&free_bytes, &total_bytes);
      detail::throw_error(fmt::format(
          "empty: CUDA out of memory allocating {} on cuda:{} (asked for {} bytes): {} in tensors, {} reserved by "
          "minigrad, {} free of the device's {}",
          format_bytes(size), device, requested, format_bytes(pool.stats.allocated_bytes),
          format_bytes(pool.stats.reserved_bytes), format_bytes(free_bytes), format_bytes(total_bytes)));
    }
    if (err != cudaSuccess) throw_cuda_error("empty", "cudaMalloc(&ptr, size)", err);
    ++pool.stats.cuda_malloc_calls;
    pool.stats.reserved_bytes += size;
    return ptr;
  }

  // Gives every cached block of one device back to the driver. A cached block may still be
  // in use by kernels queued on its stream (the host freed it, the stream has not finished
  // with it), so the device finishes its work first.
  static void release_cached(int device, DevicePool& pool, const char* op) {
    if (pool.cached.empty()) return;
    DeviceGuard guard(device);
    MG_CUDA_CHECK(cudaDeviceSynchronize(), op);
    for (auto& [stream, by_size] : pool.cached) {
      for (auto& [size, ptr] : by_size) {
        MG_CUDA_CHECK(cudaFree(ptr), op);
        ++pool.stats.cuda_free_calls;
        pool.stats.reserved_bytes -= size;
      }
    }
    pool.cached.clear();
  }

  std::mutex mutex_;  // one for all devices: the work under it is a map lookup
  std::vector<DevicePool> pools_;
};

// Made on first use and never destroyed: tensors in static storage may be freed after it
// would be, and at exit the driver takes back all device memory anyway.
CachingAllocator& caching_allocator() {
  static CachingAllocator* allocator = new CachingAllocator(device_count());
  return *allocator;
}

}  // namespace

AllocatorStats allocator_stats(int device) { return caching_allocator().stats(device); }
void reset_peak_stats(int device) { caching_allocator().reset_peak(device); }
void empty_cache() { caching_allocator().empty_cache(); }

Workspace::Workspace(size_t nbytes, int device) : nbytes_(nbytes), device_(device) {
  data_ = caching_allocator().allocate(nbytes, Device::cuda(device));
}

Workspace::~Workspace() { caching_allocator().deallocate(data_, nbytes_, Device::cuda(device_)); }

Backend probe_backend() {
  if (device_count() == 0) return {};
  Backend backend;
  backend.allocator = &caching_allocator();
  backend.copy = &copy_bytes_between;
  backend.kernels.copy_strided = &copy_strided;
  backend.kernels.fill = &fill;
  return backend;
}

}  // namespace cuda
}  // namespace minigrad
