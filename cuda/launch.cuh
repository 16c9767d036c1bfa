#pragma once
// Host-side launch helpers shared by the kernels: the device's SM count and the blocks of a
// kernel that fill it once (a grid of resident blocks), and the opt-in to more than the default
// 48 KiB of dynamic shared memory (flash attention's tiles, the staged rows of the row kernels).
#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include <minigrad/cuda/runtime.h>

namespace minigrad {
namespace cuda {

// Raises a kernel's dynamic shared-memory limit to `bytes` (above the default 48 KiB), per
// device, whenever a launch needs more than the limit already set: CUDA requires the opt-in
// before a launch asks for more, and a launch past it fails. Up to the default, nothing to do:
// no lock and no driver call on the launch path of kernels that ask for less.
constexpr int kDefaultDynamicSharedBytes = 48 * 1024;

template <typename Kernel>
void allow_shared_memory(Kernel kernel, int bytes, const char* op) {
  if (bytes <= kDefaultDynamicSharedBytes) return;
  static std::mutex mutex;
  static std::map<std::pair<const void*, int>, int> allowed;  // (kernel, device) -> bytes
  int device = 0;
  MG_CUDA_CHECK(cudaGetDevice(&device), op);
  const std::lock_guard<std::mutex> lock(mutex);
  int& limit = allowed[{reinterpret_cast<const void*>(kernel), device}];
  if (bytes <= limit) return;
  MG_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes), op);
  limit = bytes;
}

// The most dynamic shared memory one block of the current device may opt into (227 KiB on
// sm_90, 163 KiB on sm_80, 99 KiB on sm_86 and sm_89), asked once per device.
inline int max_shared_memory_per_block(const char* op) {
  static std::mutex mutex;
  static std::vector<int> bytes;  // by device; 0: not asked yet
  int device = 0;
  MG_CUDA_CHECK(cudaGetDevice(&device), op);
  const std::lock_guard<std::mutex> lock(mutex);
  if (bytes.size() <= static_cast<size_t>(device)) bytes.resize(static_cast<size_t>(device) + 1, 0);
  int& b = bytes[static_cast<size_t>(device)];
  if (b == 0) MG_CUDA_CHECK(cudaDeviceGetAttribute(&b, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), op);
  return b;
}

// Whether rows of `row_bytes` staged in shared memory (cuda/row_kernels.cuh's stage_row_vectors)
// leave room for `blocks_per_sm` blocks an SM, each with a little static shared memory beside
// its row. The row kernels ask for two where their registers allow: with one, the SM would wait
// on each block's copies with nothing else to run.
inline bool fits_staged_rows(int64_t row_bytes, int64_t blocks_per_sm, const char* op) {
  constexpr int64_t kStaticBytes = 2048;  // the kernels' combines, and the system's 1 KiB a block
  return blocks_per_sm * (row_bytes + kStaticBytes) <= max_shared_memory_per_block(op);
}

// The current device's streaming multiprocessors, asked once per device.
inline int64_t multiprocessor_count(const char* op) {
  static std::mutex mutex;
  static std::vector<int> counts;  // by device; 0: not asked yet
  const int device = current_device();
  const std::lock_guard<std::mutex> lock(mutex);
  if (counts.size() <= static_cast<size_t>(device)) counts.resize(static_cast<size_t>(device) + 1, 0);
  int& c = counts[static_cast<size_t>(device)];
  if (c == 0) MG_CUDA_CHECK(cudaDeviceGetAttribute(&c, cudaDevAttrMultiProcessorCount, device), op);
  return c;
}

// Blocks of `kernel` at `threads` threads each (and `dynamic_shared_bytes` of dynamic shared
// memory each) that the current device runs at once, as registers and shared memory allow: one
// wave, at least one block an SM.
template <typename Kernel>
int64_t blocks_per_wave(Kernel kernel, int threads, const char* op, int dynamic_shared_bytes = 0) {
  int per_sm = 0;
  MG_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, dynamic_shared_bytes), op);
  return int64_t{std::max(per_sm, 1)} * multiprocessor_count(op);
}

}  // namespace cuda
}  // namespace minigrad
