// The distributed namespace: process groups, the device mesh, collectives, the launch
// environment, tensor parallelism and sharded data parallel (torch.distributed's counterpart).
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
#include "tensorplay/distributed/tensor_parallel/block_costs.h"
#include "tensorplay/distributed/tensor_parallel/clip_grad_norm.h"
#include "tensorplay/distributed/tensor_parallel/colwise_parallel.h"
#include "tensorplay/distributed/tensor_parallel/full_state_dict.h"
#include "tensorplay/distributed/tensor_parallel/functional.h"
#include "tensorplay/distributed/tensor_parallel/loss_parallel.h"
#include "tensorplay/distributed/tensor_parallel/model_plans.h"
#include "tensorplay/distributed/tensor_parallel/optimizer_state.h"
#include "tensorplay/distributed/tensor_parallel/parallel_style.h"
#include "tensorplay/distributed/tensor_parallel/parallelize_module.h"
#include "tensorplay/distributed/tensor_parallel/parallelize_stage.h"
#include "tensorplay/distributed/tensor_parallel/placement.h"
#include "tensorplay/distributed/tensor_parallel/prepare_module.h"
#include "tensorplay/distributed/tensor_parallel/replicated_colwise.h"
#include "tensorplay/distributed/tensor_parallel/rowwise_parallel.h"
#include "tensorplay/distributed/tensor_parallel/sequence_parallel.h"
