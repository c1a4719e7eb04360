// init_device_mesh: the job's ranks as a named grid (PyTorch's DeviceMesh), the process groups
// along its dimensions, and stages built on it (pipeline over "pp", replicas over "dp").
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tensorplay/distributed/device_mesh.h"
#include "tensorplay/distributed/process_group.h"

namespace tensorplay::distributed {

/// PyTorch's `init_device_mesh(device_type, mesh_shape, mesh_dim_names=...)`: the job's ranks
/// laid out row-major over `mesh_shape` (see DeviceMesh), seen from this rank. Initializes the
/// process group from the launcher's environment when it is not yet. The product of the shape
/// must equal the world size: otherwise std::invalid_argument names both.
///
///   auto mesh = init_device_mesh("cpu", {2, 2}, {"pp", "dp"});   // 4 ranks: 2 stages x 2
///   // rank 0: stage 0 replica 0, rank 1: stage 0 replica 1, rank 2: stage 1 replica 0, ...
DeviceMesh init_device_mesh(const std::string& device_type, std::vector<int> mesh_shape,
                            std::vector<std::string> mesh_dim_names);
/// The same on the device type local_devices() gives ("cuda" when this process drives a GPU).
DeviceMesh init_device_mesh(std::vector<int> mesh_shape, std::vector<std::string> mesh_dim_names);

/// The process group along `dim` through this rank (PyTorch's `mesh.get_group(dim)`).
ProcessGroup get_group(const DeviceMesh& mesh, const std::string& dim);

}  // namespace tensorplay::distributed
