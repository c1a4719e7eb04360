// UcxChannel: one progress thread owns the UCX worker (created in single-thread mode); callers
// hand it operations through a queue and wake it with ucp_worker_signal. Each tensor of a
// transfer travels as one UCP tag message; undefined and zero-byte tensors travel as nothing.
// Small messages (send_message) travel as UCX active messages handled on the progress thread.
//
// UCX tag of tensor `index` of a transfer (64 bits). UCX matches a receive by tag alone, never by
// source, so the receiving stage and the direction stand in for the sender: a stage receives
// forward values from one neighbour and gradients from the other. Tags are unique per (stream,
// stage, direction, microbatch, index) within a window of 4096 steps, for 16 schedules sharing
// the channel at once:
//   bits 63..60  stream modulo 16      (the schedule)
//   bits 59..48  step modulo 2^12
//   bits 47..36  receiving stage      (< 4096)
//   bit  35      direction            (1: backward)
//   bits 34..15  microbatch           (< 2^20)
//   bits 14..0   tensor index         (< 2^15)
#include "transport/ucx_channel.h"

#include <poll.h>
#include <ucp/api/ucp.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <unordered_set>

namespace tensorplay::transport {
namespace {

using Clock = std::chrono::steady_clock;

constexpr unsigned kMessageId = 1;  // the active-message id of send_message
constexpr int kStreamBits = 4;      // the low bits of the schedule's stream
constexpr int kStepBits = 12;
constexpr int kStageBits = 12;
constexpr int kMicrobatchBits = 20;
constexpr int kIndexBits = 15;
static_assert(kStreamBits + kStepBits + kStageBits + 1 + kMicrobatchBits + kIndexBits == 64);

// Bounded waits: the destructor and callers waiting on the progress thread never hang.
constexpr auto kSendDrainTime = std::chrono::seconds(1);     // sends still in flight at close
constexpr auto kCloseTime = std::chrono::milliseconds(500);  // endpoint flushes at close
constexpr auto kCallTime = std::chrono::seconds(10);         // a caller waiting on the thread
constexpr auto kTightSpin = std::chrono::microseconds(10);   // polls without yielding
constexpr int kMaxSleepMs = 50;  // longest sleep before deadlines are looked at again

std::string status_text(ucs_status_t status) { return ucs_status_string(status); }

void check(ucs_status_t status, const std::string& what) {
  if (status != UCS_OK)
    throw TransferError("ucx channel: " + what + " failed: " + status_text(status));
}

std::string tensor_of(size_t index, const TransferTag& tag, int peer) {
  return "tensor " + std::to_string(index) + " of " + to_string(tag) + " from rank " +
         std::to_string(peer);
}

std::chrono::microseconds spin_time() {
  const char* text = std::getenv("TENSORPLAY_UCX_SPIN_US");
  return std::chrono::microseconds(text ? std::strtol(text, nullptr, 10) : 200);
}

// UCX 1.13 reports a dead peer only on transports that detect it (tcp, cma), so with peer error
// handling two ranks on one host talk over loopback TCP instead of shared memory. By default a
// peer on this host gets no error handling (shared memory; the runtime's heartbeats and
// timeouts notice a dead one) and a peer on another host gets it. TENSORPLAY_UCX_ERROR_MODE
// (`peer` or `none`) forces one mode for every peer.
std::optional<ucp_err_handling_mode_t> forced_error_mode() {
  const char* text = std::getenv("TENSORPLAY_UCX_ERROR_MODE");
  if (text == nullptr || std::string(text) == "auto") return std::nullopt;
  if (std::string(text) == "peer") return UCP_ERR_HANDLING_MODE_PEER;
  if (std::string(text) == "none") return UCP_ERR_HANDLING_MODE_NONE;
  throw TransferError("ucx channel: TENSORPLAY_UCX_ERROR_MODE is '" + std::string(text) +
                      "'; use auto, peer or none");
}

struct ReceiveKey {
  int peer = 0;
  TransferTag tag;
  bool operator==(const ReceiveKey&) const = default;
};

struct ReceiveKeyHash {
  size_t operator()(const ReceiveKey& k) const {
    return std::hash<uint64_t>()(k.tag.key() * 1000003u + static_cast<uint64_t>(k.peer));
  }
};

}  // namespace

uint64_t UcxChannel::ucx_tag(const TransferTag& tag, size_t index) {
  auto fits = [](int64_t value, int bits) { return value >= 0 && value < (int64_t{1} << bits); };
  if (!fits(tag.stage, kStageBits))
    throw TransferError("ucx channel: stage " + std::to_string(tag.stage) + " of " +
                        to_string(tag) + " does not fit a UCX tag (stages 0 to 4095)");
  if (!fits(tag.microbatch, kMicrobatchBits))
    throw TransferError("ucx channel: microbatch " + std::to_string(tag.microbatch) + " of " +
                        to_string(tag) + " does not fit a UCX tag (microbatches 0 to 2^20-1)");
  if (index >= (size_t{1} << kIndexBits))
    throw TransferError("ucx channel: " + to_string(tag) + " has more than 32768 tensors");
  const uint64_t stream = tag.stream & ((uint64_t{1} << kStreamBits) - 1);
  const uint64_t step = tag.step & ((uint64_t{1} << kStepBits) - 1);
  const uint64_t backward = tag.direction == Direction::Backward ? 1 : 0;
  return stream << 60 | step << 48 | static_cast<uint64_t>(tag.stage) << 36 | backward << 35 |
         static_cast<uint64_t>(tag.microbatch) << 15 | index;
}

// -- the implementation ---------------------------------------------------------------------------

class UcxChannel::Impl {
 public:
  Impl(int rank, int world_size);
  ~Impl();

