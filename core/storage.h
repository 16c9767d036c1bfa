#pragma once
// Storage: one allocation on one device. Tensors share it through shared_ptr; views are
// tensors over the same Storage with other sizes, strides and offset.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include <minigrad/core/allocator.h>

namespace minigrad {

class Storage {
 public:
  Storage(size_t nbytes, Device device);
  // Memory the caller allocated (from_blob): no allocator is involved; the destructor calls
  // `deleter(data)` when one is given (so it must not throw), and otherwise leaves the
  // memory alone.
  Storage(void* data, size_t nbytes, Device device, std::function<void(void*)> deleter);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

  // The number of in-place writes so far. Every view of a tensor shares its Storage, so
  // this one counter is what "shared by a tensor and all its views" means.
  uint64_t version() const { return version_; }
  void bump_version() { ++version_; }

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  Allocator* allocator_ = nullptr;          // null for memory the caller owns
  std::function<void(void*)> deleter_;      // that memory's deleter, if any
  uint64_t version_ = 0;
};

}  // namespace minigrad
