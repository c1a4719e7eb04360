// build_stage(): the PipelineStage a worker runs for one stage of a Pipe, with the boundary
// shapes the trace already knows (no second forward).
#pragma once

#include <vector>

#include "tensorplay/pipelining/pipe.h"
#include "tensorplay/pipelining/pipeline_stage.h"

namespace tensorplay::pipelining {

/// The stage `stage_index` of `pipe` on `device`. Its module is the Pipe's StageModule (moved to
/// `device`, and with it the model's tensors it shares); its input and output shapes are the
/// Pipe's boundary metas, so a later microbatch of another shape or dtype gets a StageInputError
/// naming the stage, the input, what was expected and what came (the batch dimension may vary
/// for uneven microbatches). Stage 0's inputs are the model's inputs, keyword inputs last
/// (Pipe::flatten_inputs). Which process runs which stage, and over what links, is the
/// runtime's business.
PipelineStage build_stage(const Pipe& pipe, int stage_index, Device device);

/// The stage `stage_index` of `pipe` on `device` for this rank of `placement`, the stage's one
/// placement: a device mesh with a "pp" dimension (its traffic goes over the "pp" group, and a
/// schedule averages its gradients over the "dp" group, if any, every step), or a process group
/// (it converts to the one-dimensional "pp" mesh over its ranks: the seed's
/// `build_stage(pipe, rank, device, group)`). The stage index is usually
/// `mesh.get_local_rank("pp")` (or stages_of_rank of it for multi-stage schedules). Throws
/// std::invalid_argument when the mesh has no "pp" dimension.
PipelineStage build_stage(const Pipe& pipe, int stage_index, Device device,
                          const distributed::DeviceMesh& placement);

/// The stages `stage_indices` of `pipe` on `device` for this rank of `placement` (as above): a
/// rank of ScheduleZBVZeroBubble holds stages r and 2p-1-r (see stages_of_rank).
std::vector<std::shared_ptr<PipelineStage>> build_stages(const Pipe& pipe,
                                                         const std::vector<int>& stage_indices,
                                                         Device device,
                                                         const distributed::DeviceMesh& placement);

/// The stages one process hosts: with as many devices as stages, stage i on devices[i]; with
/// fewer, stage i on devices[i % devices.size()] (the looped placement interleaved schedules
/// expect).
std::vector<std::shared_ptr<PipelineStage>> build_stages(const Pipe& pipe,
                                                         const std::vector<Device>& devices);

/// Every parameter of `stages`, each tensor once, for an optimizer. A tied parameter's copies in
/// different stages are separate tensors and each is listed: schedules sum their gradients each
/// step (sync_tied_gradients), so the optimizer updates every copy identically.
std::vector<Tensor> parameters(const std::vector<std::shared_ptr<PipelineStage>>& stages);

/// Raw pointers to `stages`, for sync_tied_gradients.
std::vector<PipelineStage*> stage_pointers(
    const std::vector<std::shared_ptr<PipelineStage>>& stages);

}  // namespace tensorplay::pipelining
