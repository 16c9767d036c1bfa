#pragma once
// One include for users: #include <minigrad/minigrad.h>
#include <minigrad/autograd/anomaly_mode.h>
#include <minigrad/autograd/engine.h>
#include <minigrad/autograd/function.h>
#include <minigrad/autograd/grad_mode.h>
#include <minigrad/autograd/graph_export.h>
#include <minigrad/autograd/gradcheck.h>
#include <minigrad/core/determinism.h>
#include <minigrad/core/generator.h>
#include <minigrad/core/parallel.h>
#include <minigrad/core/print.h>
#include <minigrad/core/shape.h>
#include <minigrad/core/tensor.h>
#include <minigrad/nn/nn.h>
#include <minigrad/ops/ops.h>
#include <minigrad/optim/optim.h>
