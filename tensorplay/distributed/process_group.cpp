// Process groups: init_process_group and join_job (a group runtime joins the job:
// group_runtime.cpp), and the collectives, each run on the runtime its group holds.
#include "tensorplay/distributed/process_group.h"

#include <algorithm>
#include <iostream>
#include <mutex>

#include "tensorplay/base/knobs.h"
#include "tensorplay/core/cpu_threads.h"
#include "tensorplay/core/device_info.h"
#include "tensorplay/distributed/detail/group_backend.h"
#include "tensorplay/distributed/detail/group_runtime.h"
#include "tensorplay/distributed/detail/rendezvous.h"
#include "tensorplay/observe/message_log.h"
#include "tensorplay/observe/observe_knobs.h"
#include "tensorplay/tensor.h"
#include "tensorplay/transport/channel.h"
#include "tensorplay/transport/collective_key.h"
#include "tensorplay/transport/ucx_channel.h"
#include "tensorplay/transport/ucx_process_settings.h"

namespace tensorplay::distributed {

using detail::GroupRuntime;

namespace {

std::vector<int> all_ranks(int world_size) {
  std::vector<int> out(world_size);
  for (int r = 0; r < world_size; ++r) out[r] = r;
  return out;
}

/// Ranks sorted and checked for a group of a job of `world_size` ranks.
std::vector<int> checked_group(std::vector<int> ranks, int world_size) {
  std::sort(ranks.begin(), ranks.end());
  if (ranks.empty()) throw std::invalid_argument("new_group: no ranks given");
  if (std::adjacent_find(ranks.begin(), ranks.end()) != ranks.end())
    throw std::invalid_argument("new_group: rank " +
                                std::to_string(*std::adjacent_find(ranks.begin(), ranks.end())) +
                                " is listed twice");
  if (ranks.front() < 0 || ranks.back() >= world_size)
    throw std::invalid_argument("new_group: ranks must lie in [0, " + std::to_string(world_size) +
                                "), got " + detail::join_ranks(ranks));
  return ranks;
}

void check_options(const InitOptions& options, const char* what) {
  if (options.backend != "ucx" && options.backend != "nccl" && options.backend != "auto")
    throw std::invalid_argument(std::string(what) + ": backend '" + options.backend +
                                "' is not one of \"ucx\", \"nccl\", \"auto\"");
  if (options.timeout && options.timeout->count() <= 0)
    throw std::invalid_argument(std::string(what) + ": timeout must be positive, got " +
                                std::to_string(options.timeout->count()) + " ms");
}

}  // namespace

// -- ProcessGroup
// ----------------------------------------------------------------------------------

ProcessGroup::ProcessGroup()
    : runtime_(detail::default_runtime_shared()), ranks_(all_ranks(get_world_size())) {}

ProcessGroup::ProcessGroup(std::shared_ptr<GroupRuntime> runtime, std::vector<int> ranks)
    : runtime_(std::move(runtime)), ranks_(std::move(ranks)) {}

int ProcessGroup::global_rank() const { return runtime_ ? runtime_->env().rank : 0; }

int ProcessGroup::rank() const {
  auto it = std::find(ranks_.begin(), ranks_.end(), global_rank());
  return it == ranks_.end() ? -1 : static_cast<int>(it - ranks_.begin());
}

bool ProcessGroup::contains(int global_rank) const {
  return std::find(ranks_.begin(), ranks_.end(), global_rank) != ranks_.end();
}

ProcessGroup ProcessGroup::new_group(std::vector<int> ranks) const {
  return ProcessGroup(runtime_,
                      checked_group(std::move(ranks), runtime_ ? runtime_->env().world_size : 1));
}

GroupRuntime& ProcessGroup::member_runtime(const std::string& what) const {
  if (!runtime_)
    throw DistributedError(what +
                           ": the process group is not initialized; call "
                           "tensorplay::distributed::init_process_group() first");
  runtime_->check_open(what);
  if (rank() < 0)
    throw DistributedError(what + " on group " + detail::join_ranks(ranks_) + ": rank " +
                           std::to_string(runtime_->env().rank) + " is not a member of the group");
  return *runtime_;
}

std::vector<std::string> ProcessGroup::all_gather_bytes(const std::string& bytes) const {
  if (ranks_.size() == 1 && ranks_[0] == global_rank()) return {bytes};
  auto got = member_runtime("all_gather").exchange(ranks_, bytes, {}, "all_gather");
  std::vector<std::string> out;
  for (auto& c : got) out.push_back(std::move(c.bytes));
  return out;
}

void ProcessGroup::barrier() const {
  if (ranks_.size() == 1 && ranks_[0] == global_rank()) return;
  member_runtime("barrier").exchange(ranks_, {}, {}, "barrier");
}

ProcessGroup::operator DeviceMesh() const {
  return DeviceMesh::over_ranks(ranks_, "pp", global_rank()).with_job(detail::job_of(runtime_));
}

void ProcessGroup::all_reduce(Tensor& tensor) const {
  if (!tensor.defined()) throw std::invalid_argument("all_reduce: the tensor is undefined");
  if (ranks_.size() == 1 && ranks_[0] == global_rank()) return;
  GroupRuntime& c = member_runtime("all_reduce");
  const std::string where = "all_reduce on group " + detail::join_ranks(ranks_);
  if (!c.ucx()) throw DistributedError(where + ": this process has no UCX channel to the others");
  NoGradGuard no_grad;
  pipelining::detail::GroupAllReduce reduce{
      c.ucx(), nullptr, ranks_, rank(), c.collective_stream(ranks_), c.timeout()};
  Tensor summed = tensor.detach();
  try {
    reduce(summed, c.next_collective_call(ranks_));
  } catch (const transport::TransferError& e) {
    throw DistributedError(where + " failed: " + e.what());
  }
}

// -- free functions
// --------------------------------------------------------------------------------

void init_process_group(const InitOptions& options) {
  check_options(options, "init_process_group");
  if (detail::default_runtime())
    throw DistributedError(
        "init_process_group: already initialized; call destroy_process_group() first");
  LaunchEnv env = options.env ? *options.env : read_launch_env();
  set_ranks_on_host(env.local_world_size);  // each rank its share of the host's cores
  // What tp-launch sets for its ranks, whatever started this one.
  transport::apply_ucx_settings(missing_ucx_settings());
  // Once per job: its rank 0 (once per process, which may join again after a failure).
  static std::once_flag token_advice;
  if (const std::string advice = missing_token_advice(env); !advice.empty())
    std::call_once(token_advice, [&] { std::cerr << advice << std::endl; });
  InitOptions resolved = options;
  resolved.env = env;
  auto c = GroupRuntime::join(resolved, /*own_system=*/false);
  pipelining::set_log_job(c->env().job_id, c->env().rank, c->env().world_size,
                          c->env().restart_count);
  if (const std::string dir = knob_string(pipelining::kLogDirKnob); !dir.empty())
    pipelining::log_to_file(dir + "/messages_rank_" + std::to_string(c->env().rank) + ".log");
  pipelining::log_event(c->env().rank, 0, "clock",
                        "offset_us:" + std::to_string(c->clock_offset_us()));
  detail::set_default_runtime(std::move(c));
}

ProcessGroup join_job(const InitOptions& options) {
  check_options(options, "join_job");
  auto c = GroupRuntime::join(options, /*own_system=*/true);
  const int world = c->env().world_size;
  return ProcessGroup(std::move(c), all_ranks(world));
}

bool is_initialized() { return detail::default_runtime() != nullptr; }
int get_rank() { return is_initialized() ? detail::default_runtime()->env().rank : 0; }
int get_world_size() { return is_initialized() ? detail::default_runtime()->env().world_size : 1; }
int get_local_rank() { return is_initialized() ? detail::default_runtime()->env().local_rank : 0; }
std::string get_backend() {
  return is_initialized() ? detail::default_runtime()->backend() : "none";
}
int64_t clock_offset_us() {
  return is_initialized() ? detail::default_runtime()->clock_offset_us() : 0;
}
ProcessGroup world_group() { return ProcessGroup(); }
ProcessGroup new_group(std::vector<int> ranks) { return world_group().new_group(std::move(ranks)); }

void barrier() { world_group().barrier(); }
void all_reduce(Tensor& tensor) { world_group().all_reduce(tensor); }

void destroy_process_group() {
  auto runtime = detail::default_runtime_shared();
  if (!runtime) return;
  // Groups made from it may outlive it: their collectives fail, saying the job was left.
  runtime->close();
  detail::set_default_runtime(nullptr);
}

std::vector<Device> local_devices() {
  int n = cuda_device_count();
  if (n == 0) return {cpu()};
  return {Device(DeviceType::CUDA, get_local_rank() % n)};
}

}  // namespace tensorplay::distributed
