// Everything tensorplay offers a user, one include: Tensor and its ops, nn, optim, data,
// schedules, transport, distributed and pipelining.
#pragma once

#include "tensorplay/data.h"
#include "tensorplay/distributed.h"
#include "tensorplay/nn.h"
#include "tensorplay/optim.h"
#include "tensorplay/pipelining.h"
#include "tensorplay/schedules.h"
#include "tensorplay/tensor.h"
#include "tensorplay/transport.h"
