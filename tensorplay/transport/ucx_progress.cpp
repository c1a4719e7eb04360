// The UCX channel's progress thread: its loop, sends, receives, deadlines, messages arriving and
// broken connections. It alone touches the UCX worker (see detail/ucx_channel_impl.h).
#include <poll.h>
#include <pthread.h>

#include "tensorplay/transport/detail/ucx_channel_impl.h"

namespace tensorplay::transport {

// -- progress thread: the loop --------------------------------------------------------------------

void UcxChannel::Impl::create_worker() {
  ucp_worker_params_t params{};
  params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  params.thread_mode = UCS_THREAD_MODE_SINGLE;  // one thread at a time: the progress thread
  check(ucp_worker_create(context_, &params, &worker_), "creating the UCX worker");
  ucp_address_t* address = nullptr;
  size_t length = 0;
  ucs_status_t status = ucp_worker_get_address(worker_, &address, &length);
  if (status == UCS_OK) {
    auto* bytes = reinterpret_cast<const uint8_t*>(address);
    address_.assign(bytes, bytes + length);
    ucp_worker_release_address(worker_, address);
    status = ucp_worker_get_efd(worker_, &event_fd_);
  }
  if (status == UCS_OK) {
    ucp_am_handler_param_t handler{};
    handler.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                         UCP_AM_HANDLER_PARAM_FIELD_ARG;
    handler.id = kMessageId;
    handler.cb = &Impl::on_message;
    handler.arg = this;
    status = ucp_worker_set_am_recv_handler(worker_, &handler);
  }
  if (status != UCS_OK) {
    ucp_worker_destroy(worker_);
    check(status, "querying the UCX worker's address and event fd");
  }
}

void UcxChannel::Impl::run() {
  pthread_setname_np(pthread_self(), "tp-ucx");  // named for thread listings (thread_times.h)
  Clock::time_point last_busy = Clock::now();
  bool busy_since_clock = false;  // activity since the clock was last read
  bool yielding = false;          // past the tight part of the spin
  for (unsigned turn = 1; !stop_.load(); ++turn) {
    bool busy = run_queued();
    // Receives that completed are delivered at once, before polling again: a callback that
    // answers (the next hop's send) does not wait for one more turn of the worker.
    while (ucp_worker_progress(worker_) != 0) {
      busy = true;
      deliver_completions();
    }
    if (!failed_peers_.empty()) handle_failed_peers();
    sweep();
    busy |= deliver_completions();
    if (busy) {
      busy_since_clock = true;
      yielding = false;
    }
    // The clock is read every few turns: a read costs about what an idle turn does, and a
    // message arriving meanwhile waits for the turn to end.
    if (turn % kTurnsPerClockRead != 0) {
      if (yielding) std::this_thread::yield();
      continue;
    }
    const Clock::time_point now = Clock::now();
    if (busy_since_clock) {
      last_busy = now;
      busy_since_clock = false;
    }
    if (!deadlines_.empty() && deadlines_.begin()->first <= now) {
      expire(now);
      deliver_completions();
      last_busy = now;
    }
    // Spin a little after any activity: the next message, or the caller's next operation,
    // usually follows within microseconds. Poll without pause for the first few microseconds
    // (a reply's round trip), then yield between polls so that a caller just woken by a
    // callback, or the other rank on a two-core machine, is not kept off the core.
    yielding = now - last_busy > kTightSpin;
    // On a one-core rank in a step, a poll would take a core from a compute thread: sleep at
    // once. With a core to spare, a rank in a step with nothing to compute waits for a message:
    // poll on.
    const bool computing = threads_computing() > 0;
    const bool in_step = ranks_in_step() > 0;
    const bool waiting = spin_.spin_while_waiting && !computing && in_step;
    if ((now - last_busy >= spin_.spin && !waiting) ||
        (spin_.sleep_while_busy && (computing || in_step))) {
      sleep_until_event(now);  // spinning longer would take a core from the ranks' compute
      yielding = false;
    } else if (yielding) {
      std::this_thread::yield();
    }
  }
  shut_down();
}

void UcxChannel::Impl::sweep() {
  if (!retired_.empty()) recycle_receives();
  if (!discards_.empty()) std::erase_if(discards_, [](const auto& d) { return d->done; });
}

void UcxChannel::Impl::recycle_receives() {
  // Still in UCX's hands, or held by an operation of this thread (start_receive's caller).
  const auto done = std::partition(retired_.begin(), retired_.end(), [](const auto& op) {
    return op->outstanding > 0 || op.use_count() > 1;
  });
  if (done == retired_.end()) return;
  for (auto it = done; it != retired_.end(); ++it)
    **it = ReceiveOp::emptied(std::move(**it));  // drops what a failed receive kept
  {
    std::lock_guard lock(mutex_);
    for (auto it = done; it != retired_.end() && spare_receives_.size() < kSpareReceives; ++it)
      spare_receives_.push_back(std::move(*it));
  }
  retired_.erase(done, retired_.end());
}

bool UcxChannel::Impl::run_queued() {
  if (!queued_.load()) return false;
  {
    std::lock_guard lock(mutex_);
    running_.swap(queue_);  // both keep their capacity: no allocation per turn
    queued_.store(false);
  }
  for (auto& operation : running_) {
    try {
      operation();
    } catch (const std::exception& e) {  // only allocation failures can get here
      std::fprintf(stderr, "ucx channel: an operation failed on the progress thread: %s\n",
                   e.what());
    }
  }
  const bool ran = !running_.empty();
  running_.clear();
  return ran;
}

void UcxChannel::Impl::sleep_until_event(Clock::time_point now) {
  int timeout_ms = kMaxSleepMs;
  if (!deadlines_.empty()) {
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadlines_.begin()->first - now);
    timeout_ms = static_cast<int>(std::clamp<int64_t>(left.count(), 0, kMaxSleepMs));
  }
  sleeping_.store(true);
  // UCS_ERR_BUSY: events are waiting to be progressed; go round again instead of sleeping. Any
  // other failure to arm: sleep a millisecond at most (callers' signals still wake the fd).
  const ucs_status_t armed = ucp_worker_arm(worker_);
  if (armed != UCS_ERR_BUSY && !queued_.load()) {
    pollfd fd{event_fd_, POLLIN, 0};
    poll(&fd, 1, armed == UCS_OK ? timeout_ms : std::min(timeout_ms, 1));
  }
  sleeping_.store(false);
}