  // Caller side (any thread).
  void connect(const std::vector<std::vector<uint8_t>>& addresses,
               const std::vector<bool>& same_host);
  std::vector<TensorDescriptor> send(int peer, const TransferTag& tag, std::vector<Tensor> tensors);
  void post_receive(int peer, const TransferTag& tag, std::vector<TensorDescriptor> descriptors,
                    Device device, std::chrono::milliseconds timeout, ReceiveDone done);
  void cancel_receive(int peer, const TransferTag& tag);
  void cancel_all();
  void send_message(int peer, uint32_t stream, std::string bytes);
  void set_message_handler(uint32_t stream, MessageHandler handler);

  const int rank_;
  const int world_size_;
  std::vector<uint8_t> address_;
  std::atomic<size_t> pending_{0};

 private:
  // -- member types -------------------------------------------------------------------------------

  struct SendOp;
  struct SendPiece {
    SendOp* op = nullptr;
    Tensor tensor;  // host memory, kept alive until UCX is done with it
    uint64_t ucx_tag = 0;
  };
  struct SendOp {
    Impl* impl = nullptr;
    int peer = 0;
    TransferTag tag;
    std::vector<SendPiece> pieces;
    size_t outstanding = 0;  // UCX requests not completed, plus one while posting
  };

  struct ReceiveOp;
  struct ReceivePiece {
    ReceiveOp* op = nullptr;
    size_t index = 0;  // position in the transfer
    uint64_t ucx_tag = 0;
    void* request = nullptr;  // UCX request while in flight
    bool called_back = false;
  };
  struct ReceiveOp {
    Impl* impl = nullptr;
    ReceiveKey key;
    std::vector<TensorDescriptor> descriptors;
    std::vector<Tensor> tensors;  // host tensors the pieces land in
    std::vector<ReceivePiece> pieces;
    Device device;
    std::chrono::milliseconds timeout{0};
    ReceiveDone done;
    size_t outstanding = 0;  // UCX requests not completed: the buffers must outlive them
    size_t received = 0;     // pieces that arrived whole
    bool finished = false;   // `done` is scheduled
    std::multimap<Clock::time_point, ReceiveOp*>::iterator deadline;
  };

  struct Completion {
    ReceiveDone done;
    std::vector<Tensor> tensors;
    std::string error;
    Device device;
  };

  struct Discard {
    std::unique_ptr<uint8_t[]> buffer;
    bool done = false;
  };

  struct PeerState {
    bool connected = false;
    std::string failure;  // why the connection broke, empty while healthy
  };

  struct PeerArg {
    Impl* impl = nullptr;
    int rank = 0;
  };

