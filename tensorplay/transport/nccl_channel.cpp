// The NCCL channel: one link per (direction, sender, receiver), each a two-rank nonblocking
// communicator split from the direction's group communicator, with its own stream. Sends and
// receives are queued on their link in issue order; a completion thread watches an event per
// transfer, reports receives, releases sent tensors, and aborts everything on a timeout or error.
#include "tensorplay/transport/detail/nccl_channel_impl.h"

namespace tensorplay::transport {

using detail::deadline_after;
using detail::direction_name;
using detail::finish;
using detail::kCloseGrace;
using detail::kDrainTimeout;
using detail::kEnqueueTimeout;
using detail::kPollInterval;
using detail::nccl_message;
using detail::wait_ready;

// -- setup and teardown --------------------------------------------------------------------------

void NcclChannel::Impl::open(const std::vector<std::vector<uint8_t>>& ids, milliseconds timeout) {
  cuda::DeviceGuard guard(device);
  Clock::time_point deadline = deadline_after(timeout);
  int sm_count = 0;
  TP_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device));
  // Every link and the data-parallel all-reduce may have kernels resident at once.
  const int max_ctas =
      detail::max_ctas_per_communicator(sm_count, detail::links_per_rank(world_size) + 1);
  std::string error;
  try {
    for (int d = 0; d < kDirections; ++d) {
      ncclUniqueId id;
      std::memcpy(id.internal, ids[d].data(), sizeof(id.internal));
      // Nonblocking, so that joining and connecting have a deadline and abort can unblock them.
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      config.blocking = 0;
      ncclResult_t result = ncclCommInitRankConfig(&parents[d], world_size, id, rank, &config);
      if (result == ncclInProgress) result = wait_ready(parents[d], deadline);
      if (result == ncclInProgress)
        throw TransferError("nccl channel: " + where() + ": not every rank joined the " +
                            direction_name(d) + " communicator within " +
                            std::to_string(timeout.count()) +
                            " ms; every rank must make its channel with the same two unique ids");
      if (result != ncclSuccess)
        throw TransferError("nccl channel: " + where() + ": joining the " + direction_name(d) +
                            " communicator failed: " + nccl_message(result));
      split_links(d, parents[d], deadline, max_ctas);
    }
    connect_all(deadline);
  } catch (const std::exception& e) {
    error = e.what();
  }
  if (!error.empty()) {
    abort_lanes();
    for (ncclComm_t& parent : parents) {
      if (parent != nullptr) ncclCommAbort(parent);
      parent = nullptr;
    }
    throw TransferError(error);
  }
  poller = std::thread([this] { poll(); });
}

// One two-rank communicator per pair of ranks and way, split from the direction's group
// communicator. The split is collective: every rank takes part in every link's split, in
// link_pairs order, and keeps the communicators of the links it belongs to.
void NcclChannel::Impl::split_links(int direction, ncclComm_t parent, Clock::time_point deadline,
                                    int max_ctas) {
  for (const LinkPair& pair : detail::link_pairs(world_size)) {
    const bool member = detail::in_pair(pair, rank);
    // NCCL writes the new communicator when the split completes, possibly after a timeout made
    // this throw: the slot it writes to lives as long as the channel.
    ncclComm_t& comm = split_outputs.emplace_back(nullptr);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    config.minCTAs = 1;  // NCCL's default floor may exceed a small cap
    config.maxCTAs = max_ctas;
    ncclResult_t result =
        ncclCommSplit(parent, member ? 0 : NCCL_SPLIT_NOCOLOR, rank, &comm, &config);
    std::string what = "splitting the " + direction_name(direction) + " link from rank " +
                       std::to_string(pair.low_sends ? pair.low : pair.high) + " to rank " +
                       std::to_string(pair.low_sends ? pair.high : pair.low) + " on " + where();
    if (result == ncclInProgress) result = wait_ready(parent, deadline);
    if (result == ncclSuccess && comm != nullptr) result = wait_ready(comm, deadline);
    if (result != ncclSuccess) {
      if (comm != nullptr) ncclCommAbort(comm);
      throw TransferError("nccl channel: " + what +
                          (result == ncclInProgress ? std::string(" timed out")
                                                    : " failed: " + nccl_message(result)));
    }
    if (!member) continue;
    if (comm == nullptr)
      throw TransferError("nccl channel: " + what + " returned no communicator for this rank");
    const int peer = detail::other_in_pair(pair, rank);
    const bool sending = detail::sends_on(pair, rank);
    // In its slot before anything else can throw, so that close() releases the communicator.
    auto& link = slots[link_index(direction, peer, sending, world_size)];
    link = std::make_unique<Lane>();
    link->direction = direction;
    link->peer = peer;
    link->sending = sending;
    link->peer_in_comm = detail::rank_in_pair(pair, peer);
    link->comm = comm;
    // Not blocking with the legacy default stream: communication must not wait for unrelated work.
    TP_CUDA_CHECK(cudaStreamCreateWithFlags(&link->stream, cudaStreamNonBlocking));
    TP_CUDA_CHECK(cudaEventCreateWithFlags(&link->produced, cudaEventDisableTiming));
  }
}