void UcxChannel::Impl::progress_for(Clock::duration limit, const std::function<bool()>& finished) {
  const Clock::time_point end = Clock::now() + limit;
  while (!finished()) {
    const Clock::time_point now = Clock::now();
    if (now >= end) return;
    if (ucp_worker_progress(worker_) != 0) continue;
    if (!failed_peers_.empty()) handle_failed_peers();
    if (ucp_worker_arm(worker_) == UCS_OK) {
      pollfd fd{event_fd_, POLLIN, 0};
      poll(&fd, 1, 1);
    }
  }
}

void UcxChannel::Impl::shut_down() {
  run_queued();  // operations posted before the destructor ran
  std::vector<ReceiveOp*> ops;
  for (auto& [key, op] : receives_) ops.push_back(op.get());
  for (ReceiveOp* op : ops)
    finish(op, "ucx channel: the channel was closed while receiving " +
                   to_string(op->key.transfer) + " from rank " + std::to_string(op->key.peer));
  deliver_completions();
  discard_unexpected();  // nobody will receive them now

  // Sends in flight get a bounded time to leave (a receiver may be about to post); receives
  // cancelled mid-transfer finish their rendezvous.
  progress_for(kSendDrainTime, [this] {
    sweep();
    return sends_.empty() && retired_.empty() && discards_.empty();
  });

  // Flush healthy endpoints; force the ones still holding sends (their requests are cancelled).
  std::vector<int> busy_peers(world_size_, 0);
  for (auto& [raw, op] : sends_) busy_peers[op->peer] = 1;
  std::vector<void*> closing;
  for (int r = 0; r < world_size_; ++r) {
    if (endpoints_[r] == nullptr) continue;
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = busy_peers[r] ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    ucs_status_ptr_t request = ucp_ep_close_nbx(endpoints_[r], &param);
    endpoints_[r] = nullptr;
    if (UCS_PTR_IS_PTR(request)) closing.push_back(request);
  }
  progress_for(kCloseTime, [&] {
    return std::all_of(closing.begin(), closing.end(),
                       [](void* r) { return ucp_request_check_status(r) != UCS_INPROGRESS; });
  });
  for (void* request : closing) ucp_request_free(request);
  discard_unexpected();  // what arrived meanwhile (the worker would warn about it)
  deliver_completions();
}

