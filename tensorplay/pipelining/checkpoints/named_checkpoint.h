// Layout-free checkpoints: tensors addressed by the model's qualified names, not by stage, so a
// run saved by one pipeline split (stage count, schedule, placement, pp x dp shape) resumes in any.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tensorplay/core/random.h"
#include "tensorplay/optim/optimizer.h"
#include "tensorplay/pipelining/checkpoints/checkpoint.h"
#include "tensorplay/pipelining/checkpoints/named_checkpoint_info.h"
#include "tensorplay/pipelining/checkpoints/replica_exchange.h"
#include "tensorplay/pipelining/pipeline_stage.h"

namespace tensorplay::pipelining {

/// What a layout-free checkpoint holds besides the stages and the optimizer.
struct NamedCheckpointOptions {
  /// Generators saved and restored by name: a data sampler's, each dropout module's (named
  /// after the module's path in the model, not after a stage, so any split finds it). The
  /// process-wide default generator is always saved as "default"; do not list it.
  std::vector<std::pair<std::string, Generator*>> generators;
  /// Saving: samples of the global data sequence consumed so far (over every dp replica), so a
  /// loader sharded another way continues the same sequence.
  int64_t samples_consumed = 0;
  /// Saving: the writer's layout in words ("pp 2 x dp 2"), for messages; empty: "N stages".
  std::string layout;
  /// Loading: the data-parallel replicas of the stages being loaded (every replica passes its
  /// own view of the same group, e.g. pipelining::replica_exchange(dp_group) from
  /// tensorplay/pipelining/runtime/group_replica_exchange.h). Each replica then reads only its
  /// share of the model and optimizer tensors (dealt out by bytes, alike on every replica;
  /// generators and optimizer options, a few bytes, are read whole by each), and the replicas
  /// exchange their shares, so each ends with exactly what a whole read gives. Null or of one
  /// replica: read it all here.
  std::shared_ptr<ReplicaExchange> replicas;
};

/// Layout on disk, under `dir`:
///
///   dir/step_00000120/data_s0.bin    the raw bytes of the tensors one writer saved, each at a
///                                    64-byte aligned offset (little-endian, row-major)
///   dir/step_00000120/index_s0.txt   that writer's index
///   (tensorplay/pipelining/checkpoints/checkpoint_index.h): for each
///                                    tensor its kind, name, offset, shape, dtype and checksum;
///                                    the step, samples consumed, the writer's stage count and
///                                    stages, layout and optimizer type
///
/// A writer is a process saving the stages it hosts (its files are named after its lowest
/// stage). Its data file is written first and its index last, each atomically (temporary file,
/// fsync, rename, fsync of the folder), so an index names only bytes that are on disk. A step is
/// complete when the indexes there cover every stage of the writer's pipeline once.
///
/// What is saved: each stage's state_dict by qualified name (a tied weight held by several
/// stages once, by the lowest stage holding it), the optimizer's state by parameter name (AdamW's
/// step and moments, SGD's momentum) and its hyper-parameters, the default generator and those of
/// `options`, and options.samples_consumed. Stages replicated over a mesh's "dp" dimension are
/// written by their first replica only (dp rank 0). Call it after the optimizer step of `step`,
/// on every process, with the stages it hosts and the optimizer over their parameters. Throws
/// CheckpointError when a file cannot be written (naming it), a name holds a space, or an
/// optimizer parameter belongs to none of `stages`.
void save_named_checkpoint(const std::string& dir,
                           const std::vector<std::shared_ptr<PipelineStage>>& stages,
                           const optim::Optimizer& optimizer, int64_t step,
                           const NamedCheckpointOptions& options = {});

/// Restores `stages` (any split of the model that was saved: other stage count, schedule,
/// placement, stages per process, pp x dp shape), `optimizer` and the generators from the newest
/// complete step under `dir`, or from `step`. Each process reads only the tensors its stages
/// hold; with options.replicas, only its share of them (see there), and every replica must call
/// it, with the same `dir` and `step`. A version-2 checkpoint
/// (tensorplay/pipelining/checkpoints/checkpoint.h) loads too, into the split that saved it (each
/// replica reading it whole).
///
/// Everything is read and checked before anything changes; CheckpointError names the tensor
/// when one is missing (a checkpoint of another model), has another shape (a model of another
/// size), is one this model lacks, or its bytes are damaged or cut short, and names the index
/// when it is truncated or damaged (pass an earlier step). With replicas, an error any replica
/// finds is thrown by every replica, alike (naming the replica that found it), before any of
/// them changes anything; the replicas also refuse, alike, when they chose different steps or
/// need different tensors.
///
/// Tensors are read (or received) into fresh memory that then becomes the storage of the stage's
/// tensor (its TensorImpl, held by the optimizer, stays) and of the optimizer's state
/// (Optimizer::take_state_dict), uncopied, where dtype and device match and nothing else views
/// the old storage; otherwise copied, as on a device, or for the second copy of a tied weight.
NamedCheckpointInfo load_named_checkpoint(const std::string& dir,
                                          const std::vector<std::shared_ptr<PipelineStage>>& stages,
                                          optim::Optimizer& optimizer,
                                          std::optional<int64_t> step = std::nullopt,
                                          const NamedCheckpointOptions& options = {});

/// The newest step under `dir` that load_named_checkpoint can load into a pipeline of
/// `num_stages` stages: a complete layout-free step of any layout, or a version-2 step of that
/// stage count. Reads only the indexes.
std::optional<NamedCheckpointInfo> latest_named_checkpoint(const std::string& dir, int num_stages);

/// The model tensors (parameters and buffers, by qualified name, on the host) of the complete
/// layout-free step `step` under `dir`, whatever layout wrote it: for tools and tests comparing
/// runs of different layouts. Throws CheckpointError as load_named_checkpoint does.
StateDict read_named_model(const std::string& dir, int64_t step);

}  // namespace tensorplay::pipelining