  // -- caller side --------------------------------------------------------------------------------

  void check_peer(int peer, const char* verb) const;
  void enqueue(std::function<void()> operation);
  /// Runs `operation` on the progress thread and waits for it (inline when already there).
  void call_on_thread(std::function<void()> operation);

  // -- progress thread ----------------------------------------------------------------------------

  void run();
  void create_worker();
  bool run_queued();
  void sleep_until_event(Clock::time_point now);
  void sweep();
  void shut_down();
  void progress_for(Clock::duration limit, const std::function<bool()>& finished);

  void start_send(const std::shared_ptr<SendOp>& op);
  void piece_sent(SendOp* op, ucs_status_t status);
  void release(SendOp* op);
  static void on_sent(void* request, ucs_status_t status, void* user_data);

  void start_receive(const std::shared_ptr<ReceiveOp>& op);
  void piece_received(ReceivePiece& piece, ucs_status_t status, size_t length);
  static void on_received(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info,
                          void* user_data);
  void finish(ReceiveOp* op, std::string error);
  std::string nothing_arrived(const ReceiveOp& op) const;
  void expire(Clock::time_point now);
  bool deliver_completions();
  void discard_unexpected();

  static void on_endpoint_error(void* arg, ucp_ep_h ep, ucs_status_t status);
  static ucs_status_t on_message(void* arg, const void* header, size_t header_length, void* data,
                                 size_t length, const ucp_am_recv_param_t* param);
  static void message_sent(void* request, ucs_status_t status, void* user_data);
  /// A message in flight: header (sender rank, stream) and bytes live until UCX is done.
  struct MessageOp {
    uint32_t header[2] = {0, 0};
    std::string bytes;
  };
  void handle_failed_peers();
  void mark_failed(int peer, const std::string& why);

  // -- state shared with callers (under mutex_) ---------------------------------------------------

  mutable std::mutex mutex_;
  std::vector<std::function<void()>> queue_;
  std::vector<PeerState> peers_;
  std::unordered_set<ReceiveKey, ReceiveKeyHash> posted_;  // receives not completed
  std::unordered_map<uint32_t, MessageHandler> handlers_;  // by stream
  bool connected_ = false;
  std::atomic<bool> queued_{false};    // queue_ is not empty
  std::atomic<bool> sleeping_{false};  // the thread is (about to be) blocked in poll
  std::atomic<bool> stop_{false};

