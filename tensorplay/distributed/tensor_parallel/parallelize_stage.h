// parallelize_stage: a model's tensor-parallel plan applied to one pipeline stage's module, on a
// {pp, dp, tp} mesh checked alike on every rank.
#pragma once

#include "tensorplay/distributed/device_mesh.h"
#include "tensorplay/distributed/tensor_parallel/parallelize_module.h"
#include "tensorplay/nn/module.h"

namespace tensorplay::distributed::tensor_parallel {

/// The entries of a whole model's plan that apply to one of its stages: those whose path matches
/// a module of `stage_module` (a stage holding the model's modules under their model names, as
/// nn::ModelStage does). An entry for the embeddings stays on the first stage, one for the head
/// on the last, `layers.0` on the stage that holds block 0.
ParallelizePlan plan_for_stage(nn::Module& stage_module, const ParallelizePlan& model_plan);

/// Checks that every rank of `mesh` built the same mesh (shape and dimension names), through an
/// all_gather_bytes over the mesh's ranks: throws std::invalid_argument on every rank, naming rank
/// 0's mesh and the first rank whose mesh differs (so a tp dimension that disagrees between ranks
/// is refused on each of them before any group of it is used). Throws std::invalid_argument for
/// a mesh without a "tp" dimension.
void check_mesh_agrees(const DeviceMesh& mesh);

/// Splits one pipeline stage's module by the model's plan over the mesh's "tp" dimension:
/// check_mesh_agrees(mesh), then parallelize_module(stage_module, mesh["tp"],
/// plan_for_stage(stage_module, model_plan)). Every rank of the mesh calls it once per stage it
/// hosts, in stage order, before building its PipelineStage on the same mesh (set_mesh).
void parallelize_stage(nn::Module& stage_module, const DeviceMesh& mesh,
                       const ParallelizePlan& model_plan);

}  // namespace tensorplay::distributed::tensor_parallel