// -- progress thread: sends -----------------------------------------------------------------------

void UcxChannel::Impl::start_send(const std::shared_ptr<SendOp>& op) {
  ucp_ep_h endpoint = endpoints_[op->peer];
  if (endpoint == nullptr) {  // the connection broke after send() checked it
    pending_ -= op->pieces.size();
    return;
  }
  op->outstanding = 1;  // held while posting (the caller's reference keeps `op` alive meanwhile)
  for (SendPiece& piece : op->pieces) {
    ucp_request_param_t param{};
    param.op_attr_mask =
        UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_MEMORY_TYPE;
    param.cb.send = &Impl::on_sent;
    param.user_data = op.get();
    param.memory_type = UCS_MEMORY_TYPE_HOST;
    ucs_status_ptr_t request = ucp_tag_send_nbx(endpoint, piece.tensor.raw_data(),
                                                piece.tensor.nbytes(), piece.ucx_tag, &param);
    ++op->outstanding;
    // Completed at once (the bytes were buffered) or failed: no callback will come.
    if (!UCS_PTR_IS_PTR(request)) piece_sent(op.get(), UCS_PTR_STATUS(request));
  }
  // The posting hold. Pieces still in flight keep the op in sends_ until their callbacks; one
  // whose pieces all left at once (small tensors, buffered) never enters it.
  if (--op->outstanding > 0) sends_.emplace(op.get(), op);
}

void UcxChannel::Impl::on_sent(void* request, ucs_status_t status, void* user_data) {
  ucp_request_free(request);
  auto* op = static_cast<SendOp*>(user_data);
  op->impl->piece_sent(op, status);
}

void UcxChannel::Impl::piece_sent(SendOp* op, ucs_status_t status) {
  --pending_;
  if (status != UCS_OK && status != UCS_ERR_CANCELED)
    mark_failed(op->peer, "ucx channel: sending " + to_string(op->transfer) + " to rank " +
                              std::to_string(op->peer) + " failed (" + status_text(status) + ")");
  release(op);
}

void UcxChannel::Impl::release(SendOp* op) {
  // Drops the tensors (while posting, the hold keeps the count above zero).
  if (--op->outstanding == 0) sends_.erase(op);
}

// -- progress thread: receives --------------------------------------------------------------------

void UcxChannel::Impl::start_receive(const std::shared_ptr<ReceiveOp>& op) {
  ReceiveOp* raw = op.get();
  receives_.emplace(op->key, op);
  raw->deadline = deadlines_.emplace(Clock::now() + op->timeout, raw);
  if (endpoints_[op->key.peer] == nullptr) {  // the connection broke after the caller checked
    std::string failure;
    {
      std::lock_guard lock(mutex_);
      failure = peers_[op->key.peer].failure;
    }
    finish(raw, failure + " before " + to_string(op->key.transfer) + " arrived");
    return;
  }
  for (ReceivePiece& piece : raw->pieces) {
    // No immediate completion: UCX 1.13 does not report the length of a message received at
    // once, and the length is what tells a mismatched descriptor. The callback may then run
    // inside ucp_tag_recv_nbx.
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                         UCP_OP_ATTR_FIELD_MEMORY_TYPE | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    param.cb.recv = &Impl::on_received;
    param.user_data = &piece;
    param.memory_type = UCS_MEMORY_TYPE_HOST;
    const Tensor& buffer = raw->tensors[piece.index];
    ++raw->outstanding;  // dropped by the callback
    ucs_status_ptr_t request = ucp_tag_recv_nbx(worker_, buffer.raw_data(), buffer.nbytes(),
                                                piece.ucx_tag, ~uint64_t{0}, &param);
    if (UCS_PTR_IS_ERR(request)) {
      --raw->outstanding;
      piece_received(piece, UCS_PTR_STATUS(request), 0);
    } else if (!piece.called_back) {
      piece.request = request;
    }
    if (raw->finished) break;  // an error ended it: do not post the rest
  }
  if (raw->pieces.empty()) finish(raw, {});
}