  // -- progress thread only (the constructor and destructor, before and after it)
  // ------------------

  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int event_fd_ = -1;
  const std::chrono::microseconds spin_ = spin_time();
  const std::optional<ucp_err_handling_mode_t> forced_error_mode_ = forced_error_mode();
  std::vector<ucp_ep_h> endpoints_;
  std::vector<PeerArg> peer_args_;
  bool in_ucx_callback_ = false;  // inside a handler UCX called from ucp_worker_progress
  std::vector<std::pair<int, ucs_status_t>> failed_peers_;  // reported by UCX, not yet handled
  std::unordered_map<SendOp*, std::shared_ptr<SendOp>> sends_;
  std::unordered_map<ReceiveKey, std::shared_ptr<ReceiveOp>, ReceiveKeyHash> receives_;
  std::multimap<Clock::time_point, ReceiveOp*> deadlines_;
  std::vector<std::shared_ptr<ReceiveOp>> retired_;  // finished, UCX requests outstanding
  std::vector<Completion> completions_;              // to deliver outside UCX callbacks
  std::vector<std::function<void()>> running_;       // operations taken from queue_
  std::vector<std::unique_ptr<Discard>> discards_;   // messages nobody will receive
  std::thread thread_;
};

UcxChannel::Impl::Impl(int rank, int world_size)
    : rank_(rank), world_size_(world_size), peers_(world_size), peer_args_(world_size) {
  for (int r = 0; r < world_size; ++r) peer_args_[r] = {this, r};
  endpoints_.assign(world_size, nullptr);

  ucp_config_t* config = nullptr;
  check(ucp_config_read(nullptr, nullptr, &config), "reading the UCX configuration");
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED |
                      UCP_PARAM_FIELD_ESTIMATED_NUM_EPS;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
  params.mt_workers_shared = 0;
  params.estimated_num_eps = static_cast<size_t>(world_size);
  ucs_status_t status = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  check(status, "ucp_init");
  try {
    create_worker();
  } catch (...) {
    ucp_cleanup(context_);
    throw;
  }
  // From here on only the progress thread touches the worker, until it is joined.
  thread_ = std::thread([this] { run(); });
}

UcxChannel::Impl::~Impl() {
  stop_.store(true);
  queued_.store(true);  // ends a spin at once
  ucp_worker_signal(worker_);
  thread_.join();
  ucp_worker_destroy(worker_);
  ucp_cleanup(context_);
}

// -- caller side ----------------------------------------------------------------------------------

void UcxChannel::Impl::check_peer(int peer, const char* verb) const {
  if (peer < 0 || peer >= world_size_)
    throw TransferError("ucx channel: cannot " + std::string(verb) + " rank " +
                        std::to_string(peer) + ": ranks are 0 to " +
                        std::to_string(world_size_ - 1));
  if (peer == rank_)
    throw TransferError("ucx channel: rank " + std::to_string(rank_) + " cannot " + verb +
                        " itself (use the local channel inside one process)");
  std::lock_guard lock(mutex_);
  if (!peers_[peer].connected)
    throw TransferError("ucx channel: cannot " + std::string(verb) + " rank " +
                        std::to_string(peer) + ": it is not connected (call connect() with " +
                        "its address first)");
  if (!peers_[peer].failure.empty())
    throw TransferError(peers_[peer].failure + "; cannot " + verb + " it");
}

void UcxChannel::Impl::enqueue(std::function<void()> operation) {
  // On the progress thread, outside UCX's own callbacks (a receive callback answering with a
  // send, say), the operation runs at once: no queue, no extra turn of the loop.
  if (!in_ucx_callback_ && std::this_thread::get_id() == thread_.get_id()) {
    operation();
    return;
  }
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(operation));
    queued_.store(true);
  }
  // The thread sets sleeping_ before it checks queued_ and arms: one of the two sides sees the
  // other's store, so either the thread finds the operation or the signal wakes it.
  if (sleeping_.load()) ucp_worker_signal(worker_);
}

