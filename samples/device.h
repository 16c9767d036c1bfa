#pragma once
// The device helpers the sample programs share: which device to run on, and waiting for it.
// Header-only, for the sample programs (each its own executable).
#include <cstring>

#include <fmt/core.h>

#include <minigrad/config.h>  // MINIGRAD_WITH_CUDA
#include <minigrad/minigrad.h>
#if MINIGRAD_WITH_CUDA
#include <minigrad/cuda/runtime.h>  // cuda::synchronize, only in a build with the CUDA backend
#endif

namespace minigrad {
namespace samples {

// Waits for the device's queued work: a timing must end when the GPU is done, not when the
// last launch returns.
inline void synchronize(Device device) {
#if MINIGRAD_WITH_CUDA
  if (device.is_cuda()) cuda::synchronize();
#else
  (void)device;  // no GPU in this build: every tensor is on the CPU
#endif
}

// The device to train on: the GPU when one is present (this build has the CUDA backend
// and found a GPU), else the CPU; `--device cpu` or `--device cuda` says which.
inline Device choose_device(int argc, char** argv) {
  Device device = cuda_is_available() ? Device::cuda() : kCPU;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--device") != 0) continue;
    if (std::strcmp(argv[i + 1], "cpu") == 0) device = kCPU;
    if (std::strcmp(argv[i + 1], "cuda") == 0) device = Device::cuda();
  }
  if (device.is_cuda() && !cuda_is_available()) {
    fmt::print("CUDA was requested but is not usable here (no CUDA backend in this build, or no GPU); "
               "training on the CPU.\n");
    device = kCPU;
  }
  return device;
}

}  // namespace samples
}  // namespace minigrad