void UcxChannel::Impl::on_received(void* request, ucs_status_t status,
                                   const ucp_tag_recv_info_t* info, void* user_data) {
  auto* piece = static_cast<ReceivePiece*>(user_data);
  piece->request = nullptr;
  piece->called_back = true;
  ucp_request_free(request);
  --piece->op->outstanding;
  piece->op->impl->piece_received(*piece, status, status == UCS_OK ? info->length : 0);
}

void UcxChannel::Impl::piece_received(ReceivePiece& piece, ucs_status_t status, size_t length) {
  ReceiveOp* op = piece.op;
  if (op->finished) return;  // cancelled, timed out or failed already
  const uint64_t expected = op->descriptors[piece.index].bytes;
  if (status == UCS_OK && length == expected) {
    if (++op->received == op->pieces.size()) finish(op, {});
    return;
  }
  const std::string what = tensor_of(piece.index, op->key.transfer, op->key.peer);
  if (status == UCS_OK) {
    finish(op, "ucx channel: " + what + ": " + std::to_string(length) +
                   " bytes arrived, its descriptor says " + std::to_string(expected) +
                   " (the descriptors do not match what was sent)");
  } else if (status == UCS_ERR_MESSAGE_TRUNCATED) {
    finish(op, "ucx channel: " + what + ": more bytes arrived than the " +
                   std::to_string(expected) +
                   " its descriptor says (the descriptors do not match what was sent)");
  } else {
    finish(op, "ucx channel: receiving " + what + " failed (" + status_text(status) + ")");
  }
}

std::string UcxChannel::Impl::nothing_arrived(const ReceiveOp& op) const {
  const std::string within = " within " + std::to_string(op.timeout.count()) + " ms";
  const std::string from = " from rank " + std::to_string(op.key.peer);
  if (op.received == 0)
    return "ucx channel: nothing arrived for " + to_string(op.key.transfer) + from + within;
  return "ucx channel: only " + std::to_string(op.received) + " of " +
         std::to_string(op.pieces.size()) + " tensors of " + to_string(op.key.transfer) +
         " arrived" + from + within;
}

void UcxChannel::Impl::finish(ReceiveOp* op, std::string error) {
  op->finished = true;
  deadlines_.erase(op->deadline);
  auto node = receives_.extract(op->key);
  if (!error.empty()) {
    // Cancelled requests call back at once (outstanding drops); ones already matched to a
    // message finish their transfer later, so the buffers stay with the op until they do.
    for (ReceivePiece& piece : op->pieces)
      if (piece.request != nullptr) ucp_request_cancel(worker_, piece.request);
  }
  pending_ -= op->descriptors.size();
  completions_.push_back({std::move(op->done),
                          error.empty() ? std::move(op->tensors) : std::vector<Tensor>{},
                          std::move(error), op->device});
  {
    std::lock_guard lock(mutex_);
    posted_.erase(op->key);
  }
  // Kept until UCX is done with its buffers and nothing on this thread is still looking at it;
  // sweep() then hands it to claim_receive() again.
  retired_.push_back(std::move(node.mapped()));
}

void UcxChannel::Impl::expire(Clock::time_point now) {
  while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
    ReceiveOp* op = deadlines_.begin()->second;
    finish(op, nothing_arrived(*op));
  }
}

bool UcxChannel::Impl::deliver_completions() {
  if (completions_.empty()) return false;
  // Callbacks may post more work, which lands in completions_ again (or deliver it themselves,
  // cancelling a receive): the buffer taken here is this call's alone.
  std::vector<Completion> ready = std::move(spare_completions_);
  spare_completions_.clear();
  ready.swap(completions_);
  for (Completion& c : ready) {
    if (c.error.empty() && c.device.is_cuda()) {
      try {
        for (Tensor& t : c.tensors)
          if (t.defined()) t = t.to(c.device);  // pinned staging; no wait for the stream
      } catch (const std::exception& e) {
        c.tensors.clear();
        c.error = std::string("ucx channel: copying a received tensor to ") + to_string(c.device) +
                  " failed: " + e.what();
      }
    }
    try {
      c.done(std::move(c.tensors), std::move(c.error));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ucx channel: a receive callback threw (ignored): %s\n", e.what());
    } catch (...) {
      std::fprintf(stderr, "ucx channel: a receive callback threw (ignored)\n");
    }
  }
  ready.clear();  // keeps its capacity for the next call
  if (ready.capacity() > spare_completions_.capacity()) spare_completions_ = std::move(ready);
  return true;
}

