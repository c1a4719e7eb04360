// One backend choice, one NCCL id exchange and one all-reduce for a group's transfers.
#include "tensorplay/distributed/detail/group_backend.h"

#include "tensorplay/distributed/detail/group_runtime.h"
#include "tensorplay/transport/nccl_all_reduce.h"
#include "tensorplay/transport/nccl_channel.h"
#include "tensorplay/transport/ring_all_reduce.h"
#include "tensorplay/wire/protocol.h"

namespace tensorplay::pipelining::detail {

bool wants_nccl_for(const GroupRuntime& runtime, const std::vector<Device>& devices) {
  bool wants = runtime.backend() == "nccl" && transport::nccl_available();
  for (const Device& device : devices) wants = wants && device.is_cuda();
  return wants;
}

bool all_want_nccl(GroupRuntime& runtime, const std::vector<int>& ranks, bool mine,
                   const std::string& what) {
  bool all = true;
  for (auto& c : runtime.exchange(ranks, encode_message(Vote{mine}), {}, what))
    all = all &&
          decode_as<Vote>(c.bytes, what + ": rank " + std::to_string(c.source) + "'s vote").yes;
  return all;
}

std::vector<std::vector<uint8_t>> agree_nccl_ids(GroupRuntime& runtime,
                                                 const std::vector<int>& ranks, int my_index,
                                                 int count, const std::string& what) {
  std::string ids;
  if (my_index == 0)
    for (int i = 0; i < count; ++i) {
      std::vector<uint8_t> id = transport::nccl_unique_id();
      ids.append(reinterpret_cast<const char*>(id.data()), id.size());
    }
  std::string got = runtime.exchange(ranks, ids, {}, what)[0].bytes;
  if (count < 1 || got.size() % static_cast<size_t>(count) != 0)
    throw std::runtime_error(what + ": the group's first member sent " +
                             std::to_string(got.size()) + " bytes of NCCL ids, not " +
                             std::to_string(count) +
                             " ids of equal size (are all ranks running the same version?)");
  const size_t each = got.size() / static_cast<size_t>(count);
  std::vector<std::vector<uint8_t>> out;
  for (int i = 0; i < count; ++i)
    out.emplace_back(got.begin() + static_cast<std::ptrdiff_t>(i * each),
                     got.begin() + static_cast<std::ptrdiff_t>((i + 1) * each));
  return out;
}

void GroupAllReduce::operator()(Tensor& tensor, uint64_t call) const {
  if (tensor.is_cuda() && nccl) {
    nccl->all_reduce(tensor);
    return;
  }
  transport::ring_all_reduce_staged({ucx.get(), ranks, me, stream, timeout}, call, tensor);
}

}  // namespace tensorplay::pipelining::detail
