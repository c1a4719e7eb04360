// Tied parameters across stages: summing the gradients of the copies a Pipe made of a
// parameter read by several stages (a GPT's token embedding and lm_head).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "tensorplay/pipelining/pipe.h"
#include "tensorplay/pipelining/pipeline_stage.h"

namespace tensorplay::pipelining {

/// Makes training with tied weights match the unsplit model.
///
/// A parameter read by several stages is held by each of them as its own leaf (Pipe), so each
/// copy receives only the gradient of its own stage's uses. The model's gradient is their sum.
/// Call this after the backward passes of a step and before the optimizer step: for each tie
/// group of `pipe` (Pipe::tied_parameters) it sums the gradients of the copies held by `stages`
/// and writes the sum into every copy's grad (each on its own device). The optimizer then
/// updates every copy identically, so the copies stay equal.
///
/// Across processes the copies live in different processes and the sum needs a transport: an
/// all-reduce among the stages holding a copy (the runtime does it). With `allow_partial`
/// false, a tie group with a stage not in `stages` is an error naming it; with true, the
/// local copies get the local sum, ready for that all-reduce.
void sync_tied_gradients(const std::vector<PipelineStage*>& stages, const Pipe& pipe,
                         bool allow_partial = false);

/// The same over the Pipe's own stage modules (after a backward through Pipe::forward).
void sync_tied_gradients(const Pipe& pipe);

/// Sums a tie group's gradient across processes in place (an all-reduce among the ranks holding
/// a copy); gets the group's name and the sum of this process's copies.
using TiedReduce = std::function<void(const std::string& name, Tensor& local_sum)>;

/// Tied-parameter gradients set aside at the start of a step (see begin_tied_step).
struct TiedGradients {
  std::map<std::string, Tensor> before;  ///< accumulated gradient per tied name, if any
};

/// Step-wise sync that keeps gradient accumulation across steps right (what schedules use).
/// Before a step: sets aside each tied parameter's accumulated gradient (equal in every copy
/// after the previous sync) and clears the copies' gradients, so the step's backward passes give
/// each copy only its own stage's contribution. The groups come from the stages themselves
/// (PipelineStage::tied_parameters, filled by build_stage).
TiedGradients begin_tied_step(const std::vector<PipelineStage*>& stages);
/// After the step's backward passes: writes `before` plus the sum of the copies' gradients into
/// every copy. With `allow_partial` false, a group with a copy outside `stages` is an error.
/// With `reduce`, the local sum of each group (zeros when no local copy has a gradient) goes
/// through it before `before` is added; groups are visited in name order on every process.
void finish_tied_step(const std::vector<PipelineStage*>& stages, TiedGradients&& state,
                      bool allow_partial = false, const TiedReduce& reduce = nullptr);

}  // namespace tensorplay::pipelining
