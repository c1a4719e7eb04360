// build_stage(): PipelineStage from a Pipe's stage module and boundary metas.
#include "stages/build_stage.h"

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
  return stage;
}

std::vector<PipelineStage> build_stages(const Pipe& pipe, const std::vector<Device>& devices) {
  if (devices.empty()) throw std::invalid_argument("build_stages: no devices given");
  std::vector<PipelineStage> stages;
  stages.reserve(pipe.num_stages());
  for (int s = 0; s < pipe.num_stages(); ++s)
    stages.push_back(build_stage(pipe, s, devices[s % devices.size()]));
  return stages;
}

std::vector<Tensor> parameters(const std::vector<PipelineStage>& stages) {
  std::vector<Tensor> out;
  for (const PipelineStage& s : stages)
    for (const Tensor& p : s.module().parameters()) out.push_back(p);
  return out;
}

std::vector<PipelineStage*> stage_pointers(std::vector<PipelineStage>& stages) {
  std::vector<PipelineStage*> out;
  for (PipelineStage& s : stages) out.push_back(&s);
  return out;
}

}  // namespace tensorplay::pipelining
