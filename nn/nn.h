#pragma once
// nn: modules (nn/module.h), the layers built on minigrad's ops (nn/modules.h), and saving and
// loading in the safetensors format (nn/serialize.h).
#include <minigrad/nn/module.h>
#include <minigrad/nn/modules.h>
#include <minigrad/nn/serialize.h>
