// Schedules over a device mesh's "dp" dimension: the gradient reducer built and checked against
// the other replicas, the flat all-reduce it runs (ring over UCX for host tensors), no_sync.
#include <algorithm>
#include <string>

#include "actors/detail/cluster.h"
#include "actors/detail/grad_reducer.h"
#include "actors/detail/schedule_impl.h"
#include "transport/nccl_all_reduce.h"
#include "transport/nccl_channel.h"
#include "transport/ring_all_reduce.h"

namespace tensorplay::pipelining {

namespace {

std::string join(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return "[" + out + "]";
}

}  // namespace

std::map<std::string, std::vector<Tensor>> PipelineSchedule::Impl::tied_copies() const {
  std::map<std::string, std::vector<Tensor>> out;
  for (const auto& s : stages)
    for (const auto& [tie, holders] : s->tied_parameters())
      if (Tensor p = s->module().find_tensor(tie); p.defined()) out[tie].push_back(p);
  return out;
}

void PipelineSchedule::Impl::setup_data_parallel() {
  const std::string name(schedules::schedule_name(kind));
  const distributed::DeviceMesh& mesh = stages.front()->get_mesh();
  for (const auto& s : stages)
    if (s->get_mesh() != mesh)
      throw std::invalid_argument(name + ": stages " + std::to_string(stages[0]->stage_index()) +
                                  " and " + std::to_string(s->stage_index()) +
                                  " were built on different device meshes");
  if (mesh.empty() || !mesh.has_dim("dp") || mesh.size("dp") == 1) return;
  auto* cluster = distributed::detail::Cluster::current();
  if (!cluster)
    throw std::invalid_argument(name +
                                ": the stages' mesh has a \"dp\" dimension but the process "
                                "group is not initialized; call init_device_mesh first");
  if (distributed && group_ranks != mesh["pp"].ranks())
    throw std::invalid_argument(name + ": the stages' process group " + join(group_ranks) +
                                " is not their mesh's \"pp\" group " + join(mesh["pp"].ranks()));
  dp_ranks = mesh["dp"].ranks();
  const int dp = static_cast<int>(dp_ranks.size());
  transport::check_ring_members(dp, name + ": the \"dp\" group: ");  // what ring keys hold
  const int me = mesh.get_local_rank("dp");
  dp_stream = cluster->next_stream(dp_ranks);
  const auto timeout = options.transfer_timeout;
  // Device gradients go through NCCL when every replica's stages are on a GPU with NCCL there
  // (decided alike on every replica); host gradients through the ring over UCX.
  bool wants_nccl = cluster->backend == "nccl" && transport::nccl_available();
  for (const auto& s : stages) wants_nccl = wants_nccl && s->device().is_cuda();
  bool all_nccl = true;
  for (auto& c : cluster->exchange(dp_ranks, wants_nccl ? "1" : "0", {}, name + " dp backend"))
    all_nccl = all_nccl && c.bytes == "1";
  std::shared_ptr<transport::NcclAllReduce> nccl;
  if (all_nccl) {
    std::string id;
    if (me == 0) {
      std::vector<uint8_t> bytes = transport::nccl_unique_id();
      id.assign(bytes.begin(), bytes.end());
    }
    std::string got = cluster->exchange(dp_ranks, id, {}, name + " dp NCCL id")[0].bytes;
    nccl = std::make_shared<transport::NcclAllReduce>(
        me, static_cast<int>(dp_ranks.size()), stages.front()->device(),
        std::vector<uint8_t>(got.begin(), got.end()), cluster->timeout);
  }
  std::shared_ptr<transport::Channel> ucx = cluster->ucx;
  detail::FlatAllReduce all_reduce = [ucx, nccl, ranks = dp_ranks, me, stream = dp_stream, timeout](
                                         Tensor& flat, uint64_t call) {
    if (flat.is_cuda() && nccl) {
      nccl->all_reduce(flat);
      return;
    }
    transport::RingGroup ring{ucx.get(), ranks, me, stream, timeout};
    if (!flat.is_cuda()) {
      transport::ring_all_reduce(ring, call, flat);
      return;
    }
    // Device gradients without NCCL go through host memory (UCX here has no CUDA transport).
    Tensor host = flat.cpu();
    transport::ring_all_reduce(ring, call, host);
    flat.copy_(host);
  };
  std::vector<PipelineStage*> local = stage_pointers(stages);
  reducer = std::make_unique<detail::GradReducer>(local, n_microbatches, dp, options.data_parallel,
                                                  std::move(all_reduce), name);
  // Every replica must bucket alike, or their all-reduces would pair the wrong buckets.
  auto layouts = cluster->exchange(dp_ranks, reducer->layout(), {}, name + " data-parallel setup");
  for (size_t r = 1; r < layouts.size(); ++r)
    if (layouts[r].bytes != layouts[0].bytes)
      throw std::invalid_argument(
          name + ": rank " + std::to_string(dp_ranks[r]) + " and rank " +
          std::to_string(dp_ranks[0]) +
          " replicate the same stages over the \"dp\" dimension but their parameters differ in "
          "shape, dtype or order; every replica must build the same model");
  if (options.data_parallel.broadcast_parameters) reducer->broadcast_from_first(me == 0);
  // A replica whose step fails says so (abandon_data_parallel): this one's averaging of that
  // step then fails at once, naming it, instead of waiting out the transfer timeout.
  cluster->inbox->on_stream_failure(
      dp_stream, [reducer = reducer.get(), ucx, stream = dp_stream](uint64_t step, int rank,
                                                                    const std::string& why) {
        const std::string what = "rank " + std::to_string(rank) + " (a replica) failed step " +
                                 std::to_string(step) + ": " + why;
        if (reducer->peer_failed(step, what) && ucx) ucx->cancel_stream(stream);
      });
  dp_failure_hook =
      std::shared_ptr<void>(nullptr, [inbox = cluster->inbox, stream = dp_stream](void*) {
        inbox->on_stream_failure(stream, nullptr);
      });
}

void PipelineSchedule::Impl::abandon_data_parallel(uint64_t step, const std::string& why) {
  auto* cluster = distributed::detail::Cluster::current();
  if (cluster && sync_gradients) cluster->notify_stream_failure(dp_ranks, dp_stream, step, why);
  reducer->abandon_step([this, cluster] {
    if (cluster && cluster->ucx) cluster->ucx->cancel_stream(dp_stream);
  });
}

PipelineSchedule::NoSync::NoSync(PipelineSchedule& schedule)
    : schedule_(schedule), before_(schedule.requires_gradient_sync()) {
  schedule_.set_requires_gradient_sync(false);
}

PipelineSchedule::NoSync::~NoSync() { schedule_.set_requires_gradient_sync(before_); }

void PipelineSchedule::set_requires_gradient_sync(bool sync) { impl_->sync_gradients = sync; }
bool PipelineSchedule::requires_gradient_sync() const { return impl_->sync_gradients; }

DataParallelStats PipelineSchedule::data_parallel_stats() const {
  return impl_->reducer ? impl_->reducer->stats() : DataParallelStats{};
}

}  // namespace tensorplay::pipelining
