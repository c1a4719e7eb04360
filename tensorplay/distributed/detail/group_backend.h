// The backend choice of a group's transfers and its NCCL ids: one decision, made alike on every
// member, serving the schedule's channel and the data-parallel all-reduce.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tensorplay/core/tensor.h"

namespace tensorplay::transport {
class Channel;
class NcclAllReduce;
}  // namespace tensorplay::transport

namespace tensorplay::distributed::detail {
class GroupRuntime;
}

namespace tensorplay::pipelining::detail {

using distributed::detail::GroupRuntime;

/// Whether this process would move tensors on `devices` over NCCL: the job of `runtime` was
/// joined with the "nccl" backend, NCCL is usable here, and every device is a GPU.
bool wants_nccl_for(const GroupRuntime& runtime, const std::vector<Device>& devices);

/// Whether every member of the group of global `ranks` wants NCCL (`mine`: this member's
/// answer); a collective, `what` names it in errors.
bool all_want_nccl(GroupRuntime& runtime, const std::vector<int>& ranks, bool mine,
                   const std::string& what);

/// `count` NCCL unique ids made by the group's first member (`my_index` 0) and shared with every
/// member of the group of global `ranks`; a collective, `what` names it in errors.
std::vector<std::vector<uint8_t>> agree_nccl_ids(GroupRuntime& runtime,
                                                 const std::vector<int>& ranks, int my_index,
                                                 int count, const std::string& what);

/// A group's all-reduce of one tensor, in place: over `nccl` where given and the tensor is on a
/// GPU, else the ring over `ucx` (device tensors staged through host memory). The one all-reduce
/// that ProcessGroup::all_reduce (and with it the tied weights' sums) and the data-parallel
/// gradient reducer run; `call` numbers it alike on every member.
struct GroupAllReduce {
  std::shared_ptr<transport::Channel> ucx;
  std::shared_ptr<transport::NcclAllReduce> nccl;  ///< null: the ring only
  std::vector<int> ranks;                          ///< global ranks of the members
  int me = 0;                                      ///< this member's index in `ranks`
  uint32_t stream = 0;                             ///< the stream of its ring transfers
  std::chrono::milliseconds timeout{0};

  void operator()(Tensor& tensor, uint64_t call) const;
};

}  // namespace tensorplay::pipelining::detail