// NCCL connects two ranks on their first transfer, and that handshake waits for the peer. A send
// must never wait for its receiver (who posts its receive only after the descriptor arrives), so
// every link is connected here, once, while all ranks are in the constructor anyway: pair by pair
// in link_pairs order (each rank waits only on its own links, all in one order).
void NcclChannel::Impl::connect_all(Clock::time_point deadline) {
  if (world_size < 2) return;
  uint8_t* scratch = nullptr;
  TP_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&scratch), 2));
  std::string error;
  try {
    TP_CUDA_CHECK(cudaMemset(scratch, 0, 2));
    for_each_lane_in_pair_order([&](Lane& link) {
      std::string what = "connecting the " + link.name() + " of " + where();
      ncclResult_t result = ncclGroupStart();
      if (result == ncclSuccess)
        result = ncclSend(scratch, 1, ncclUint8, link.peer_in_comm, link.comm, link.stream);
      if (result == ncclSuccess)
        result = ncclRecv(scratch + 1, 1, ncclUint8, link.peer_in_comm, link.comm, link.stream);
      ncclResult_t end = ncclGroupEnd();
      finish(result != ncclSuccess ? result : end, link.comm, deadline, what);
      cudaError_t status;
      while ((status = cudaStreamQuery(link.stream)) == cudaErrorNotReady) {
        if (Clock::now() >= deadline) throw TransferError("nccl channel: " + what + " timed out");
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
      TP_CUDA_CHECK(status);
    });
  } catch (const std::exception& e) {
    error = e.what();
  }
  if (!error.empty()) {
    abort_lanes();
    if (wait_streams(Clock::now() + kDrainTimeout)) cudaFree(scratch);  // else still in use
    throw TransferError(error);
  }
  cudaFree(scratch);
}

void NcclChannel::Impl::close() {
  if (closed) return;
  closed = true;
  if (poller.joinable()) {
    Clock::time_point grace = Clock::now() + kCloseGrace;
    std::unique_lock lock(mutex);
    while (busy() && Clock::now() < grace) {
      lock.unlock();
      std::this_thread::sleep_for(milliseconds(1));
      lock.lock();
    }
    bool in_flight = busy();
    lock.unlock();
    if (in_flight) fail("the channel was destroyed with transfers in flight");
    {
      std::lock_guard stop(mutex);
      stopping = true;
    }
    wake.notify_all();
    poller.join();
  }
  std::optional<cuda::DeviceGuard> guard;
  try {
    guard.emplace(device);
  } catch (const std::exception&) {
    // A broken CUDA context: free what can be freed anyway.
  }
  // Finalize flushes what was issued; a peer that vanished can keep it from finishing. Links go
  // in link_pairs order, the same on every rank.
  auto release = [](ncclComm_t& comm) {
    if (comm == nullptr) return;
    ncclResult_t result = ncclCommFinalize(comm);
    if (result == ncclInProgress) result = wait_ready(comm, Clock::now() + kDrainTimeout);
    if (result == ncclSuccess)
      ncclCommDestroy(comm);
    else
      ncclCommAbort(comm);
    comm = nullptr;
  };
  for_each_lane_in_pair_order([&](Lane& l) {
    release(l.comm);
    if (l.stream != nullptr) {
      cudaStreamSynchronize(l.stream);
      cudaStreamDestroy(l.stream);
    }
    if (l.produced != nullptr) cudaEventDestroy(l.produced);
  });
  // The group communicators carry nothing; after a failure a peer may be gone, so they are
  // aborted rather than finalized (which could wait for it).
  const bool failed_before = !failed().empty();
  for (ncclComm_t& parent : parents) {
    if (parent != nullptr && failed_before) {
      ncclCommAbort(parent);
      parent = nullptr;
    }
    release(parent);
  }
  for (cudaEvent_t event : spare_events) cudaEventDestroy(event);
  spare_events.clear();
}

