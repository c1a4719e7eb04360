// The distributed namespace: process groups, the device mesh, collectives, the launch
// environment and sharded data parallel (torch.distributed's counterpart, with fsdp).
// Include this from user code; library code includes the headers it needs.
#pragma once

#include "tensorplay/distributed/device_mesh.h"
#include "tensorplay/distributed/fsdp/full_state_dict.h"
#include "tensorplay/distributed/fsdp/fully_shard.h"
#include "tensorplay/distributed/fsdp/mixed_precision.h"
#include "tensorplay/distributed/init_device_mesh.h"
#include "tensorplay/distributed/init_options.h"
#include "tensorplay/distributed/launch_env.h"
#include "tensorplay/distributed/process_group.h"
