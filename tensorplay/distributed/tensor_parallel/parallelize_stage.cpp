// parallelize_stage: the stage's share of a model plan, and the mesh compared across its ranks.
#include "tensorplay/distributed/tensor_parallel/parallelize_stage.h"

#include <stdexcept>
#include <string>
#include <vector>

#include "tensorplay/distributed/process_group.h"

namespace tensorplay::distributed::tensor_parallel {

ParallelizePlan plan_for_stage(nn::Module& stage_module, const ParallelizePlan& model_plan) {
  ParallelizePlan plan;
  for (const PlanEntry& entry : model_plan)
    if (!match_modules(stage_module, entry.path).empty()) plan.push_back(entry);
  return plan;
}

void check_mesh_agrees(const DeviceMesh& mesh) {
  if (mesh.empty() || !mesh.has_dim("tp"))
    throw std::invalid_argument("parallelize_stage: " + to_string(mesh) +
                                " has no \"tp\" dimension; build the mesh with "
                                "init_device_mesh({pp, dp, tp}, {\"pp\", \"dp\", \"tp\"})");
  const ProcessGroup all(
      DeviceMesh::over_ranks(mesh.ranks(), "mesh", mesh.get_rank()).with_job(mesh.job()));
  const std::vector<std::string> seen = all.all_gather_bytes(to_string(mesh));
  for (size_t r = 1; r < seen.size(); ++r)
    if (seen[r] != seen[0])
      throw std::invalid_argument(
          "parallelize_stage: the ranks built different meshes: rank " +
          std::to_string(all.ranks()[0]) + " built " + seen[0] + ", rank " +
          std::to_string(all.ranks()[r]) + " built " + seen[r] +
          "; every rank must pass the same shape and names to init_device_mesh");
}

void parallelize_stage(nn::Module& stage_module, const DeviceMesh& mesh,
                       const ParallelizePlan& model_plan) {
  check_mesh_agrees(mesh);
  parallelize_module(stage_module, mesh["tp"], plan_for_stage(stage_module, model_plan));
}

}  // namespace tensorplay::distributed::tensor_parallel
