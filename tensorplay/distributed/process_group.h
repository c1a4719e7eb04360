// Process groups, spelled as torch.distributed: init_process_group, ranks, new_group, barrier,
// all_reduce. One CAF actor system per process; rank 0's is the rendezvous.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensorplay/core/tensor.h"
#include "tensorplay/distributed/device_mesh.h"
#include "tensorplay/distributed/init_options.h"
#include "tensorplay/distributed/launch_env.h"
#include "tensorplay/distributed/reduce_op.h"
#include "tensorplay/distributed/work.h"

namespace tensorplay::distributed {

namespace detail {
class GroupRuntime;
}

/// A set of ranks that run collectives together. The default group holds every rank. A group
/// holds the runtime of the job it was made in (the process's default one, or one of join_job's):
/// its collectives run there, and fail saying so once that job was left.
class ProcessGroup {
 public:
  /// The world group of the process's default job (a group of one before init_process_group).
  ProcessGroup();
  /// The group of a one-dimensional mesh's ranks (PyTorch's `mesh["dp"].get_group()`), e.g.
  /// `build_stage(pipe, s, device, mesh["pp"])`. Throws std::invalid_argument for a mesh of
  /// another dimension count.
  ProcessGroup(const DeviceMesh& mesh);  // NOLINT: converts, as PyTorch passes meshes for groups
  /// The one-dimensional "pp" mesh over the members, seen from this process: a group given as a
  /// stage's placement (the seed's `build_stage(pipe, rank, device, group)`).
  operator DeviceMesh() const;  // NOLINT: converts, so a group places a stage as a mesh does

  /// Global ranks of the members, ascending.
  const std::vector<int>& ranks() const { return ranks_; }
  int size() const { return static_cast<int>(ranks_.size()); }
  /// This process's index in the group, or -1 when it is not a member.
  int rank() const;
  /// This process's global rank in the group's job.
  int global_rank() const;
  bool contains(int global_rank) const;
  /// A group of the given global ranks of this group's job, on the same runtime (as new_group()
  /// does for the default job).
  ProcessGroup new_group(std::vector<int> ranks) const;

  /// Blocks until every member has called barrier (or throws after the group's timeout).
  void barrier() const;
  /// Sums `tensor` over the members in place (host or device tensor, float32 or bfloat16; device
  /// tensors go through a host copy) with a ring all-reduce over UCX (at most 128 members).
  /// Every member gets the same bits, and the same inputs give the same bits from run to run.
  /// Every member passes a tensor of the same shape and dtype; a member that passed another, or
  /// did not take part within the group's timeout, makes every member throw DistributedError
  /// naming it.
  void all_reduce(Tensor& tensor) const;
  /// Every member's `bytes`, by group rank.
  std::vector<std::string> all_gather_bytes(const std::string& bytes) const;
  /// Every member's `tensors` (any shapes and dtypes; device tensors go through a host copy), by
  /// group rank, on the host, bit for bit as sent (this member's entry holds its own). Shapes
  /// and dtypes travel with all_gather_bytes, the bytes over UCX, one transfer per member and
  /// receiver (at most 32768 tensors a member, groups of at most 127 members). A member that
  /// fails or does not take part within the group's timeout makes the others throw
  /// DistributedError naming it.
  std::vector<std::vector<Tensor>> all_gather_tensors(const std::vector<Tensor>& tensors) const;
  /// torch.distributed's all_gather_into_tensor: `output` (n times the elements of `input`, n the
  /// group's size, e.g. dim 0 n times as long) receives every member's `input` concatenated in
  /// group-rank order, bit for bit. Any dtype; device tensors go through a host copy. Each member
  /// sends its input straight to every other over UCX (at most 127 members). Every member passes
  /// the same input shape and dtype: a member that passed another, or an output of the wrong size,
  /// makes every member throw DistributedError naming it; one that does not take part within the
  /// group's timeout is named by the others.
  void all_gather_into_tensor(Tensor& output, const Tensor& input) const;
  /// all_gather_into_tensor, returning once the transfers are posted: wait() on the handle before
  /// reading `output` (and before changing `input`).
  Work all_gather_into_tensor_async(Tensor& output, const Tensor& input) const;
  /// torch.distributed's reduce_scatter_tensor: `input` (n times the elements of `output`) is cut
  /// into n chunks along its elements; member i's `output` receives chunk i combined over the
  /// members by `op` (float32 or bfloat16; bfloat16 summed in float32 and rounded once). Chunks
  /// are summed in group-rank order, so the bits do not depend on arrival order. Device tensors
  /// go through a host copy. Errors as all_gather_into_tensor's.
  void reduce_scatter_tensor(Tensor& output, const Tensor& input,
                             ReduceOp op = ReduceOp::Sum) const;
  /// reduce_scatter_tensor, returning once the transfers are posted: wait() on the handle writes
  /// `output` (the sum runs on the waiting thread).
  Work reduce_scatter_tensor_async(Tensor& output, const Tensor& input,
                                   ReduceOp op = ReduceOp::Sum) const;
  /// Same members in the same job.
  bool operator==(const ProcessGroup& other) const {
    return ranks_ == other.ranks_ && runtime_ == other.runtime_;
  }