void UcxChannel::Impl::discard_unexpected() {
  ucp_tag_recv_info_t info{};
  while (ucp_tag_message_h message = ucp_tag_probe_nb(worker_, 0, 0, 1, &info)) {
    auto discard = std::make_unique<Discard>();
    discard->buffer = std::make_unique<uint8_t[]>(std::max<size_t>(info.length, 1));
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.cb.recv = [](void* request, ucs_status_t, const ucp_tag_recv_info_t*, void* user_data) {
      ucp_request_free(request);
      static_cast<Discard*>(user_data)->done = true;  // swept on the next turn of the loop
    };
    param.user_data = discard.get();
    ucs_status_ptr_t request =
        ucp_tag_msg_recv_nbx(worker_, discard->buffer.get(), info.length, message, &param);
    if (UCS_PTR_IS_PTR(request)) discards_.push_back(std::move(discard));
  }
}

// -- progress thread: messages --------------------------------------------------------------------

ucs_status_t UcxChannel::Impl::on_message(void* arg, const void* header, size_t header_length,
                                          void* data, size_t length,
                                          const ucp_am_recv_param_t* param) {
  auto* self = static_cast<Impl*>(arg);
  uint32_t words[2];
  if (header_length != sizeof words || (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0) {
    std::fprintf(stderr, "ucx channel: dropped a malformed message (header of %zu bytes)\n",
                 header_length);
    return UCS_OK;
  }
  std::memcpy(words, header, sizeof words);
  MessageHandler handler;
  {
    std::lock_guard lock(self->mutex_);
    auto it = self->handlers_.find(words[1]);
    if (it == self->handlers_.end()) return UCS_OK;  // no such stream (any more)
    handler = it->second;
  }
  if (words[0] >= static_cast<uint32_t>(self->world_size_)) return UCS_OK;
  self->in_ucx_callback_ = true;  // what the handler posts waits for the loop's next turn
  handler(static_cast<int>(words[0]), std::string_view(static_cast<const char*>(data), length));
  self->in_ucx_callback_ = false;
  return UCS_OK;
}

void UcxChannel::Impl::on_endpoint_error(void* arg, ucp_ep_h /*ep*/, ucs_status_t status) {
  auto* peer = static_cast<PeerArg*>(arg);
  peer->impl->failed_peers_.emplace_back(peer->rank, status);  // handled after progress returns
}

void UcxChannel::Impl::mark_failed(int peer, const std::string& why) {
  std::lock_guard lock(mutex_);
  if (peers_[peer].failure.empty()) peers_[peer].failure = why;
}

void UcxChannel::Impl::handle_failed_peers() {
  std::vector<std::pair<int, ucs_status_t>> failed;
  failed.swap(failed_peers_);
  for (auto [peer, status] : failed)
    fail_peer(peer, "ucx channel: the connection to rank " + std::to_string(peer) + " failed (" +
                        status_text(status) + ")");
}

void UcxChannel::Impl::fail_peer(int peer, const std::string& why) {
  {
    mark_failed(peer, why);
    std::vector<ReceiveOp*> ops;
    for (auto& [key, op] : receives_)
      if (key.peer == peer) ops.push_back(op.get());
    for (ReceiveOp* op : ops) finish(op, why + " while receiving " + to_string(op->key.transfer));
    if (ucp_ep_h endpoint = endpoints_[peer]) {
      endpoints_[peer] = nullptr;
      ucp_request_param_t param{};
      param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      param.flags = UCP_EP_CLOSE_FLAG_FORCE;
      ucs_status_ptr_t request = ucp_ep_close_nbx(endpoint, &param);
      if (UCS_PTR_IS_PTR(request)) {
        progress_for(kCloseTime,
                     [request] { return ucp_request_check_status(request) != UCS_INPROGRESS; });
        ucp_request_free(request);
      }
    }
  }
  deliver_completions();
}

}  // namespace tensorplay::transport
