#pragma once
// cuda/flash_attention.cu itself, for the flash experiments: they instantiate its kernels and
// templates with other tile shapes, and link against libminigrad.a, which defines the same
// entry points. The entry points are renamed here (experiment_flash_attention_*) so that
// both copies link; everything else lives in the file's anonymous namespace.
#define flash_attention_supports experiment_flash_attention_supports
#define flash_attention_forward experiment_flash_attention_forward
#define flash_attention_backward experiment_flash_attention_backward
#include "../../cuda/flash_attention.cu"
#undef flash_attention_supports
#undef flash_attention_forward
#undef flash_attention_backward
