// build_stage(): PipelineStage from a Pipe's stage module and boundary metas.
#include "tensorplay/pipelining/build_stage.h"

#include <algorithm>
#include <set>
#include <stdexcept>
#include <string>

namespace tensorplay::pipelining {

PipelineStage build_stage(const Pipe& pipe, int stage_index, Device device) {
  if (stage_index < 0 || stage_index >= pipe.num_stages())
    throw std::invalid_argument("build_stage: stage_index " + std::to_string(stage_index) +
                                " is out of range for a pipe of " +
                                std::to_string(pipe.num_stages()) + " stages");
  const auto& module = pipe.stage_module_ptr(stage_index);
  PipelineStage stage(module, stage_index, pipe.num_stages(), device, module->input_meta(),
                      module->output_meta());
  stage.set_input_names(module->input_names());
  std::map<std::string, std::vector<int>> tied;
  for (const auto& [name, group] : pipe.tied_parameters())
    if (std::find(group.begin(), group.end(), stage_index) != group.end()) tied[name] = group;
  stage.set_tied_parameters(std::move(tied));
  stage.set_pipe_id(pipe.id());
  stage.set_pipe_digest(pipe.digest());
  return stage;
}

std::vector<std::shared_ptr<PipelineStage>> build_stages(const Pipe& pipe,
                                                         const std::vector<Device>& devices) {
  if (devices.empty()) throw std::invalid_argument("build_stages: no devices given");
  std::vector<std::shared_ptr<PipelineStage>> stages;
  stages.reserve(pipe.num_stages());
  for (int s = 0; s < pipe.num_stages(); ++s)
    stages.push_back(
        std::make_shared<PipelineStage>(build_stage(pipe, s, devices[s % devices.size()])));
  return stages;
}

std::vector<Tensor> parameters(const std::vector<std::shared_ptr<PipelineStage>>& stages) {
  std::vector<Tensor> out;
  std::set<const TensorImpl*> seen;
  for (const auto& s : stages)
    for (const Tensor& p : s->module().parameters())
      if (seen.insert(p.impl_ptr().get()).second) out.push_back(p);
  return out;
}

std::vector<PipelineStage*> stage_pointers(
    const std::vector<std::shared_ptr<PipelineStage>>& stages) {
  std::vector<PipelineStage*> out;
  for (const auto& s : stages) out.push_back(s.get());
  return out;
}

PipelineStage build_stage(const Pipe& pipe, int stage_index, Device device,
                          const distributed::DeviceMesh& placement) {
  if (placement.empty() || !placement.has_dim("pp"))
    throw std::invalid_argument("build_stage: " + distributed::to_string(placement) +
                                " has no \"pp\" dimension; name the pipeline dimension \"pp\" "
                                "(init_device_mesh({pp, dp}, {\"pp\", \"dp\"}))");
  PipelineStage stage = build_stage(pipe, stage_index, device);
  stage.set_mesh(placement);
  return stage;
}

std::vector<std::shared_ptr<PipelineStage>> build_stages(const Pipe& pipe,
                                                         const std::vector<int>& stage_indices,
                                                         Device device,
                                                         const distributed::DeviceMesh& placement) {
  std::vector<std::shared_ptr<PipelineStage>> out;
  for (int s : stage_indices)
    out.push_back(std::make_shared<PipelineStage>(build_stage(pipe, s, device, placement)));
  return out;
}

}  // namespace tensorplay::pipelining