// -- issuing -------------------------------------------------------------------------------------

cudaEvent_t NcclChannel::Impl::take_event() {
  {
    std::lock_guard lock(mutex);
    if (!spare_events.empty()) {
      cudaEvent_t event = spare_events.back();
      spare_events.pop_back();
      return event;
    }
  }
  cudaEvent_t event = nullptr;
  TP_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  return event;
}

// Queues a transfer's NCCL calls on its lane, after the work already queued on the device's tensor
// stream (which produced the bytes to send, or last used the memory a receive writes into).
// Returns "" when queued; otherwise the error, after calling a receive's `done` with it.
std::string NcclChannel::Impl::issue(Lane& lane, Transfer transfer) {
  std::string error;
  bool abort = false;
  {
    std::lock_guard issue_lock(lane.issue_mutex);
    if (lane.comm == nullptr) {
      error = "nccl channel: " + transfer.describe() + " refused: the channel failed earlier (" +
              failed() + "); make a new channel with new unique ids on every rank";
    } else {
      try {
        cuda::DeviceGuard guard(device);
        transfer.finished = take_event();
        TP_CUDA_CHECK(cudaEventRecord(lane.produced, cuda::stream(device)));
        TP_CUDA_CHECK(cudaStreamWaitEvent(lane.stream, lane.produced, 0));
        // One group per transfer: NCCL launches its tensors together and the peer's group of
        // receives, issued in the same order, matches them one for one.
        ncclResult_t result = ncclGroupStart();
        for (const Tensor& t : transfer.tensors) {
          if (result != ncclSuccess) break;
          if (!t.defined() || t.nbytes() == 0) continue;
          result = transfer.receive ? ncclRecv(t.raw_data(), t.nbytes(), ncclUint8,
                                               lane.peer_in_comm, lane.comm, lane.stream)
                                    : ncclSend(t.raw_data(), t.nbytes(), ncclUint8,
                                               lane.peer_in_comm, lane.comm, lane.stream);
        }
        ncclResult_t end = ncclGroupEnd();
        finish(result != ncclSuccess ? result : end, lane.comm, Clock::now() + kEnqueueTimeout,
               "queueing the " + transfer.describe());
        TP_CUDA_CHECK(cudaEventRecord(transfer.finished, lane.stream));
        {
          std::lock_guard lock(mutex);
          lane.queue.push_back(std::move(transfer));
        }
        wake.notify_one();
        return {};
      } catch (const std::exception& e) {
        error = e.what();
        abort = true;
      }
    }
  }
  if (abort) {
    // Part of the transfer may be queued on the GPU: abort, and release its tensors only once
    // the streams have drained. fail() reports a receive through its `done`.
    std::vector<Transfer> extra;
    extra.push_back(std::move(transfer));
    fail(error, std::move(extra));
  } else if (transfer.done) {
    transfer.done({}, error);
  }
  return error;
}

// -- completion ----------------------------------------------------------------------------------

void NcclChannel::Impl::poll() {
  cudaSetDevice(device);
  std::unique_lock lock(mutex);
  while (true) {
    wake.wait(lock, [this] { return stopping || busy(); });
    if (stopping) return;
    std::vector<Transfer> finished;
    std::string error;
    std::optional<Culprit> culprit;
    Clock::time_point now = Clock::now();
    for_each_lane([&](Lane& lane) {
      while (!lane.queue.empty() && error.empty()) {
        cudaError_t status = cudaEventQuery(lane.queue.front().finished);
        if (status == cudaErrorNotReady) break;
        if (status != cudaSuccess) {
          cudaGetLastError();
          error = std::string("nccl channel: CUDA failed under the ") +
                  lane.queue.front().describe() + ": " + cudaGetErrorName(status) + " (" +
                  cudaGetErrorString(status) + ")";
          break;
        }
        finished.push_back(std::move(lane.queue.front()));
        lane.queue.pop_front();
      }
      for (const Transfer& t : lane.queue) {
        if (!error.empty()) break;
        if (t.receive && now >= t.deadline) {
          error = "the " + t.describe() + " timed out after " + std::to_string(t.timeout.count()) +
                  " ms";
          culprit =
              Culprit{t.peer, t.key,
                      "nccl channel: nothing arrived for " + to_string(t.key) + " from rank " +
                          std::to_string(t.peer) + " within " + std::to_string(t.timeout.count()) +
                          " ms; the NCCL communicators were aborted, so this channel "
                          "cannot be used again"};
        }
      }
    });
    lock.unlock();
    if (error.empty()) error = async_error();
    complete(finished);
    if (!error.empty()) fail(error, {}, std::move(culprit));
    std::this_thread::sleep_for(kPollInterval);
    lock.lock();
  }
}

