// pipeline(): trace a model on one microbatch of example inputs, decide where to cut it (a
// split_spec, pipe_split() calls in its forward, or a split_policy), and return the Pipe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tensorplay/nn/module.h"
#include "tensorplay/pipelining/pipe.h"
#include "tensorplay/pipelining/split_point.h"
#include "tensorplay/pipelining/split_policy.h"

namespace tensorplay::pipelining {

/// How pipeline() chooses the cuts. Give at most one of split_spec and split_policy; with
/// neither, the model's pipe_split() calls are the cuts (none: a single stage).
struct PipelineOptions {
  /// Module path -> SplitPoint; cuts made here add to the model's pipe_split() calls.
  SplitSpec split_spec;
  /// Chooses every cut from the traced graph (split_by_parameter_count, split_by_cost, or
  /// your own); the model's pipe_split() calls are in graph.split_calls if it wants them.
  SplitPolicy split_policy;
};

/// Traces `module` with one microbatch of inputs (`mb_args`, `mb_kwargs`; see trace() for what
/// tracing records and its limits) and splits it. Errors, each naming what was wrong: both a
/// spec and a policy; a split_spec path that is not a module (with the nearest valid paths);
/// a module that ran no ops; a cut leaving a stage empty. The module stays usable: the stages
/// share its parameter and buffer tensors (tied weights aside, see Pipe).
Pipe pipeline(nn::Module& module, const std::vector<Tensor>& mb_args,
              const nn::TensorDict& mb_kwargs = {}, const PipelineOptions& options = {});
Pipe pipeline(nn::Module& module, const std::vector<Tensor>& mb_args,
              const PipelineOptions& options);
Pipe pipeline(const std::shared_ptr<nn::Module>& module, const std::vector<Tensor>& mb_args,
              const nn::TensorDict& mb_kwargs = {}, const PipelineOptions& options = {});
Pipe pipeline(const std::shared_ptr<nn::Module>& module, const std::vector<Tensor>& mb_args,
              const PipelineOptions& options);
/// Module holders (`Sequential`, a TENSORPLAY_MODULE type).
template <typename Holder, typename = typename Holder::ImplType>
Pipe pipeline(const Holder& module, const std::vector<Tensor>& mb_args,
              const nn::TensorDict& mb_kwargs = {}, const PipelineOptions& options = {}) {
  return pipeline(*module.ptr(), mb_args, mb_kwargs, options);
}
template <typename Holder, typename = typename Holder::ImplType>
Pipe pipeline(const Holder& module, const std::vector<Tensor>& mb_args,
              const PipelineOptions& options) {
  return pipeline(*module.ptr(), mb_args, {}, options);
}

/// Up to `count` of `candidates` closest to `path` by edit distance, closest first.
std::vector<std::string> nearest_paths(const std::string& path,
                                       const std::vector<std::string>& candidates,
                                       size_t count = 3);

}  // namespace tensorplay::pipelining
