// The optim namespace: optimizers (SGD, AdamW), gradient clipping, optimizer state files.
// Include this from user code; library code includes the headers it needs.
#pragma once

#include "tensorplay/optim/adamw.h"
#include "tensorplay/optim/clip_grad.h"
#include "tensorplay/optim/optimizer.h"
#include "tensorplay/optim/serialize.h"
#include "tensorplay/optim/sgd.h"
