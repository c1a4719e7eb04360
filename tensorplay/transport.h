// The transport namespace: channels that move tensors within a process, over UCX and NCCL.
// Include this from user code; library code includes the headers it needs.
#pragma once

#include "tensorplay/transport/channel.h"
#include "tensorplay/transport/collective_key.h"
#include "tensorplay/transport/local_channel.h"
#include "tensorplay/transport/nccl_all_reduce.h"
#include "tensorplay/transport/nccl_channel.h"
#include "tensorplay/transport/ring_all_reduce.h"
#include "tensorplay/transport/tensor_descriptor.h"
#include "tensorplay/transport/transfer_key.h"
#include "tensorplay/transport/ucx_channel.h"
