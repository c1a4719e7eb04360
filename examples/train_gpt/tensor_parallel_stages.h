// train_gpt --tp N with a pipeline: this rank's stages, each cut by hand from its own copy of the
// model and split by the family's tensor-parallel plan on a {pp, dp, tp} mesh, and gradient
// clipping by the unsplit model's norm across such stages.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "dropout_generators.h"
#include "options.h"
#include "tensorplay/core/device.h"
#include "tensorplay/distributed/device_mesh.h"
#include "tensorplay/distributed/process_group.h"
#include "tensorplay/pipelining/pipeline_stage.h"
#include "tensorplay/schedules/schedule_kind.h"

namespace train_gpt {

/// This rank's share of a pipelined --tp run.
struct TensorParallelStages {
  tensorplay::distributed::DeviceMesh mesh;  ///< {pp, dp, tp}, row-major over the world
  std::vector<std::shared_ptr<tensorplay::pipelining::PipelineStage>> stages;
  /// Per local stage, the names of the parameters split across tp (the others are whole).
  std::vector<std::set<std::string>> split;
};

/// Builds the stages of `pipeline_rank` (stages_of_rank of `kind`): for each, a model of the
/// flags' sizes from --seed (make_model), cut at blocks as the traced pipeline cuts them (stage s
/// holds blocks [s L / S, (s+1) L / S)), split by its family's plan over the mesh's tp dimension
/// (nn::ModelStage, tensor_parallel::parallelize_stage), its dropout modules drawing from
/// `generators`' generator of the same path. Activations cross stages replicated across tp.
/// Throws std::invalid_argument for flags this path does not take yet.
TensorParallelStages build_tensor_parallel_stages(const Options& o, int64_t vocab,
                                                  tensorplay::schedules::ScheduleKind kind,
                                                  int ranks, int stages_per_rank,
                                                  const DropoutGenerators& generators);

/// Clips the gradients of `built`'s stages by the unsplit model's global norm (split parameters'
/// squares summed over `tp`, whole ones counted once, a tied parameter by its lowest stage, all
/// summed over `pipeline`); returns the norm before clipping.
float clip_tensor_parallel_gradients(const TensorParallelStages& built, float max_norm,
                                     const tensorplay::distributed::ProcessGroup& pipeline,
                                     const tensorplay::distributed::ProcessGroup& tp);

}  // namespace train_gpt