 private:
  ProcessGroup(std::shared_ptr<detail::GroupRuntime> runtime, std::vector<int> ranks);
  friend ProcessGroup join_job(const InitOptions& options);
  /// The runtime, checked open and holding this process among the members.
  detail::GroupRuntime& member_runtime(const std::string& what) const;

  std::shared_ptr<detail::GroupRuntime> runtime_;  // null: a group of one without a job
  std::vector<int> ranks_;
};

/// Joins the job: reads the launcher's environment, meets the other ranks at rank 0
/// (MASTER_ADDR:MASTER_PORT), exchanges UCX worker addresses, measures clock offsets to rank 0,
/// and opens this rank's message log (`DIR/messages_rank_R.log` when TENSORPLAY_LOG_DIR is DIR).
/// Calling it twice is an error; without launcher variables it sets up a group of one.
/// The whole rendezvous keeps to one timeout (InitOptions::timeout); it throws DistributedError
/// naming the ranks that did not join when it runs out, and at once on every rank that joined
/// when rank 0 refuses a rank (another WORLD_SIZE or cluster token, a RANK taken or out of range),
/// saying which and why.
void init_process_group(const InitOptions& options = {});
bool is_initialized();
/// This process's global rank (0 when not initialized).
int get_rank();
/// Number of processes in the job (1 when not initialized).
int get_world_size();
/// This process's rank on its host.
int get_local_rank();
/// The backend chosen at init ("ucx" or "nccl"; "none" when not initialized).
std::string get_backend();
/// Microseconds to add to this process's steady clock to read rank 0's (measured at init).
int64_t clock_offset_us();
/// The group of every rank.
ProcessGroup world_group();
/// Joins a job as init_process_group does (`options.env` says where; without it, the launcher's
/// environment), but as a runtime of its own, with its own actor system and transport, leaving
/// the process's default group alone: returns that job's world group. Several ranks of one job
/// can so live in one process (as threads), e.g. to test collectives and the rendezvous without a
/// launcher. The job is left when the last group made from it goes. Collectives run on it;
/// schedules across processes run on the default group.
ProcessGroup join_job(const InitOptions& options);
/// A group of the given global ranks (sorted, no duplicates, each in [0, world size)). As in
/// torch.distributed, members call collectives on it; non-members may create it too.
ProcessGroup new_group(std::vector<int> ranks);
/// barrier() / all_reduce() on the world group.
void barrier();
void all_reduce(Tensor& tensor);
/// Leaves the job: closes connections and transports. Stages and schedules built on the group
/// must be gone first.
void destroy_process_group();

/// The devices this process drives: `cuda:LOCAL_RANK` (modulo the device count) when CUDA
/// devices are present, else the CPU.
std::vector<Device> local_devices();

}  // namespace tensorplay::distributed
