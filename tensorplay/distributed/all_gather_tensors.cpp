// ProcessGroup::all_gather_tensors: shapes over the collectives' exchange, bytes over UCX, each
// member sending its tensors to every other under a collective key naming the sender.
#include <cstring>

#include "tensorplay/core/detail/layout_codec.h"
#include "tensorplay/distributed/detail/group_runtime.h"
#include "tensorplay/distributed/detail/rendezvous.h"
#include "tensorplay/distributed/process_group.h"
#include "tensorplay/transport/channel.h"
#include "tensorplay/transport/collective_key.h"
#include "tensorplay/transport/ucx_channel.h"

namespace tensorplay::distributed {
namespace {

using transport::TensorDescriptor;

std::vector<TensorDescriptor> decode(const std::string& bytes, const std::string& where) {
  const auto layouts = tensorplay::detail::decode_layouts(bytes);
  if (!layouts) throw DistributedError(where + ": a member's shapes are cut short");
  std::vector<TensorDescriptor> out(layouts->size());
  for (size_t i = 0; i < out.size(); ++i) {
    out[i].dtype = (*layouts)[i].dtype;
    out[i].shape = (*layouts)[i].shape;
    int64_t numel = 1;
    for (int64_t n : out[i].shape) numel *= n;
    out[i].bytes = static_cast<uint64_t>(numel) * element_size(out[i].dtype);
  }
  return out;
}

}  // namespace

std::vector<std::vector<Tensor>> ProcessGroup::all_gather_tensors(
    const std::vector<Tensor>& tensors) const {
  std::vector<Tensor> mine;
  for (const Tensor& t : tensors) mine.push_back(t.detach().cpu());
  if (ranks_.size() == 1 && ranks_[0] == global_rank()) return {mine};
  detail::GroupRuntime& c = member_runtime("all_gather_tensors");
  const std::string where = "all_gather_tensors on group " + detail::join_ranks(ranks_);
  if (!c.ucx()) throw DistributedError(where + ": this process has no UCX channel to the others");
  if (size() >= transport::kStatusRingStep || mine.size() > transport::kMaxTransferTensors)
    throw std::invalid_argument(where + ": at most " +
                                std::to_string(transport::kStatusRingStep - 1) + " members and " +
                                std::to_string(transport::kMaxTransferTensors) + " tensors each");
  const std::vector<std::string> layouts =
      all_gather_bytes(tensorplay::detail::encode_layouts(mine));
  const uint32_t stream = c.collective_stream(ranks_);
  const uint64_t call = c.next_collective_call(ranks_);
  auto key = [&](int sender) {
    return transport::collective_key(stream, call, transport::RingPhase::AllGather, sender);
  };
  const int me = rank();
  std::vector<std::vector<Tensor>> out(ranks_.size());
  try {
    for (int j = 0; j < size(); ++j)
      if (j != me && !mine.empty()) c.ucx()->send(ranks_[j], key(me), mine);
    for (int j = 0; j < size(); ++j) {
      auto expect = decode(layouts[j], where);
      if (j != me && !expect.empty())
        out[j] = c.ucx()->receive(ranks_[j], key(j), std::move(expect), cpu(), c.timeout());
    }
  } catch (const transport::TransferError& e) {
    throw DistributedError(where + " failed: " + e.what());
  }
  out[me] = std::move(mine);
  return out;
}

}  // namespace tensorplay::distributed
