#pragma once
// What the samples that set a fused op against its composite twin share: an allocator that
// counts the bytes a run allocates, the median time of forward + backward, the side-by-side
// print, and the check that both compute the same thing. Header-only, for the sample
// programs (each its own executable).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <vector>

#include <fmt/core.h>

#include <minigrad/core/allocator.h>
#include <minigrad/minigrad.h>

#include "samples/device.h"

namespace minigrad {
namespace samples {

// ---- measuring memory: an allocator that counts ----
// Every tensor's memory comes from its device's Allocator (core/allocator.h), so wrapping
// it sees every byte: registered in front of the device's allocator for a measurement, it
// counts and forwards. A storage remembers the allocator it came from, so memory allocated
// before or after the measurement is freed by the allocator that gave it.
class CountingAllocator final : public Allocator {
 public:
  explicit CountingAllocator(DeviceType type) : type_(type) {}
  void* allocate(size_t nbytes, Device device) override {
    void* p = inner_->allocate(nbytes, device);
    const size_t live = live_ += nbytes;
    total_ += nbytes;
    size_t peak = peak_.load();
    while (live > peak && !peak_.compare_exchange_weak(peak, live)) {
    }
    return p;
  }
  void deallocate(void* ptr, size_t nbytes, Device device) override {
    live_ -= nbytes;
    inner_->deallocate(ptr, nbytes, device);
  }
  // Counts from zero until stop(): bytes of tensors alive before start() are not counted.
  void start() {
    inner_ = get_allocator(type_);
    live_ = 0;
    peak_ = 0;
    total_ = 0;
    register_allocator(type_, this);
  }
  void stop() { register_allocator(type_, inner_); }
  size_t peak() const { return peak_; }
  size_t total() const { return total_; }

 private:
  DeviceType type_;
  Allocator* inner_ = nullptr;
  std::atomic<size_t> live_{0}, peak_{0}, total_{0};  // atomics: a backward may run on other threads
};

struct Measured {
  double ms = 0;
  double peak_mib = 0;
  double allocated_mib = 0;
};

// Median time of `run` (forward + backward), then one more run counted by the allocator.
inline Measured measure(Device device, const std::function<void()>& run) {
  for (int i = 0; i < 2; ++i) run();  // warm-up: caches filled, kernels loaded
  synchronize(device);
  std::vector<double> ms;
  for (int i = 0; i < 7; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    synchronize(device);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  static CountingAllocator counting_cpu(DeviceType::CPU), counting_cuda(DeviceType::CUDA);
  CountingAllocator& counting = device.is_cuda() ? counting_cuda : counting_cpu;
  counting.start();
  run();
  synchronize(device);
  counting.stop();
  constexpr double kMiB = 1024.0 * 1024.0;
  return {ms[ms.size() / 2], static_cast<double>(counting.peak()) / kMiB,
          static_cast<double>(counting.total()) / kMiB};
}

inline void print_side_by_side(const char* name, const Measured& twin, const Measured& fused) {
  fmt::print("  {:<32} {:>12} {:>12}\n", name, "twin", "fused");
  fmt::print("  {:<32} {:>12.3f} {:>12.3f}   ({:.1f}x)\n", "forward + backward, ms", twin.ms, fused.ms,
             twin.ms / fused.ms);
  fmt::print("  {:<32} {:>12.1f} {:>12.1f}\n", "peak of new memory, MiB", twin.peak_mib, fused.peak_mib);
  fmt::print("  {:<32} {:>12.1f} {:>12.1f}   (each byte written once, read at least once)\n",
             "all memory allocated, MiB", twin.allocated_mib, fused.allocated_mib);
}

// The largest |a - b|, in float64 on the CPU.
inline double max_difference(const Tensor& a, const Tensor& b) {
  return max(abs(a.to(kFloat64).cpu() - b.to(kFloat64).cpu())).item().toDouble();
}

inline bool agree(const char* what, const Tensor& twin, const Tensor& fused, double tolerance) {
  const double d = max_difference(twin, fused);
  const bool ok = d <= tolerance;
  fmt::print("  {:<32} max |twin - fused| = {:.2e}  {}\n", what, d, ok ? "ok" : "DISAGREE");
  return ok;
}

}  // namespace samples
}  // namespace minigrad