void UcxChannel::Impl::call_on_thread(std::function<void()> operation) {
  if (std::this_thread::get_id() == thread_.get_id()) {
    operation();
    return;
  }
  auto task = std::make_shared<std::packaged_task<void()>>(std::move(operation));
  auto result = task->get_future();
  enqueue([task] { (*task)(); });
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

std::vector<TensorDescriptor> UcxChannel::Impl::send(int peer, const TransferTag& tag,
                                                     std::vector<Tensor> tensors) {
  check_peer(peer, "send to");
  if (!tensors.empty()) UcxChannel::ucx_tag(tag, tensors.size() - 1);  // throws when it cannot fit
  std::vector<TensorDescriptor> descriptors;
  descriptors.reserve(tensors.size());
  auto op = std::make_shared<SendOp>();
  op->impl = this;
  op->peer = peer;
  op->tag = tag;
  for (size_t i = 0; i < tensors.size(); ++i) {
    descriptors.push_back(describe(tensors[i]));
    if (!tensors[i].defined() || tensors[i].nbytes() == 0) continue;
    // UCX here has no CUDA transport: device tensors leave from a host copy.
    Tensor host = tensors[i].is_cuda() ? tensors[i].to(cpu()) : std::move(tensors[i]);
    op->pieces.push_back({op.get(), std::move(host), UcxChannel::ucx_tag(tag, i)});
  }
  if (op->pieces.empty()) return descriptors;
  pending_ += op->pieces.size();
  enqueue([this, op] { start_send(op); });
  return descriptors;
}

void UcxChannel::Impl::post_receive(int peer, const TransferTag& tag,
                                    std::vector<TensorDescriptor> descriptors, Device device,
                                    std::chrono::milliseconds timeout, ReceiveDone done) {
  check_peer(peer, "receive from");
  if (!descriptors.empty()) UcxChannel::ucx_tag(tag, descriptors.size() - 1);
  auto op = std::make_shared<ReceiveOp>();
  op->impl = this;
  op->key = {peer, tag};
  op->device = device;
  op->timeout = timeout;
  op->done = std::move(done);
  for (size_t i = 0; i < descriptors.size(); ++i) {
    const TensorDescriptor& d = descriptors[i];
    if (!d.defined) {
      op->tensors.emplace_back();
      continue;
    }
    const uint64_t expected = static_cast<uint64_t>(numel(d.shape)) * element_size(d.dtype);
    if (d.bytes != expected)
      throw TransferError("ucx channel: descriptor " + std::to_string(i) + " of " + to_string(tag) +
                          " from rank " + std::to_string(peer) + " says " +
                          std::to_string(d.bytes) + " bytes, but its shape and dtype hold " +
                          std::to_string(expected));
    // The host caching allocator hands back blocks of earlier steps: no fresh pages to fault in.
    op->tensors.push_back(empty(d.shape, {.dtype = d.dtype, .device = cpu()}));
    if (d.bytes > 0) op->pieces.push_back({op.get(), i, UcxChannel::ucx_tag(tag, i)});
  }
  op->descriptors = std::move(descriptors);
  {
    std::lock_guard lock(mutex_);
    if (!posted_.insert(op->key).second)
      throw TransferError("ucx channel: a receive of " + to_string(tag) + " from rank " +
                          std::to_string(peer) + " is already posted");
  }
  pending_ += op->tensors.size();
  enqueue([this, op] { start_receive(op); });
}

void UcxChannel::Impl::cancel_receive(int peer, const TransferTag& tag) {
  call_on_thread([this, key = ReceiveKey{peer, tag}] {
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
      finish(op, "ucx channel: the receive of " + to_string(op->key.tag) + " from rank " +
                     std::to_string(op->key.peer) + " was cancelled");
    discard_unexpected();
    deliver_completions();
  });
}

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
  Clock::time_point last_busy = Clock::now();
  while (!stop_.load()) {
    bool busy = run_queued();
    while (ucp_worker_progress(worker_) != 0) busy = true;
    if (!failed_peers_.empty()) handle_failed_peers();
    const Clock::time_point now = Clock::now();
    if (!deadlines_.empty() && deadlines_.begin()->first <= now) expire(now);
    sweep();
    busy |= deliver_completions();
    if (busy) {
      last_busy = now;
    } else if (now - last_busy < spin_) {
      // Spin a little after any activity: the next message, or the caller's next operation,
      // usually follows within microseconds. Poll without pause for the first few microseconds
      // (a reply's round trip), then yield between polls so that a caller just woken by a
      // callback, or the other rank on a two-core machine, is not kept off the core.
      if (now - last_busy > kTightSpin) std::this_thread::yield();
    } else {
      sleep_until_event(now);  // spinning longer would take a core from the ranks' compute
    }
  }
  shut_down();
}

void UcxChannel::Impl::sweep() {
  if (!retired_.empty())
    std::erase_if(retired_, [](const auto& op) { return op->outstanding == 0; });
  if (!discards_.empty()) std::erase_if(discards_, [](const auto& d) { return d->done; });
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
    finish(op, "ucx channel: the channel was closed while receiving " + to_string(op->key.tag) +
                   " from rank " + std::to_string(op->key.peer));
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
  sends_.emplace(op.get(), op);
  op->outstanding = 1;  // held while posting
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
  release(op.get());  // the posting hold
}

void UcxChannel::Impl::on_sent(void* request, ucs_status_t status, void* user_data) {
  ucp_request_free(request);
  auto* op = static_cast<SendOp*>(user_data);
  op->impl->piece_sent(op, status);
}

void UcxChannel::Impl::piece_sent(SendOp* op, ucs_status_t status) {
  --pending_;
  if (status != UCS_OK && status != UCS_ERR_CANCELED)
    mark_failed(op->peer, "ucx channel: sending " + to_string(op->tag) + " to rank " +
                              std::to_string(op->peer) + " failed (" + status_text(status) + ")");
  release(op);
}

