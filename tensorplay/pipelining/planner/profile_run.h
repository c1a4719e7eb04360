// pp::profile: measures a model on this machine, segment by segment between its split
// candidates (times, bytes, the cuts' traffic, the channels between ranks, thread scaling).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tensorplay/core/device.h"
#include "tensorplay/core/tensor.h"
#include "tensorplay/nn/module.h"
#include "tensorplay/optim/optimizer.h"
#include "tensorplay/pipelining/pipeline_stage.h"
#include "tensorplay/pipelining/planner/channel_measure.h"
#include "tensorplay/pipelining/planner/profile.h"

namespace tensorplay::pipelining {

/// What profile() measures and how.
struct ProfileOptions {
  /// Module paths where a stage may begin, in model order ("blocks.0", "blocks.1", ...); each
  /// becomes the beginning of one segment. Must be non-empty.
  std::vector<std::string> candidates;
  Device device = cpu();
  LossFn loss_fn;  ///< the last segment's loss
  Tensor target;   ///< one microbatch's target
  std::string model_name = "model";
  int repeats = 3;                            ///< each time is the best of this many runs
  std::vector<int> thread_counts = {1};       ///< product threads to try (first: 1)
  double optimizer_states_per_parameter = 2;  ///< AdamW keeps two moments
  /// The optimizer whose step each segment times (its learning rate should be 0: the timing
  /// steps must not change the model); null: AdamW with learning rate 0.
  std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)> optimizer;
  /// The UCX channels measured after the in-process one (the channels of ranks in separate
  /// processes); one this host cannot run is left out with a line on standard error. Empty: the
  /// in-process channel only.
  std::vector<UcxChannelSpec> ucx_channels = default_ucx_channels();
  PingPongOptions ping_pong;  ///< how each UCX channel is measured
  /// Also time every segment's F, B, I and W at these multiples of the example microbatch (its
  /// inputs and the target repeated), ascending from 2: SegmentProfile::larger, through which the
  /// planner interpolates to other microbatch sizes (an action's time is seldom proportional to
  /// its samples: caches, memory-bound weights). Each multiple k costs about k profiles' time.
  std::vector<int> larger_microbatches;
};

/// Measures `model` on `example_microbatch` (one microbatch of the model's positional inputs):
/// traces it, cuts it at every candidate, and times each segment's F, B, I and W (best of
/// `repeats` after one warm-up round, on one product thread: `thread_counts` measure the whole
/// model's speedup with more, which the planner applies). Each action's fixed overhead comes from
/// a forward of one sample against one of the whole microbatch. Activation
/// bytes are the host allocator's bytes still allocated after a segment's forward (its stash and
/// outputs), with and without full recomputation; on a CUDA device they are left 0. The channels
/// are the in-process one (first: the planner's default for ranks of one process), then each of
/// `ucx_channels` measured (measure_ucx_channels). Throws what
/// pipeline() throws for a candidate the model lacks.
Profile profile(nn::Module& model, const std::vector<Tensor>& example_microbatch,
                const ProfileOptions& options);

}  // namespace tensorplay::pipelining
