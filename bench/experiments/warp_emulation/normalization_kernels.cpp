// The normalization kernels (cuda/normalization.cu as rewrite.py turns it into host code) under
// emu.h, their entry points renamed emu_normalization_forward and emu_normalization_backward for
// rows_driver.cpp, which calls them. A translation unit of its own: the kernels' anonymous
// namespace holds names that softmax_dropout.cu's holds too.
#define normalization_forward emu_normalization_forward
#define normalization_backward emu_normalization_backward

#include "emu.h"

// The runtime calls of the kernels' host code, answered without a GPU.
#include "host_calls.h"

#include "normalization.inc"
