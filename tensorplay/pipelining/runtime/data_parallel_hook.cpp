// The data-parallel hook: the gradient reducer over the stages' mesh "dp" dimension, built and
// checked against the other replicas, the flat all-reduce it runs (NCCL for device gradients where
// every replica has it, else the ring over UCX), and a failed step abandoned on every replica.
#include "tensorplay/pipelining/runtime/detail/data_parallel_hook.h"

#include <algorithm>
#include <atomic>
#include <string>

#include "tensorplay/distributed/detail/group_backend.h"
#include "tensorplay/distributed/detail/group_runtime.h"
#include "tensorplay/pipelining/runtime/detail/stage_sharding.h"
#include "tensorplay/transport/nccl_all_reduce.h"

namespace tensorplay::pipelining::detail {

namespace {

std::atomic<void (*)(int)> setup_done_hook{nullptr};

std::string join(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return "[" + out + "]";
}

/// Local copies of each tied parameter, by name (what the reducer averages after the sums).
std::map<std::string, std::vector<Tensor>> tied_copies(const ScheduleSpec& spec) {
  std::map<std::string, std::vector<Tensor>> out;
  for (const auto& s : spec.stages)
    for (const auto& [tie, holders] : s->tied_parameters())
      if (Tensor p = s->module().find_tensor(tie); p.defined()) out[tie].push_back(p);
  return out;
}

/// The mesh the stages share, checked.
const distributed::DeviceMesh& stages_mesh(const ScheduleSpec& spec) {
  const distributed::DeviceMesh& mesh = spec.stages.front()->get_mesh();
  for (const auto& s : spec.stages)
    if (s->get_mesh() != mesh)
      throw std::invalid_argument(
          spec.name() + ": stages " + std::to_string(spec.stages[0]->stage_index()) + " and " +
          std::to_string(s->stage_index()) + " were built on different device meshes");
  return mesh;
}

/// The all-reduce of one flat bucket over the replicas of global `ranks` (`me` among them):
/// NCCL for device gradients where every replica has it, else the ring over UCX (device
/// gradients staged through host memory: UCX here has no CUDA transport).
FlatAllReduce flat_all_reduce(GroupRuntime& runtime, const ScheduleSpec& spec,
                              const std::vector<int>& ranks, int me, uint32_t stream) {
  const std::string name = spec.name();
  bool all_nccl = all_want_nccl(runtime, ranks, wants_nccl_for(runtime, spec.local_devices()),
                                name + " dp backend");
  std::shared_ptr<transport::NcclAllReduce> nccl;
  if (all_nccl)
    nccl = std::make_shared<transport::NcclAllReduce>(
        me, static_cast<int>(ranks.size()), spec.stages.front()->device(),
        agree_nccl_ids(runtime, ranks, me, 1, name + " dp NCCL id")[0], runtime.timeout());
  return GroupAllReduce{runtime.ucx(), nccl, ranks, me, stream, spec.options.transfer_timeout};
}

}  // namespace

void set_data_parallel_setup_hook(void (*hook)(int dp_rank)) { setup_done_hook = hook; }

std::unique_ptr<DataParallelHook> DataParallelHook::make(const ScheduleSpec& spec,
                                                         const std::vector<int>& group_ranks) {
  const std::string name = spec.name();
  const distributed::DeviceMesh& mesh = stages_mesh(spec);
  if (mesh.empty() || !mesh.has_dim("dp") || mesh.size("dp") == 1) return nullptr;
  // Sharded stages reduce their gradients themselves (REDUCE_GRAD); check_sharded_stages made
  // sure no parameter beside theirs needs averaging.
  if (!sharded_stage_indices(spec.local_stages()).empty()) return nullptr;
  if (!spec.runtime())
    throw std::invalid_argument(name +
                                ": the stages' mesh has a \"dp\" dimension but the process "
                                "group is not initialized; call init_device_mesh first");
  if (!group_ranks.empty() && group_ranks != mesh["pp"].ranks())
    throw std::invalid_argument(name + ": the stages' process group " + join(group_ranks) +
                                " is not their mesh's \"pp\" group " + join(mesh["pp"].ranks()));
  return std::unique_ptr<DataParallelHook>(new DataParallelHook(spec, mesh["dp"].ranks()));
}

DataParallelHook::DataParallelHook(const ScheduleSpec& spec, std::vector<int> dp_ranks)
    : spec_(spec),
      runtime_(distributed::detail::shared_runtime_of(spec.stages.front()->get_mesh())),
      dp_ranks_(std::move(dp_ranks)) {
  const std::string name = spec.name();
  const int dp = static_cast<int>(dp_ranks_.size());
  transport::check_ring_members(dp, name + ": the \"dp\" group: ");  // what ring keys hold
  const int me = spec.stages.front()->get_mesh().get_local_rank("dp");
  stream_ = runtime_->next_stream(dp_ranks_);
  reducer_ = std::make_unique<GradReducer>(
      spec.local_stages(), spec.n_microbatches, dp, spec.options.data_parallel,
      flat_all_reduce(*runtime_, spec, dp_ranks_, me, stream_), name);
  // Listening starts before the first exchange with the other replicas: once that exchange is
  // done, a replica may run and fail its first step, and a notice arriving with no listener is
  // dropped (this replica would then wait out the transfer timeout).
  listen_for_failures();
  // Every replica must bucket alike, or their all-reduces would pair the wrong buckets.
  auto layouts =
      runtime_->exchange(dp_ranks_, reducer_->layout(), {}, name + " data-parallel setup");
  for (size_t r = 1; r < layouts.size(); ++r)
    if (layouts[r].bytes != layouts[0].bytes)
      throw std::invalid_argument(
          name + ": rank " + std::to_string(dp_ranks_[r]) + " and rank " +
          std::to_string(dp_ranks_[0]) +
          " replicate the same stages over the \"dp\" dimension but their parameters differ in "
          "shape, dtype or order; every replica must build the same model");
  if (spec.options.data_parallel.broadcast_parameters) reducer_->broadcast_from_first(me == 0);
  if (auto hook = setup_done_hook.load()) hook(me);
}

void DataParallelHook::listen_for_failures() {
  // A replica whose step fails says so (abandon): this one's averaging of that step then fails
  // at once, naming it, instead of waiting out the transfer timeout.
  runtime_->inbox()->on_stream_failure(
      stream_, [reducer = reducer_.get(), ucx = runtime_->ucx(), stream = stream_](
                   uint64_t step, int rank, const std::string& why) {
        const std::string what = "rank " + std::to_string(rank) + " (a replica) failed step " +
                                 std::to_string(step) + ": " + why;
        if (reducer->peer_failed(step, what) && ucx) ucx->cancel_stream(stream);
      });
  unlisten_ = std::shared_ptr<void>(nullptr, [inbox = runtime_->inbox(), stream = stream_](void*) {
    inbox->on_stream_failure(stream, nullptr);
  });
}

DataParallelHook::~DataParallelHook() {
  // Unregistered before the reducer goes: when this returns, no call of the hook still runs.
  unlisten_.reset();
}

void DataParallelHook::begin(uint64_t step) {
  reducer_->begin_step(step, sync_, tied_copies(spec_));
}

void DataParallelHook::finish(uint64_t, Deadline deadline) { reducer_->finish_step(deadline); }

void DataParallelHook::abandon(uint64_t step, const std::string& why) {
  // Tell the other replicas, so their all-reduces fail at once instead of waiting for this one,
  // cancel the reducer's transfers and wait (bounded) for the all-reduce running.
  GroupRuntime* c = runtime_.get();
  if (c && sync_) c->notify_stream_failure(dp_ranks_, stream_, step, why);
  reducer_->abandon_step([c, stream = stream_] {
    if (c && c->ucx()) c->ucx()->cancel_stream(stream);
  });
}

}  // namespace tensorplay::pipelining::detail
