// The job's device mesh: checked against the world size, and its groups along each dimension.
#include "actors/device_mesh.h"

#include <stdexcept>

#include "stages/build_stage.h"

namespace tensorplay::distributed {

ProcessGroup::ProcessGroup(const DeviceMesh& mesh) : ranks_(mesh.ranks()) {
  if (mesh.ndim() != 1)
    throw std::invalid_argument("ProcessGroup: " + to_string(mesh) + " has " +
                                std::to_string(mesh.ndim()) +
                                " dimensions; a group comes from one, e.g. mesh[\"dp\"]");
}

DeviceMesh init_device_mesh(const std::string& device_type, std::vector<int> mesh_shape,
                            std::vector<std::string> mesh_dim_names) {
  if (!is_initialized()) init_process_group();
  int64_t total = 1;
  std::string shape;
  for (int s : mesh_shape) {
    total *= s;
    shape += (shape.empty() ? "" : ", ") + std::to_string(s);
  }
  if (!mesh_shape.empty() && total != get_world_size())
    throw std::invalid_argument("init_device_mesh: a mesh of shape (" + shape + ") holds " +
                                std::to_string(total) + " ranks, but the job has " +
                                std::to_string(get_world_size()) +
                                " (WORLD_SIZE); start as many processes as the mesh has ranks");
  return DeviceMesh(device_type, std::move(mesh_shape), std::move(mesh_dim_names), get_rank());
}

DeviceMesh init_device_mesh(std::vector<int> mesh_shape, std::vector<std::string> mesh_dim_names) {
  if (!is_initialized()) init_process_group();
  return init_device_mesh(local_devices().at(0).is_cuda() ? "cuda" : "cpu", std::move(mesh_shape),
                          std::move(mesh_dim_names));
}

ProcessGroup get_group(const DeviceMesh& mesh, const std::string& dim) { return mesh[dim]; }

}  // namespace tensorplay::distributed

namespace tensorplay::pipelining {

namespace {

distributed::ProcessGroup pipeline_group_of(const distributed::DeviceMesh& mesh, const char* what) {
  if (!mesh.has_dim("pp"))
    throw std::invalid_argument(std::string(what) + ": " + distributed::to_string(mesh) +
                                " has no \"pp\" dimension; name the pipeline dimension \"pp\" "
                                "(init_device_mesh({pp, dp}, {\"pp\", \"dp\"}))");
  return mesh["pp"];
}

}  // namespace

PipelineStage build_stage(const Pipe& pipe, int stage_index, Device device,
                          const distributed::DeviceMesh& mesh) {
  PipelineStage stage =
      build_stage(pipe, stage_index, device, pipeline_group_of(mesh, "build_stage"));
  stage.set_mesh(mesh);
  return stage;
}

std::vector<std::shared_ptr<PipelineStage>> build_stages(const Pipe& pipe,
                                                         const std::vector<int>& stage_indices,
                                                         Device device,
                                                         const distributed::DeviceMesh& mesh) {
  auto stages = build_stages(pipe, stage_indices, device, pipeline_group_of(mesh, "build_stages"));
  for (auto& s : stages) s->set_mesh(mesh);
  return stages;
}

}  // namespace tensorplay::pipelining
