// ProcessGroup::all_gather_tensors: shapes over the collectives' exchange, bytes over UCX, each
// member sending its tensors to every other under a collective key naming the sender.
#include <cstring>

#include "actors/detail/group_runtime.h"
#include "actors/detail/rendezvous.h"
#include "actors/process_group.h"
#include "transport/channel.h"
#include "transport/collective_key.h"
#include "transport/ucx_channel.h"

namespace tensorplay::distributed {
namespace {

using transport::TensorDescriptor;

void put_u64(std::string& out, uint64_t v) { out.append(reinterpret_cast<const char*>(&v), 8); }

std::string encode(const std::vector<Tensor>& tensors) {
  std::string out;
  put_u64(out, tensors.size());
  for (const Tensor& t : tensors) {
    put_u64(out, static_cast<uint64_t>(t.dtype()));
    put_u64(out, t.shape().size());
    for (int64_t d : t.shape()) put_u64(out, static_cast<uint64_t>(d));
  }
  return out;
}

std::vector<TensorDescriptor> decode(const std::string& bytes, const std::string& where) {
  size_t at = 0;
  auto next = [&]() {
    if (at + 8 > bytes.size()) throw DistributedError(where + ": a member's shapes are cut short");
    uint64_t v;
    std::memcpy(&v, bytes.data() + at, 8);
    at += 8;
    return v;
  };
  std::vector<TensorDescriptor> out(next());
  for (TensorDescriptor& d : out) {
    d.dtype = static_cast<DType>(next());
    d.shape.resize(next());
    int64_t numel = 1;
    for (int64_t& n : d.shape) numel *= (n = static_cast<int64_t>(next()));
    d.bytes = static_cast<uint64_t>(numel) * element_size(d.dtype);
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
  if (!c.ucx) throw DistributedError(where + ": this process has no UCX channel to the others");
  if (size() >= transport::kStatusRingStep || mine.size() > transport::kMaxTransferTensors)
    throw std::invalid_argument(where + ": at most " +
                                std::to_string(transport::kStatusRingStep - 1) + " members and " +
                                std::to_string(transport::kMaxTransferTensors) + " tensors each");
  const std::vector<std::string> layouts = all_gather_bytes(encode(mine));
  const uint32_t stream = c.collective_stream(ranks_);
  const uint64_t call = c.next_collective_call(ranks_);
  auto key = [&](int sender) {
    return transport::collective_key(stream, call, transport::RingPhase::AllGather, sender);
  };
  const int me = rank();
  std::vector<std::vector<Tensor>> out(ranks_.size());
  try {
    for (int j = 0; j < size(); ++j)
      if (j != me && !mine.empty()) c.ucx->send(ranks_[j], key(me), mine);
    for (int j = 0; j < size(); ++j) {
      auto expect = decode(layouts[j], where);
      if (j != me && !expect.empty())
        out[j] = c.ucx->receive(ranks_[j], key(j), std::move(expect), cpu(), c.timeout);
    }
  } catch (const transport::TransferError& e) {
    throw DistributedError(where + " failed: " + e.what());
  }
  out[me] = std::move(mine);
  return out;
}

}  // namespace tensorplay::distributed
