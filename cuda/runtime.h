#pragma once
// The CUDA backend's runtime: error checks, devices, the current stream, the caching
// allocator's statistics, and the cuBLAS handles. Only built with MINIGRAD_CUDA (and then
// <minigrad/config.h> defines MINIGRAD_WITH_CUDA to 1 for everything that includes it).
//
// Rules every CUDA file follows:
//   - every runtime call is wrapped in MG_CUDA_CHECK and every kernel launch is followed by
//     MG_CUDA_CHECK_LAUNCH, each naming the op, so an error says where it came from;
//   - every kernel and cuBLAS call runs on current_stream(); the host synchronizes only
//     where a value is read (item(), a copy to the CPU);
//   - device memory comes from the caching allocator (core's empty(), or cuda_workspace()),
//     never from a cudaMalloc per op.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include <minigrad/core/error.h>

namespace minigrad {
namespace cuda {

[[noreturn]] void throw_cuda_error(const char* op, const char* expr, cudaError_t err);
[[noreturn]] void throw_cublas_error(const char* op, const char* expr, cublasStatus_t status);

#define MG_CUDA_CHECK(expr, op)                                                   \
  do {                                                                            \
    cudaError_t mg_err_ = (expr);                                                 \
    if (mg_err_ != cudaSuccess) ::minigrad::cuda::throw_cuda_error(op, #expr, mg_err_); \
  } while (0)

// After every kernel launch: catches bad launch configurations at once (not at the next sync).
#define MG_CUDA_CHECK_LAUNCH(op) MG_CUDA_CHECK(cudaGetLastError(), op)

#define MG_CUBLAS_CHECK(expr, op)                                                         \
  do {                                                                                    \
    cublasStatus_t mg_status_ = (expr);                                                   \
    if (mg_status_ != CUBLAS_STATUS_SUCCESS) ::minigrad::cuda::throw_cublas_error(op, #expr, mg_status_); \
  } while (0)

// ---- devices ----
int device_count();     // 0 where no GPU (or no driver) is present
// Throws a clear error naming `op` and cuda:<device> unless that device exists.
void check_device(int device, const char* op);
int current_device();
void synchronize();     // the current device

// Sets the current device for a scope (ops run on their inputs' device).
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_;
};

// ---- streams: one current stream per device (per host thread), default the legacy stream 0 ----
cudaStream_t current_stream();            // of the current device
cudaStream_t current_stream(int device);
void set_current_stream(int device, cudaStream_t stream);

// Makes `stream` current on `device` for a scope.
class StreamGuard {
 public:
  StreamGuard(cudaStream_t stream, int device = -1);  // -1: the current device
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  int device_;
  cudaStream_t previous_;
};

// ---- the caching allocator ----
struct AllocatorStats {
  size_t allocated_bytes = 0;       // in live tensors now
  size_t reserved_bytes = 0;        // held from the driver (allocated + cached)
  size_t peak_allocated_bytes = 0;  // since the last reset_peak_stats()
  uint64_t cuda_malloc_calls = 0;   // cudaMalloc calls so far: flat in a steady training loop
  uint64_t cuda_free_calls = 0;
};
AllocatorStats allocator_stats(int device = 0);
void reset_peak_stats(int device = 0);
void empty_cache();  // returns every cached (unused) block to the driver

// Scratch memory on the current stream from the caching allocator, freed when the
// returned storage dies (e.g. cuBLASLt's workspace).
class Workspace {
 public:
  Workspace(size_t nbytes, int device);
  ~Workspace();
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  int device_ = 0;
};

// ---- cuBLAS: one handle per device, bound to the current stream when returned ----
cublasHandle_t cublas_handle();
cublasLtHandle_t cublaslt_handle();

}  // namespace cuda
}  // namespace minigrad
