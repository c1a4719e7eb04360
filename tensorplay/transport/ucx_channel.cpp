// UcxChannel: one progress thread owns the UCX worker (created in single-thread mode); callers
// hand it operations through a queue and wake it with ucp_worker_signal. Each tensor of a
// transfer travels as one UCP tag message; undefined and zero-byte tensors travel as nothing.
// Small messages (send_message) travel as UCX active messages handled on the progress thread.
//
// UCX tag of tensor `index` of a transfer (64 bits). UCX matches a receive by tag alone, never by
// source, so the key must tell transfers apart (its user's codec sees to that):
//   bits 63..60  stream modulo 2^kStreamBits
//   bits 59..15  key modulo 2^kKeyBits
//   bits 14..0   tensor index         (< kMaxTransferTensors)
#include "tensorplay/transport/ucx_channel.h"

#include "tensorplay/transport/detail/ucx_channel_impl.h"

namespace tensorplay::transport {

uint64_t UcxChannel::ucx_tag(const TransferKey& key, size_t index) {
  if (index >= kMaxTransferTensors)
    throw TransferError("ucx channel: " + to_string(key) + " has more than " +
                        std::to_string(kMaxTransferTensors) + " tensors (kMaxTransferTensors)");
  constexpr uint64_t kStreamMask = (uint64_t{1} << kStreamBits) - 1;
  constexpr uint64_t kKeyMask = (uint64_t{1} << kKeyBits) - 1;
  return (key.stream & kStreamMask) << (kKeyBits + kIndexBits) |
         (key.key & kKeyMask) << kIndexBits | index;
}

// -- channels alive at process exit ---------------------------------------------------------------
//
// UCX's library destructor (run by the dynamic loader after every atexit handler) walks UCX's
// registry of objects without its lock. A channel whose last owner lets go on another thread at
// that moment (a stage actor ending on a CAF thread, say) destroys its worker concurrently and
// corrupts the registry: a rank aborts at exit (an assertion in vfs_obj.c) after its work is
// done. So every channel is registered, and an atexit handler, installed by the first channel
// and hence run before the loader's cleanup, closes those still alive. Destruction holds the
// registry's lock while closing, so the handler never returns while a channel is half closed.

struct UcxChannel::Impl::LiveChannels {
  std::mutex mutex;
  std::unordered_set<Impl*> channels;
  std::once_flag at_exit_registered;
};

UcxChannel::Impl::LiveChannels& UcxChannel::Impl::live_channels() {
  static auto* live = new LiveChannels;  // never destroyed: channels may close during exit
  return *live;
}

void UcxChannel::Impl::close_live_channels() {
  LiveChannels& live = live_channels();
  std::lock_guard lock(live.mutex);
  for (Impl* channel : live.channels)
    if (channel->owner_pid_ == getpid()) channel->close();  // not a forked child's copies
}

UcxChannel::Impl::Impl(int rank, int world_size, const std::string& transports)
    : rank_(rank), world_size_(world_size), peers_(world_size), peer_args_(world_size) {
  for (int r = 0; r < world_size; ++r) peer_args_[r] = {this, r};
  endpoints_.assign(world_size, nullptr);

  ucp_config_t* config = nullptr;
  check(ucp_config_read(nullptr, nullptr, &config), "reading the UCX configuration");
  if (!transports.empty()) {
    const ucs_status_t tls = ucp_config_modify(config, "TLS", transports.c_str());
    if (tls != UCS_OK) ucp_config_release(config);
    check(tls, "selecting the transports '" + transports + "'");
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED |
                      UCP_PARAM_FIELD_ESTIMATED_NUM_EPS;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
  params.mt_workers_shared = 0;
  params.estimated_num_eps = static_cast<size_t>(world_size);
  ucs_status_t status = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  check(status, transports.empty() ? std::string("ucp_init")
                                   : "ucp_init with the UCX transports '" + transports +
                                         "' (ucx_info -d lists this host's)");
  try {
    create_worker();
  } catch (...) {
    ucp_cleanup(context_);
    throw;
  }
  // From here on only the progress thread touches the worker, until it is joined.
  thread_ = std::thread([this] { run(); });
  thread_id_ = thread_.get_id();
  LiveChannels& live = live_channels();
  std::call_once(live.at_exit_registered, [] { std::atexit(close_live_channels); });
  std::lock_guard lock(live.mutex);
  live.channels.insert(this);
}

UcxChannel::Impl::~Impl() {
  LiveChannels& live = live_channels();
  std::lock_guard lock(live.mutex);
  live.channels.erase(this);
  close();
}

void UcxChannel::Impl::close() {
  if (closed_) return;  // written only here, under the live channels' lock, which callers hold
  stop_.store(true);
  queued_.store(true);  // ends a spin at once
  ucp_worker_signal(worker_);
  thread_.join();
  {
    std::lock_guard lock(mutex_);  // callers check closed_ under it before signalling the worker
    closed_ = true;
  }
  ucp_worker_destroy(worker_);
  ucp_cleanup(context_);
}

// -- caller side ----------------------------------------------------------------------------------

void UcxChannel::Impl::check_peer(int peer, const char* verb) const {
  check_rank(peer, verb);
  std::lock_guard lock(mutex_);
  check_connected(peer, verb);
}

void UcxChannel::Impl::check_rank(int peer, const char* verb) const {
  if (peer < 0 || peer >= world_size_)
    throw TransferError("ucx channel: cannot " + std::string(verb) + " rank " +
                        std::to_string(peer) + ": ranks are 0 to " +
                        std::to_string(world_size_ - 1));
  if (peer == rank_)
    throw TransferError("ucx channel: rank " + std::to_string(rank_) + " cannot " + verb +
                        " itself (use the local channel inside one process)");
}

void UcxChannel::Impl::check_connected(int peer, const char* verb) const {
  check_open(verb);
  if (!peers_[peer].connected)
    throw TransferError("ucx channel: cannot " + std::string(verb) + " rank " +
                        std::to_string(peer) + ": it is not connected (call connect() with " +
                        "its address first)");
  if (!peers_[peer].failure.empty())
    throw TransferError(peers_[peer].failure + "; cannot " + verb + " it");
}

TransferError UcxChannel::Impl::closed_error(const char* verb) const {
  return TransferError("ucx channel: rank " + std::to_string(rank_) + " cannot " + verb +
                       ": the channel was closed because the process is exiting");
}

void UcxChannel::Impl::check_open(const char* verb) const {
  if (closed_) throw closed_error(verb);
}

bool UcxChannel::Impl::enqueue(std::function<void()> operation) {
  // On the progress thread, outside UCX's own callbacks (a receive callback answering with a
  // send, say), the operation runs at once: no queue, no extra turn of the loop.
  if (std::this_thread::get_id() == thread_id_ && !in_ucx_callback_) {
    operation();
    return true;
  }
  std::lock_guard lock(mutex_);
  if (closed_) return false;
  queue_.push_back(std::move(operation));
  queued_.store(true);
  // The thread sets sleeping_ before it checks queued_ and arms: one of the two sides sees the
  // other's store, so either the thread finds the operation or the signal wakes it. Under the
  // lock: close() destroys the worker only after setting closed_ under it.
  if (sleeping_.load()) ucp_worker_signal(worker_);
  return true;
}

void UcxChannel::Impl::call_on_thread(std::function<void()> operation) {
  if (std::this_thread::get_id() == thread_id_) {
    operation();
    return;
  }
  auto task = std::make_shared<std::packaged_task<void()>>(std::move(operation));
  auto result = task->get_future();
  if (!enqueue([task] { (*task)(); })) return;
  if (result.wait_for(kCallTime) != std::future_status::ready)
    throw TransferError("ucx channel: the progress thread did not answer within " +
                        std::to_string(kCallTime.count()) + " s (is a receive callback blocked?)");
  result.get();
}

void UcxChannel::Impl::connect(const std::vector<std::vector<uint8_t>>& addresses,
                               const std::vector<bool>& same_host) {
  if (static_cast<int>(addresses.size()) != world_size_)
    throw TransferError("ucx channel: connect() got " + std::to_string(addresses.size()) +
                        " addresses for " + std::to_string(world_size_) + " ranks");
  {
    std::lock_guard lock(mutex_);
    check_open("connect");
    if (connected_) throw TransferError("ucx channel: connect() was already called");
    connected_ = true;
  }
  call_on_thread([this, addresses, same_host] {
    for (int r = 0; r < world_size_; ++r) {
      if (r == rank_ || addresses[r].empty()) continue;
      ucp_ep_params_t params{};
      params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                          UCP_EP_PARAM_FIELD_ERR_HANDLER;
      params.address = reinterpret_cast<const ucp_address_t*>(addresses[r].data());
      const bool local = r < static_cast<int>(same_host.size()) && same_host[r];
      params.err_mode = forced_error_mode_.value_or(local ? UCP_ERR_HANDLING_MODE_NONE
                                                          : UCP_ERR_HANDLING_MODE_PEER);
      params.err_handler.cb = &Impl::on_endpoint_error;
      params.err_handler.arg = &peer_args_[r];
      check(ucp_ep_create(worker_, &params, &endpoints_[r]),
            "creating the endpoint to rank " + std::to_string(r));
    }
  });
  std::lock_guard lock(mutex_);
  for (int r = 0; r < world_size_; ++r) peers_[r].connected = r != rank_ && !addresses[r].empty();
}

std::vector<TensorDescriptor> UcxChannel::Impl::send(int peer, const TransferKey& transfer,
                                                     std::vector<Tensor> tensors) {
  check_peer(peer, "send to");
  if (!tensors.empty())
    UcxChannel::ucx_tag(transfer, tensors.size() - 1);  // throws when it cannot fit
  std::vector<TensorDescriptor> descriptors;
  descriptors.reserve(tensors.size());
  auto op = std::make_shared<SendOp>();
  op->impl = this;
  op->peer = peer;
  op->transfer = transfer;
  for (size_t i = 0; i < tensors.size(); ++i) {
    descriptors.push_back(describe(tensors[i]));
    if (!tensors[i].defined() || tensors[i].nbytes() == 0) continue;
    // UCX here has no CUDA transport: device tensors leave from a host copy.
    Tensor host = tensors[i].is_cuda() ? tensors[i].to(cpu()) : std::move(tensors[i]);
    op->pieces.push_back({op.get(), std::move(host), UcxChannel::ucx_tag(transfer, i)});
  }
  if (op->pieces.empty()) return descriptors;
  pending_ += op->pieces.size();
  if (!submit([this, op] { start_send(op); })) {
    pending_ -= op->pieces.size();
    throw closed_error("send");
  }
  return descriptors;
}

void UcxChannel::Impl::post_receive(int peer, const TransferKey& transfer,
                                    std::vector<TensorDescriptor> descriptors, Device device,
                                    std::chrono::milliseconds timeout, ReceiveDone done) {
  check_rank(peer, "receive from");
  if (!descriptors.empty()) UcxChannel::ucx_tag(transfer, descriptors.size() - 1);
  for (size_t i = 0; i < descriptors.size(); ++i) {
    const TensorDescriptor& d = descriptors[i];
    const uint64_t expected = static_cast<uint64_t>(numel(d.shape)) * element_size(d.dtype);
    if (d.defined && d.bytes != expected)
      throw TransferError("ucx channel: descriptor " + std::to_string(i) + " of " +
                          to_string(transfer) + " from rank " + std::to_string(peer) + " says " +
                          std::to_string(d.bytes) + " bytes, but its shape and dtype hold " +
                          std::to_string(expected));
  }
  const ReceiveKey key{peer, transfer};
  std::shared_ptr<ReceiveOp> op = claim_receive(key);
  try {
    op->impl = this;
    op->key = key;
    op->device = device;
    op->timeout = timeout;
    op->done = std::move(done);
    for (size_t i = 0; i < descriptors.size(); ++i) {
      const TensorDescriptor& d = descriptors[i];
      if (!d.defined) {
        op->tensors.emplace_back();
        continue;
      }
      // The host caching allocator hands back blocks of earlier steps: no fresh pages to fault in.
      op->tensors.push_back(empty(d.shape, {.dtype = d.dtype, .device = cpu()}));
      if (d.bytes > 0) op->pieces.push_back({op.get(), i, UcxChannel::ucx_tag(transfer, i)});
    }
  } catch (...) {  // out of memory for a buffer
    std::lock_guard lock(mutex_);
    posted_.erase(key);
    throw;
  }
  op->descriptors = std::move(descriptors);
  pending_ += op->tensors.size();
  if (!submit([this, op] { start_receive(op); })) {
    pending_ -= op->tensors.size();
    std::lock_guard lock(mutex_);
    posted_.erase(key);
    throw closed_error("receive");
  }
}

std::shared_ptr<UcxChannel::Impl::ReceiveOp> UcxChannel::Impl::claim_receive(
    const ReceiveKey& key) {
  std::lock_guard lock(mutex_);
  check_connected(key.peer, "receive from");
  if (!posted_.insert(key).second)
    throw TransferError("ucx channel: a receive of " + to_string(key.transfer) + " from rank " +
                        std::to_string(key.peer) + " is already posted");
  if (spare_receives_.empty()) return std::make_shared<ReceiveOp>();
  std::shared_ptr<ReceiveOp> op = std::move(spare_receives_.back());
  spare_receives_.pop_back();
  return op;
}

void UcxChannel::Impl::cancel_receive(int peer, const TransferKey& transfer) {
  call_on_thread([this, key = ReceiveKey{peer, transfer}] {
    auto it = receives_.find(key);
    if (it == receives_.end()) return;
    finish(it->second.get(), nothing_arrived(*it->second));
    deliver_completions();
  });
}

void UcxChannel::Impl::cancel_all() {
  call_on_thread([this] {
    std::vector<ReceiveOp*> ops;
    for (auto& [key, op] : receives_) ops.push_back(op.get());
    for (ReceiveOp* op : ops)
      finish(op, "ucx channel: the receive of " + to_string(op->key.transfer) + " from rank " +
                     std::to_string(op->key.peer) + " was cancelled");
    discard_unexpected();
    deliver_completions();
  });
}

void UcxChannel::Impl::cancel_stream(uint32_t stream) {
  call_on_thread([this, stream] {
    std::vector<ReceiveOp*> ops;
    for (auto& [key, op] : receives_)
      if (key.transfer.stream == stream) ops.push_back(op.get());
    for (ReceiveOp* op : ops)
      finish(op, "ucx channel: the receive of " + to_string(op->key.transfer) + " from rank " +
                     std::to_string(op->key.peer) + " was cancelled");
    deliver_completions();
  });
}

void UcxChannel::Impl::drop_peer(int peer, const std::string& why) {
  if (peer < 0 || peer >= world_size_ || peer == rank_) return;
  enqueue([this, peer, why] { fail_peer(peer, "ucx channel: " + why); });
}

// -- caller side: messages -----------------------------------------------------------------------

void UcxChannel::Impl::send_message(int peer, uint32_t stream, std::string bytes) {
  check_peer(peer, "send a message to");
  auto* op = new MessageOp{{static_cast<uint32_t>(rank_), stream}, std::move(bytes)};
  const bool queued = submit([this, peer, op] {
    ucp_request_param_t param{};
    param.op_attr_mask =
        UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_AM_SEND_FLAG_EAGER;  // small: the handler gets the bytes at once
    param.cb.send = &Impl::message_sent;
    param.user_data = op;
    ucs_status_ptr_t request =
        ucp_am_send_nbx(endpoints_[peer], kMessageId, op->header, sizeof op->header,
                        op->bytes.data(), op->bytes.size(), &param);
    if (UCS_PTR_IS_ERR(request)) {
      mark_failed(peer, "ucx channel: sending a message to rank " + std::to_string(peer) +
                            " failed (" + status_text(UCS_PTR_STATUS(request)) + ")");
      delete op;
    } else if (request == nullptr) {
      delete op;  // sent at once
    }
  });
  if (!queued) {
    delete op;
    throw closed_error("send a message");
  }
  // A message ends a hand-off (the tensors were queued just before it): give the core to the
  // progress thread now, so the bytes leave before the caller's next computation rather than
  // when the scheduler next looks (measured: hand-offs of 1 to 4 ms shrank to ~100 us on a
  // two-core machine whose ranks compute on both cores).
  std::this_thread::yield();
}

void UcxChannel::Impl::message_sent(void* request, ucs_status_t /*status*/, void* user_data) {
  delete static_cast<MessageOp*>(user_data);
  ucp_request_free(request);
}

void UcxChannel::Impl::set_message_handler(uint32_t stream, MessageHandler handler) {
  if (handler) {
    std::lock_guard lock(mutex_);
    handlers_[stream] = std::move(handler);
    return;
  }
  // Handlers run on the progress thread: removing it there means that, once this returns, no
  // call of the old handler is still running (its owner may go away now).
  call_on_thread([this, stream] {
    std::lock_guard lock(mutex_);
    handlers_.erase(stream);
  });
}

// -- UcxChannel -----------------------------------------------------------------------------------

UcxChannel::UcxChannel(int rank, int world_size, UcxChannelOptions options) {
  if (world_size < 1 || rank < 0 || rank >= world_size)
    throw TransferError("ucx channel: rank " + std::to_string(rank) + " is not one of " +
                        std::to_string(world_size) + " ranks");
  impl_ = std::make_unique<Impl>(rank, world_size, options.transports);
}

UcxChannel::~UcxChannel() = default;

std::vector<uint8_t> UcxChannel::address() const { return impl_->address_; }

void UcxChannel::connect(const std::vector<std::vector<uint8_t>>& addresses,
                         const std::vector<bool>& same_host) {
  impl_->connect(addresses, same_host);
}

int UcxChannel::rank() const { return impl_->rank_; }

int UcxChannel::world_size() const { return impl_->world_size_; }

std::vector<TensorDescriptor> UcxChannel::send(int peer, const TransferKey& transfer,
                                               std::vector<Tensor> tensors) {
  return impl_->send(peer, transfer, std::move(tensors));
}

void UcxChannel::post_receive(int peer, const TransferKey& transfer,
                              std::vector<TensorDescriptor> descriptors, Device device,
                              std::chrono::milliseconds timeout, ReceiveDone done) {
  impl_->post_receive(peer, transfer, std::move(descriptors), device, timeout, std::move(done));
}

size_t UcxChannel::pending() const { return impl_->pending_.load(); }

void UcxChannel::cancel_receive(int peer, const TransferKey& transfer) {
  impl_->cancel_receive(peer, transfer);
}

void UcxChannel::cancel_all() { impl_->cancel_all(); }

void UcxChannel::cancel_stream(uint32_t stream) { impl_->cancel_stream(stream); }

void UcxChannel::drop_peer(int peer, const std::string& why) { impl_->drop_peer(peer, why); }

void UcxChannel::send_message(int peer, uint32_t stream, std::string bytes) {
  impl_->send_message(peer, stream, std::move(bytes));
}

void UcxChannel::set_message_handler(uint32_t stream, MessageHandler handler) {
  impl_->set_message_handler(stream, std::move(handler));
}

}  // namespace tensorplay::transport
