// Splitting a step's arguments into microbatches and merging its outputs back.
#include "tensorplay/pipelining/runtime/detail/step_io.h"

#include <algorithm>
#include <stdexcept>

#include "tensorplay/pipelining/stage_module.h"

namespace tensorplay::pipelining::detail {

namespace {

/// The rows of `t` along `spec`'s dim, or -1 when it is not split that way.
int64_t rows_along(const Tensor& t, const ChunkSpec& spec) {
  const auto* split = std::get_if<TensorChunkSpec>(&spec);
  if (!split || !t.defined() || t.dim() == 0) return -1;
  return t.shape()[wrap_dim(split->dim, t.dim(), "step")];
}

void split_inputs(StepData& data, const StepPlan& plan, const std::vector<Tensor>& args,
                  const nn::TensorDict& kwargs) {
  const ScheduleOptions& options = *plan.options;
  const int n = plan.n_microbatches;
  auto [arg_chunks, kwarg_chunks] = split_args_kwargs_into_chunks(
      args, kwargs, n, options.args_chunk_spec, options.kwargs_chunk_spec);
  auto* traced = dynamic_cast<StageModule*>(&plan.first->module());
  for (int mb = 0; mb < n; ++mb) {
    if (traced) {
      // pipeline() traced keyword inputs as stage 0's trailing inputs: feed them that way, so
      // they are checked like the positional ones.
      data.microbatch_inputs.push_back(traced->flatten_inputs(arg_chunks[mb], kwarg_chunks[mb]));
    } else {
      data.microbatch_inputs.push_back(std::move(arg_chunks[mb]));
      if (!kwargs.empty()) data.microbatch_kwargs.push_back(std::move(kwarg_chunks[mb]));
    }
    plan.first->validate_inputs(mb, data.microbatch_inputs.back());
  }
}

void split_target(StepData& data, const StepPlan& plan, const std::vector<Tensor>& args,
                  const Tensor& target) {
  const ScheduleOptions& options = *plan.options;
  // Both split along dim 0 (the defaults): they must have the same rows, or the microbatches'
  // targets would not line up with their inputs.
  const ChunkSpec args_spec =
      options.args_chunk_spec.empty() ? ChunkSpec{TensorChunkSpec{0}} : options.args_chunk_spec[0];
  if (!args.empty()) {
    int64_t in_rows = rows_along(args[0], args_spec);
    int64_t target_rows = rows_along(target, options.target_chunk_spec);
    if (options.args_chunk_spec.empty() &&
        std::holds_alternative<TensorChunkSpec>(options.target_chunk_spec) && in_rows >= 0 &&
        target_rows != in_rows)
      throw std::invalid_argument(
          plan.name + ".step: the target's batch (" +
          (target.dim() == 0 ? std::string("a scalar") : std::to_string(target_rows)) +
          " rows) differs from the input's (" + std::to_string(in_rows) +
          " rows); both are split into microbatches along dim 0");
  }
  auto [chunks, unused] = split_args_kwargs_into_chunks(
      std::vector<Tensor>{target}, {}, plan.n_microbatches, {options.target_chunk_spec}, {});
  for (auto& chunk : chunks) data.targets.push_back(chunk[0]);
  if (options.scale_grads) {
    std::vector<float> weights = microbatch_weights(data.targets, options.target_chunk_spec);
    // Even microbatches keep the one seed 1/n; uneven ones are weighted by their rows.
    if (std::any_of(weights.begin(), weights.end(), [&](float w) { return w != weights[0]; }))
      data.loss_scales = std::move(weights);
  }
}

}  // namespace

void prepare_step(StepData& data, const StepPlan& plan, const std::vector<Tensor>& args,
                  const nn::TensorDict& kwargs, const StepOptions& step_options) {
  data.keep_outputs = step_options.return_outputs;
  if (plan.first) split_inputs(data, plan, args, kwargs);
  if (step_options.target.defined() && plan.hosts_last)
    split_target(data, plan, args, step_options.target);
}

StepOutput collect_outputs(const StepData& data, const ScheduleOptions& options) {
  StepOutput result;
  if (data.outputs.empty()) return result;
  result.microbatch_outputs = data.outputs;
  const size_t count = data.outputs.front().size();
  if (!options.output_merge_spec.empty() && options.output_merge_spec.size() != count)
    throw std::invalid_argument("output_merge_spec has " +
                                std::to_string(options.output_merge_spec.size()) +
                                " entries, but the last stage has " + std::to_string(count) +
                                " outputs; give one per output");
  for (size_t i = 0; i < count; ++i) {
    MergeSpec spec = options.output_merge_spec.empty() ? MergeSpec{TensorChunkSpec{0}}
                                                       : options.output_merge_spec[i];
    if (std::holds_alternative<KeepMicrobatches>(spec)) {
      result.outputs.emplace_back();
      continue;
    }
    std::vector<Tensor> column;
    for (const auto& outs : data.outputs) {
      if (outs.size() != count || !outs[i].defined()) {
        column.clear();
        break;
      }
      // One scalar per microbatch (a model returning its loss): one row each.
      const bool scalar_rows = outs[i].dim() == 0 && std::holds_alternative<TensorChunkSpec>(spec);
      column.push_back(scalar_rows ? outs[i].reshape({1}) : outs[i]);
    }
    result.outputs.push_back(column.empty() ? Tensor() : merge_chunks(column, spec));
  }
  return result;
}

void check_custom_kind(schedules::ActionKind kind) {
  if (kind != schedules::ActionKind::OverlapFB)
    throw std::invalid_argument(
        "register_custom_function: " + std::string(schedules::kind_name(kind)) +
        " has no custom function here; only OVERLAP_F_B does (F, I, W "
        "and B run on the stages, customise them with dw_builder or "
        "the stage's module)");
}

std::function<void(const schedules::Action&, int,
                   const std::function<void(const schedules::Action&)>&)>
overlap_runner(const CustomFunction& function) {
  if (!function) return nullptr;
  return [function](const schedules::Action& action, int rank,
                    const std::function<void(const schedules::Action&)>& run_sub) {
    std::vector<int> runs(action.sub_actions.size(), 0);
    CustomFunctionContext context{
        rank, [&](const schedules::Action& sub) {
          auto it = std::find(action.sub_actions.begin(), action.sub_actions.end(), sub);
          if (it == action.sub_actions.end())
            throw std::invalid_argument("the custom function of " + to_string(action) + " ran " +
                                        to_string(sub) + ", which is not part of it");
          if (runs[it - action.sub_actions.begin()]++ > 0)
            throw std::invalid_argument("the custom function of " + to_string(action) + " ran " +
                                        to_string(sub) + " twice");
          run_sub(sub);
        }};
    function(action, context);
    for (size_t i = 0; i < runs.size(); ++i)
      if (runs[i] == 0)
        throw std::invalid_argument(
            "the custom function of " + to_string(action) + " returned without running " +
            to_string(action.sub_actions[i]) + "; run each sub-action once through context.run");
  };
}

}  // namespace tensorplay::pipelining::detail