void UcxChannel::Impl::release(SendOp* op) {
  if (--op->outstanding == 0) sends_.erase(op);  // drops the tensors
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
    finish(raw, failure + " before " + to_string(op->key.tag) + " arrived");
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
  const std::string what = tensor_of(piece.index, op->key.tag, op->key.peer);
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
    return "ucx channel: nothing arrived for " + to_string(op.key.tag) + from + within;
  return "ucx channel: only " + std::to_string(op.received) + " of " +
         std::to_string(op.pieces.size()) + " tensors of " + to_string(op.key.tag) + " arrived" +
         from + within;
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
  {
    std::lock_guard lock(mutex_);
    posted_.erase(op->key);
  }
  completions_.push_back({std::move(op->done),
                          error.empty() ? std::move(op->tensors) : std::vector<Tensor>{},
                          std::move(error), op->device});
  if (op->outstanding > 0) retired_.push_back(std::move(node.mapped()));
}

void UcxChannel::Impl::expire(Clock::time_point now) {
  while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
    ReceiveOp* op = deadlines_.begin()->second;
    finish(op, nothing_arrived(*op));
  }
}

bool UcxChannel::Impl::deliver_completions() {
  if (completions_.empty()) return false;
  std::vector<Completion> ready;
  ready.swap(completions_);  // callbacks may post more work, which lands in completions_ again
  for (Completion& c : ready) {
    if (c.error.empty() && c.device.is_cuda()) {
      try {
        for (Tensor& t : c.tensors)
          if (t.defined()) t = t.to(c.device);  // staged through host memory
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

// -- progress thread: broken connections ----------------------------------------------------------

void UcxChannel::Impl::send_message(int peer, uint32_t stream, std::string bytes) {
  check_peer(peer, "send a message to");
  auto* op = new MessageOp{{static_cast<uint32_t>(rank_), stream}, std::move(bytes)};
  enqueue([this, peer, op] {
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
  for (auto [peer, status] : failed) {
    const std::string why = "ucx channel: the connection to rank " + std::to_string(peer) +
                            " failed (" + status_text(status) + ")";
    mark_failed(peer, why);
    std::vector<ReceiveOp*> ops;
    for (auto& [key, op] : receives_)
      if (key.peer == peer) ops.push_back(op.get());
    for (ReceiveOp* op : ops) finish(op, why + " while receiving " + to_string(op->key.tag));
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
}

// -- UcxChannel -----------------------------------------------------------------------------------

UcxChannel::UcxChannel(int rank, int world_size) {
  if (world_size < 1 || rank < 0 || rank >= world_size)
    throw TransferError("ucx channel: rank " + std::to_string(rank) + " is not one of " +
                        std::to_string(world_size) + " ranks");
  impl_ = std::make_unique<Impl>(rank, world_size);
}

UcxChannel::~UcxChannel() = default;

std::vector<uint8_t> UcxChannel::address() const { return impl_->address_; }

void UcxChannel::connect(const std::vector<std::vector<uint8_t>>& addresses,
                         const std::vector<bool>& same_host) {
  impl_->connect(addresses, same_host);
}

int UcxChannel::rank() const { return impl_->rank_; }

int UcxChannel::world_size() const { return impl_->world_size_; }

std::vector<TensorDescriptor> UcxChannel::send(int peer, const TransferTag& tag,
                                               std::vector<Tensor> tensors) {
  return impl_->send(peer, tag, std::move(tensors));
}

void UcxChannel::post_receive(int peer, const TransferTag& tag,
                              std::vector<TensorDescriptor> descriptors, Device device,
                              std::chrono::milliseconds timeout, ReceiveDone done) {
  impl_->post_receive(peer, tag, std::move(descriptors), device, timeout, std::move(done));
}

size_t UcxChannel::pending() const { return impl_->pending_.load(); }

void UcxChannel::cancel_receive(int peer, const TransferTag& tag) {
  impl_->cancel_receive(peer, tag);
}

void UcxChannel::cancel_all() { impl_->cancel_all(); }

void UcxChannel::send_message(int peer, uint32_t stream, std::string bytes) {
  impl_->send_message(peer, stream, std::move(bytes));
}

void UcxChannel::set_message_handler(uint32_t stream, MessageHandler handler) {
  impl_->set_message_handler(stream, std::move(handler));
}

}  // namespace tensorplay::transport
