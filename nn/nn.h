#pragma once
// nn: modules (nn/module.h) and the layers built on minigrad's ops (nn/modules.h).
#include <minigrad/nn/module.h>
#include <minigrad/nn/modules.h>
