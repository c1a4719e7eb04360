// Work: the handle an asynchronous collective returns, as torch.distributed's Work: wait for it
// (within the group's timeout) or ask whether it has completed.
#pragma once

#include <memory>

namespace tensorplay::distributed {

/// A collective in flight (ProcessGroup::all_gather_into_tensor_async,
/// reduce_scatter_tensor_async). Copies share the same collective. A default-constructed Work is
/// complete.
class Work {
 public:
  /// What a Work waits on (tensorplay/distributed/detail/work_state.h).
  struct State;
  /// A completed handle.
  Work() = default;
  /// A handle on `state` (made by the collectives).
  explicit Work(std::shared_ptr<State> state) : state_(std::move(state)) {}
  /// Blocks until the collective has completed and its output is written. Throws
  /// DistributedError naming the members not heard from when the group's timeout (counted from
  /// the call) passes first, or naming the member whose transfer failed. Calling it again returns
  /// at once, or throws the same error again.
  void wait() const;
  /// True once every member's data arrived (or the collective failed): wait() would not block.
  bool is_completed() const;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace tensorplay::distributed
