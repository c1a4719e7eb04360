// replica_exchange: a process group behind the checkpoints' ReplicaExchange.
#include "tensorplay/pipelining/runtime/group_replica_exchange.h"

#include <stdexcept>

namespace tensorplay::pipelining {

using distributed::DeviceMesh;
using distributed::ProcessGroup;

namespace {

class GroupReplicas final : public pipelining::ReplicaExchange {
 public:
  explicit GroupReplicas(ProcessGroup group) : group_(std::move(group)) {}
  int size() const override { return group_.size(); }
  int rank() const override { return group_.rank(); }
  std::vector<std::string> all_gather(const std::string& bytes) override {
    return group_.all_gather_bytes(bytes);
  }
  std::vector<std::vector<Tensor>> all_gather_tensors(const std::vector<Tensor>& mine) override {
    return group_.all_gather_tensors(mine);
  }

 private:
  ProcessGroup group_;
};

}  // namespace

std::shared_ptr<ReplicaExchange> replica_exchange(const ProcessGroup& group) {
  if (group.rank() < 0)
    throw std::invalid_argument("replica_exchange: rank " + std::to_string(group.global_rank()) +
                                " is not a member of the group");
  return std::make_shared<GroupReplicas>(group);
}

std::shared_ptr<ReplicaExchange> replica_exchange(
    const std::vector<std::shared_ptr<PipelineStage>>& stages, const std::string& dim) {
  if (stages.empty() || !stages.front()) return nullptr;
  const DeviceMesh& mesh = stages.front()->get_mesh();
  if (!mesh.has_dim(dim) || mesh.size(dim) == 1) return nullptr;
  return replica_exchange(ProcessGroup(mesh[dim]));
}

}  // namespace tensorplay::pipelining
