// The NCCL channel's implementation (private to transport/, built only with NCCL): transfers,
// links and the shared state; nccl_channel.cpp runs the links, nccl_channel_api.cpp is the API.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <array>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <utility>

#include "tensorplay/core/device_info.h"
#include "tensorplay/cuda/cuda_check.h"
#include "tensorplay/cuda/cuda_device.h"
#include "tensorplay/transport/detail/nccl_links.h"
#include "tensorplay/transport/detail/nccl_support.h"
#include "tensorplay/transport/nccl_channel.h"

namespace tensorplay::transport {
namespace detail {

static_assert(kDirections == kLanes, "one set of links per lane of TransferKey");
using std::chrono::milliseconds;

// The completion thread looks at its events this often while transfers are in flight: a few tens
// of microseconds of latency, against a core kept busy. Idle, it sleeps until something is queued.
inline constexpr auto kPollInterval = std::chrono::microseconds(20);
// Host-side work of one enqueue once every rank is connected; past this NCCL is stuck.
inline constexpr auto kEnqueueTimeout = std::chrono::seconds(60);
// How long the streams get to drain after an abort before their tensors are deliberately leaked
// (freeing memory a kernel may still write would corrupt whatever reuses it).
inline constexpr auto kDrainTimeout = std::chrono::seconds(10);
// How long the destructor lets transfers in flight finish before it aborts them.
inline constexpr auto kCloseGrace = std::chrono::seconds(1);

// The link set a transfer takes: its key's lane (the links of lane 0 carry "forward" traffic).
inline int direction_of(const TransferKey& key) {
  if (key.lane >= kDirections)
    throw std::invalid_argument("nccl channel: " + to_string(key) + " names lane " +
                                std::to_string(key.lane) + "; lanes are 0 to " +
                                std::to_string(kDirections - 1) + " (kLanes)");
  return key.lane;
}
inline std::string direction_name(int direction) { return direction == 0 ? "forward" : "backward"; }

// One send or receive queued on a lane.
struct Transfer {
  bool receive = false;
  int peer = 0;
  TransferKey key;
  std::vector<Tensor> tensors;     // kept alive until the GPU is done with their bytes
  cudaEvent_t finished = nullptr;  // recorded on the link's stream after the NCCL calls
  Clock::time_point deadline = Clock::time_point::max();  // receives only
  milliseconds timeout{0};
  ReceiveDone done;  // receives only

  std::string describe() const {
    return (receive ? "receive of " : "send of ") + to_string(key) +
           (receive ? " from rank " : " to rank ") + std::to_string(peer);
  }
};

// One (direction, sender, receiver) link: a two-rank communicator, the stream its calls run on,
// and what is in flight there (in issue order, which is also completion order).
struct Lane {
  int direction = 0;
  int peer = 0;               // the peer's rank in the group
  bool sending = false;       // this rank sends on the link (else it receives)
  int peer_in_comm = 0;       // the peer's rank in this link's two-rank communicator
  std::mutex issue_mutex;     // one NCCL caller at a time; keeps queue order == stream order
  ncclComm_t comm = nullptr;  // null once aborted or closed
  cudaStream_t stream = nullptr;
  cudaEvent_t produced = nullptr;  // marks the tensor stream's work so far, for the link to wait
  std::deque<Transfer> queue;      // guarded by NcclChannel::Impl::mutex

  std::string name() const {
    return direction_name(direction) + (sending ? " link to rank " : " link from rank ") +
           std::to_string(peer);
  }
};

}  // namespace detail

using detail::Clock;
using detail::kDirections;
using detail::Lane;
using detail::link_index;
using detail::LinkPair;
using detail::Transfer;
using std::chrono::milliseconds;

// -- shared state --------------------------------------------------------------------------------

struct NcclChannel::Impl {
  struct Culprit {
    int peer;
    TransferKey key;
    std::string message;
  };

  Impl(int rank, int world_size, int device)
      : rank(rank), world_size(world_size), device(device), slots(detail::link_slots(world_size)) {}
  ~Impl() { close(); }

  void open(const std::vector<std::vector<uint8_t>>& ids, milliseconds timeout);
  void connect_all(Clock::time_point deadline);
  void split_links(int direction, ncclComm_t parent, Clock::time_point deadline, int max_ctas);
  std::string issue(Lane& lane, Transfer transfer);
  Lane& lane(int direction, int peer, bool sending) {
    return *slots[link_index(direction, peer, sending, world_size)];
  }
  // The links of this rank in link_pairs order (the order every rank connects and closes in).
  template <typename F>
  void for_each_lane_in_pair_order(F f) {
    for (int d = 0; d < kDirections; ++d)
      for (const LinkPair& pair : detail::link_pairs(world_size))
        if (detail::in_pair(pair, rank)) {
          auto& l = slots[link_index(d, detail::other_in_pair(pair, rank),
                                     detail::sends_on(pair, rank), world_size)];
          if (l) f(*l);
        }
  }
  template <typename F>
  void for_each_lane(F f) {
    for (auto& l : slots)
      if (l) f(*l);
  }
  template <typename F>
  void for_each_lane(F f) const {
    for (const auto& l : slots)
      if (l) f(*l);
  }
  void poll();
  void complete(std::vector<Transfer>& finished);
  std::string async_error();
  void fail(const std::string& reason, std::vector<Transfer> extra = {},
            std::optional<Culprit> culprit = std::nullopt);
  // Aborts every link's communicator (the only way to stop NCCL kernels waiting for a peer).
  void abort_lanes();
  bool wait_streams(Clock::time_point deadline);
  void close();

  cudaEvent_t take_event();
  bool busy() const {  // requires mutex
    bool any = false;
    for_each_lane([&](const Lane& l) { any = any || !l.queue.empty(); });
    return any;
  }
  std::string failed() const {
    std::lock_guard lock(mutex);
    return failure;
  }
  std::string where() const {
    return "rank " + std::to_string(rank) + " of " + std::to_string(world_size) +
           " on cuda:" + std::to_string(device);
  }

  const int rank;
  const int world_size;
  const int device;
  // The group communicators the links are split from (one per direction); kept until close.
  std::array<ncclComm_t, kDirections> parents{};
  std::vector<std::unique_ptr<Lane>> slots;  // by link_index; null for this rank itself
  std::deque<ncclComm_t> split_outputs;      // where ncclCommSplit writes (see split_links)
  mutable std::mutex mutex;                  // lane queues, spare_events, failure, stopping
  std::condition_variable wake;
  std::vector<cudaEvent_t> spare_events;
  std::string failure;  // why the communicators were aborted; empty while usable
  bool stopping = false;
  bool closed = false;
  std::thread poller;
};

}  // namespace tensorplay::transport