// Hands received tensors to their callbacks and drops sent ones; their events go back to the pool.
void NcclChannel::Impl::complete(std::vector<Transfer>& finished) {
  for (Transfer& t : finished) {
    if (t.done) {
      try {
        t.done(std::move(t.tensors), {});
      } catch (...) {
        // A throwing callback must not take the completion thread (and every later transfer)
        // down with it; the callback owns its errors.
      }
    }
    t.tensors.clear();
  }
  std::lock_guard lock(mutex);
  for (Transfer& t : finished) spare_events.push_back(t.finished);
}

// Errors NCCL found on its own (a peer process that died, a broken connection), or "".
std::string NcclChannel::Impl::async_error() {
  std::string error;
  for_each_lane([&](Lane& lane) {
    if (!error.empty()) return;
    // Skipped while another thread is issuing: NCCL calls on one communicator are not concurrent.
    std::unique_lock issue_lock(lane.issue_mutex, std::try_to_lock);
    if (!issue_lock.owns_lock() || lane.comm == nullptr) return;
    ncclResult_t state = ncclSuccess;
    ncclResult_t result = ncclCommGetAsyncError(lane.comm, &state);
    if (result == ncclSuccess) result = state;
    if (result != ncclSuccess && result != ncclInProgress)
      error = "NCCL reported an error on the " + lane.name() + " of " + where() + ": " +
              nccl_message(result);
  });
  return error;
}

void NcclChannel::Impl::abort_lanes() {
  for_each_lane([](Lane& lane) {
    std::lock_guard issue_lock(lane.issue_mutex);
    if (lane.comm != nullptr) ncclCommAbort(lane.comm);
    lane.comm = nullptr;
  });
}

// Aborts every link's communicator, then reports every transfer in flight (and `extra`) as failed.
void NcclChannel::Impl::fail(const std::string& reason, std::vector<Transfer> extra,
                             std::optional<Culprit> culprit) {
  {
    std::lock_guard lock(mutex);
    if (failure.empty()) failure = reason;
  }
  abort_lanes();
  std::vector<Transfer> abandoned = std::move(extra);
  std::string why;
  {
    std::lock_guard lock(mutex);
    for_each_lane([&](Lane& lane) {
      for (Transfer& t : lane.queue) abandoned.push_back(std::move(t));
      lane.queue.clear();
    });
    why = failure;
  }
  bool drained = wait_streams(Clock::now() + kDrainTimeout);
  for (Transfer& t : abandoned) {
    if (t.done) {
      bool is_culprit = culprit && culprit->peer == t.peer && culprit->key == t.key;
      std::string message = is_culprit ? culprit->message
                                       : "nccl channel: " + t.describe() + " abandoned: " + why +
                                             "; the NCCL communicators were aborted";
      try {
        t.done({}, message);
      } catch (...) {
        // As in complete(): the callback owns its errors.
      }
    }
    if (!drained) {
      // A kernel may still write into these: leak them rather than let the allocator reuse them.
      new std::vector<Tensor>(std::move(t.tensors));
      continue;
    }
    t.tensors.clear();
    if (t.finished != nullptr) {
      std::lock_guard lock(mutex);
      spare_events.push_back(t.finished);
    }
  }
}

bool NcclChannel::Impl::wait_streams(Clock::time_point deadline) {
  for (auto& lane : slots) {
    if (!lane || lane->stream == nullptr) continue;
    while (cudaStreamQuery(lane->stream) == cudaErrorNotReady) {
      if (Clock::now() >= deadline) return false;
      std::this_thread::sleep_for(milliseconds(1));
    }
  }
  cudaGetLastError();  // an aborted kernel may leave a non-sticky error behind
  return true;
}

}  // namespace tensorplay::transport
