// The CUDA runtime layer: error messages, devices, the current stream, cuBLAS handles.
// The caching allocator and its statistics are in cuda/allocator.cpp.
#include <minigrad/cuda/runtime.h>

#include <mutex>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace minigrad {
namespace cuda {

void throw_cuda_error(const char* op, const char* expr, cudaError_t err) {
  // The failing call also left err in this thread's last-error slot: clear it, so the next
  // launch check does not report it a second time. (A fault inside a kernel is "sticky" and
  // stays: the context is unusable after it, and every later call reports it.)
  (void)cudaGetLastError();
  detail::throw_error(
      fmt::format("{}: CUDA error {}: {} (in {})", op, cudaGetErrorName(err), cudaGetErrorString(err), expr));
}

void throw_cublas_error(const char* op, const char* expr, cublasStatus_t status) {
  detail::throw_error(fmt::format("{}: cuBLAS error {}: {} (in {})", op, cublasGetStatusName(status),
                                  cublasGetStatusString(status), expr));
}

// ---- devices ----

int device_count() {
  // Asked once: the answer cannot change while the process runs, and every stream lookup
  // asks. Without a driver or a GPU cudaGetDeviceCount fails: that means 0 devices.
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    return n;
  }();
  return count;
}

void check_device(int device, const char* op) {
  const int n = device_count();
  if (device >= 0 && device < n) return;
  if (n == 0) detail::throw_error(fmt::format("{}: device cuda:{} is not available: no GPU is present", op, device));
  detail::throw_error(fmt::format("{}: device cuda:{} is not available: this machine has {} GPU{} (cuda:0{})", op,
                                  device, n, n == 1 ? "" : "s", n == 1 ? "" : fmt::format(" to cuda:{}", n - 1)));
}

int current_device() {
  int device = 0;
  MG_CUDA_CHECK(cudaGetDevice(&device), "current_device");
  return device;
}

void synchronize() { MG_CUDA_CHECK(cudaDeviceSynchronize(), "synchronize"); }

DeviceGuard::DeviceGuard(int device) : previous_(current_device()) {
  check_device(device, "DeviceGuard");
  if (device != previous_) MG_CUDA_CHECK(cudaSetDevice(device), "DeviceGuard");
}

// A destructor must not throw; switching back to a device that was current a moment ago
// fails only in a broken context, which the next checked call reports anyway.
DeviceGuard::~DeviceGuard() {
  int now = previous_;
  if (cudaGetDevice(&now) == cudaSuccess && now != previous_) (void)cudaSetDevice(previous_);
}

// ---- streams ----

namespace {

// This host thread's current stream on each device; nullptr (the legacy default stream,
// which orders work with every other blocking stream) until a StreamGuard sets another.
std::vector<cudaStream_t>& thread_streams() {
  thread_local std::vector<cudaStream_t> streams(static_cast<size_t>(device_count()), nullptr);
  return streams;
}

}  // namespace

cudaStream_t current_stream(int device) {
  check_device(device, "current_stream");
  return thread_streams()[static_cast<size_t>(device)];
}

cudaStream_t current_stream() { return current_stream(current_device()); }

void set_current_stream(int device, cudaStream_t stream) {
  check_device(device, "set_current_stream");
  thread_streams()[static_cast<size_t>(device)] = stream;
}

StreamGuard::StreamGuard(cudaStream_t stream, int device)
    : device_(device < 0 ? current_device() : device), previous_(current_stream(device_)) {
  set_current_stream(device_, stream);
}

StreamGuard::~StreamGuard() { thread_streams()[static_cast<size_t>(device_)] = previous_; }

// ---- cuBLAS ----

namespace {

// One handle per device, made on first use (cublasCreate costs milliseconds and device
// memory for its workspace). They live as long as the process: destroying them during static
// destruction could run after the CUDA runtime has shut down. A handle is shared by the host
// threads; minigrad issues its work from one host thread at a time.
template <typename Handle, typename Create>
Handle per_device_handle(std::vector<Handle>& handles, std::mutex& mutex, Create create) {
  const int device = current_device();
  std::lock_guard<std::mutex> lock(mutex);
  if (handles.empty()) handles.resize(static_cast<size_t>(device_count()), nullptr);
  Handle& handle = handles[static_cast<size_t>(device)];
  if (handle == nullptr) create(&handle);
  return handle;
}

}  // namespace

cublasHandle_t cublas_handle() {
  static std::vector<cublasHandle_t> handles;
  static std::mutex mutex;
  cublasHandle_t handle = per_device_handle(handles, mutex, [](cublasHandle_t* h) {
    MG_CUBLAS_CHECK(cublasCreate(h), "cublas_handle");
  });
  MG_CUBLAS_CHECK(cublasSetStream(handle, current_stream()), "cublas_handle");
  return handle;
}

// cuBLASLt takes the stream with each call (cublasLtMatmul's last argument): nothing to bind.
cublasLtHandle_t cublaslt_handle() {
  static std::vector<cublasLtHandle_t> handles;
  static std::mutex mutex;
  return per_device_handle(handles, mutex, [](cublasLtHandle_t* h) {
    MG_CUBLAS_CHECK(cublasLtCreate(h), "cublaslt_handle");
  });
}

}  // namespace cuda
}  // namespace minigrad
