// Umbrella header of the tensors layer: Tensor, ops, autograd, nn and optim.
// Include this from user code; library code includes the headers it needs.
#pragma once

#include "tensors/autograd/engine.h"
#include "tensors/cuda_memory.h"
#include "tensors/device_info.h"
#include "tensors/autograd/grad_mode.h"
#include "tensors/nn/activation.h"
#include "tensors/nn/functional.h"
#include "tensors/nn/linear.h"
#include "tensors/nn/module.h"
#include "tensors/nn/sequential.h"
#include "tensors/ops/activation.h"
#include "tensors/ops/conversion.h"
#include "tensors/ops/elementwise.h"
#include "tensors/ops/linear_algebra.h"
#include "tensors/ops/loss.h"
#include "tensors/ops/reduction.h"
#include "tensors/ops/shape_ops.h"
#include "tensors/optim/sgd.h"
#include "tensors/random.h"
#include "tensors/tensor.h"
