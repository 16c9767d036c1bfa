#pragma once
// The CUDA runtime calls of the kernels' host code (cuda/*.cu as rewrite.py turns them into
// host code), answered without a GPU: each driver includes this after minigrad/cuda/runtime.h
// (whose declarations keep their names: these only rename the calls that follow), then the
// generated files, then #undefs the eight names below.
#include "emu.h"

#include <minigrad/cuda/runtime.h>

namespace minigrad {
namespace cuda {
struct EmuDeviceGuard {
  explicit EmuDeviceGuard(int) {}
};
inline cudaStream_t emu_current_stream() { return nullptr; }
inline int emu_current_device() { return 0; }
// CUDA's device min and max of ints: minigrad::min and max (tensor ops) would hide ::min and ::max.
using ::max;
using ::min;
}  // namespace cuda
}  // namespace minigrad

#define cudaGetDevice ::emu::get_device
#define cudaFuncSetAttribute ::emu::func_set_attribute
#define cudaDeviceGetAttribute ::emu::device_get_attribute
#define cudaOccupancyMaxActiveBlocksPerMultiprocessor ::emu::occupancy_max_active_blocks
#define cudaGetLastError ::emu::get_last_error
#define DeviceGuard EmuDeviceGuard
#define current_stream emu_current_stream
#define current_device emu_current_device
