// DeviceMesh: the ranks of a job laid out as an n-dimensional grid with named dimensions (as
// PyTorch's DeviceMesh), e.g. {pp, dp} for pipeline stages replicated over data-parallel groups.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tensorplay/core/tensor.h"

namespace tensorplay::distributed {

/// A grid of global ranks with named dimensions, seen from one rank of it. Ranks are laid out
/// row-major over the shape, as PyTorch lays them out: in a {pp, dp} mesh rank
/// `pp_index * dp + dp_index`, so the ranks of one pipeline stage's data-parallel group are
/// consecutive and a pipeline (one rank per stage) takes every dp-th rank.
///
/// A plain value: making one starts nothing. init_device_mesh
/// (tensorplay/distributed/init_device_mesh.h) makes the job's mesh after init_process_group;
/// ProcessGroup converts from a one-dimensional mesh.
class DeviceMesh {
 public:
  /// An empty mesh (no dimensions): what a stage built without a mesh reports.
  DeviceMesh() = default;
  /// The mesh of `shape` over ranks 0 .. product(shape)-1, seen from `rank`, with one name per
  /// dimension (distinct, non-empty) and a device type ("cpu" or "cuda"). Throws
  /// std::invalid_argument naming a bad size, name or rank.
  DeviceMesh(std::string device_type, std::vector<int> shape, std::vector<std::string> dim_names,
             int rank);
  /// The one-dimensional mesh named `dim_name` over the global `ranks` (a process group's, in
  /// group order), seen from global rank `rank` (a member or not). Throws std::invalid_argument
  /// for no ranks, a negative or repeated rank, or an empty name.
  static DeviceMesh over_ranks(std::vector<int> ranks, std::string dim_name, int rank,
                               std::string device_type = "cpu");

  /// True for a mesh with no dimensions.
  bool empty() const { return shape_.empty(); }
  const std::string& device_type() const { return device_type_; }
  /// Number of dimensions.
  int ndim() const { return static_cast<int>(shape_.size()); }
  const std::vector<int>& shape() const { return shape_; }
  const std::vector<std::string>& mesh_dim_names() const { return names_; }
  /// Number of ranks in the mesh.
  int size() const { return static_cast<int>(ranks_.size()); }
  /// Size of dimension `dim`.
  int size(const std::string& dim) const { return shape_.at(dim_index(dim)); }
  /// True when the mesh has a dimension of that name.
  bool has_dim(const std::string& dim) const;
  /// Global ranks in row-major order (PyTorch's `mesh.mesh.flatten()`).
  const std::vector<int>& ranks() const { return ranks_; }
  /// The rank this mesh is seen from.
  int get_rank() const { return rank_; }
  /// This rank's index along `dim` (PyTorch's `get_local_rank(mesh_dim)`).
  int get_local_rank(const std::string& dim) const;
  /// This rank's index along every dimension.
  std::vector<int> get_coordinate() const;
  /// The one-dimensional mesh along `dim` through this rank (PyTorch's `mesh[dim]`): the ranks
  /// that differ from this one in that coordinate only. Throws std::invalid_argument naming the
  /// dimensions there are.
  DeviceMesh operator[](const std::string& dim) const;
  /// The job the mesh's ranks belong to, opaque here: null for the process's default job, else
  /// the runtime of a job joined apart (set by the process groups,
  /// tensorplay/distributed/process_group.h). Meshes of different jobs are never equal.
  const std::shared_ptr<const void>& job() const { return job_; }
  /// This mesh, of the job `job` (null: the default one).
  DeviceMesh with_job(std::shared_ptr<const void> job) const;
  bool operator==(const DeviceMesh&) const = default;

 private:
  int dim_index(const std::string& dim) const;

  std::string device_type_;
  std::vector<int> shape_;
  std::vector<std::string> names_;
  std::vector<int> ranks_;
  int rank_ = 0;
  std::shared_ptr<const void> job_;
};

/// "DeviceMesh('cpu', [[0, 1], [2, 3]], mesh_dim_names=('pp', 'dp'))" as PyTorch prints one.
std::string to_string(const DeviceMesh& mesh);
// The library's other to_string overloads (shapes, devices) stay visible in this namespace.
using tensorplay::to_string;

/// This rank's share of `batch` along the mesh dimension `dim` (rows of dimension 0): the
/// replicas of a data-parallel group each take a disjoint, contiguous share, replica i the i-th
/// (sizes as torch.tensor_split: the first `rows % n` shares have one row more). A mesh without
/// that dimension returns the whole batch. Throws std::invalid_argument when the batch has
/// fewer rows than the dimension has ranks.
Tensor shard_batch(const Tensor& batch, const DeviceMesh& mesh, const std::string& dim = "dp");

}  // namespace tensorplay::distributed
