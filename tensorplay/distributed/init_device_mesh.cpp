// The job's device mesh: checked against the world size, and its groups along each dimension.
#include "tensorplay/distributed/init_device_mesh.h"

#include <stdexcept>

#include "tensorplay/distributed/detail/group_runtime.h"

namespace tensorplay::distributed {

ProcessGroup::ProcessGroup(const DeviceMesh& mesh)
    : runtime_(detail::shared_runtime_of(mesh)), ranks_(mesh.ranks()) {
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
