// The UCX channel's implementation (private to transport/): the progress thread's state and
// the operations callers hand it. ucx_channel.cpp holds the caller side, ucx_progress.cpp the
// progress thread.
#pragma once

#include <ucp/api/ucp.h>
#include <unistd.h>

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

#include "tensorplay/base/compute_activity.h"
#include "tensorplay/base/knobs.h"
#include "tensorplay/core/cpu_threads.h"
#include "tensorplay/transport/transport_knobs.h"
#include "tensorplay/transport/ucx_channel.h"

namespace tensorplay::transport {

// -- helpers of the two implementation files
// --------------------------------------------------------

using Clock = std::chrono::steady_clock;

constexpr unsigned kMessageId = 1;  // the active-message id of send_message

// Bounded waits: the destructor and callers waiting on the progress thread never hang.
constexpr auto kSendDrainTime = std::chrono::seconds(1);     // sends still in flight at close
constexpr auto kCloseTime = std::chrono::milliseconds(500);  // endpoint flushes at close
constexpr auto kCallTime = std::chrono::seconds(10);         // a caller waiting on the thread
constexpr auto kTightSpin = std::chrono::microseconds(10);   // polls without yielding
constexpr int kMaxSleepMs = 50;             // longest sleep before deadlines are looked at again
constexpr unsigned kTurnsPerClockRead = 8;  // a clock read costs about what an idle turn does
constexpr size_t kSpareReceives = 64;       // finished receive operations kept for reuse

inline std::string status_text(ucs_status_t status) { return ucs_status_string(status); }

inline void check(ucs_status_t status, const std::string& what) {
  if (status != UCS_OK)
    throw TransferError("ucx channel: " + what + " failed: " + status_text(status));
}

inline std::string tensor_of(size_t index, const TransferKey& key, int peer) {
  return "tensor " + std::to_string(index) + " of " + to_string(key) + " from rank " +
         std::to_string(peer);
}

// How long the progress thread polls after activity before it sleeps on the event fd.
constexpr auto kDefaultSpin = std::chrono::microseconds(200);

// The thread's budget (docs/performance.md). TENSORPLAY_UCX_SPIN_US set: a fixed spin after
// activity. Unset, with a core to spare (cores_per_rank() >= 2): kDefaultSpin after activity, and
// on as long as a rank of this process is in a step with no action running (it waits for another
// rank's output, whose hand-off a poll shortens). Unset, on a rank of one core (the host's ranks
// fill its cores): no poll at all while a rank of this process is in a step or a thread of it
// computes: every core then belongs to a compute thread (this rank's or another's), a poll runs
// only by taking it, and a polling thread that loses its core waits in the run queue where a
// sleeping one is woken at once. Outside steps (setup, a channel alone) it keeps kDefaultSpin.
struct SpinPolicy {
  std::chrono::microseconds spin;
  bool sleep_while_busy = false;    // sleep at once while ranks_in_step() or threads_computing()
  bool spin_while_waiting = false;  // keep polling while ranks_in_step() > 0, nothing computing
};

inline SpinPolicy spin_policy() {
  if (knob_is_set(kUcxSpinUsKnob))
    return {std::chrono::microseconds(knob_int(kUcxSpinUsKnob)), false, false};
  const bool core_to_spare = cores_per_rank() >= 2;
  return {kDefaultSpin, !core_to_spare, core_to_spare};
}

// UCX 1.13 reports a dead peer only on transports that detect it (tcp, cma), so with peer error
// handling two ranks on one host talk over loopback TCP instead of shared memory. By default a
// peer on this host gets no error handling (shared memory; the runtime's heartbeats and
// timeouts notice a dead one) and a peer on another host gets it. TENSORPLAY_UCX_ERROR_MODE
// (`peer` or `none`) forces one mode for every peer.
inline std::optional<ucp_err_handling_mode_t> forced_error_mode() {
  const std::string mode = knob_string(kUcxErrorModeKnob);
  if (mode == "peer") return UCP_ERR_HANDLING_MODE_PEER;
  if (mode == "none") return UCP_ERR_HANDLING_MODE_NONE;
  return std::nullopt;
}

struct ReceiveKey {
  int peer = 0;
  TransferKey transfer;
  bool operator==(const ReceiveKey&) const = default;
};

struct ReceiveKeyHash {
  size_t operator()(const ReceiveKey& k) const {
    return TransferKeyHash()(k.transfer) * 1000003u + static_cast<size_t>(k.peer);
  }
};

// -- the implementation
// ----------------------------------------------------------------------------

class UcxChannel::Impl {
 public:
  /// `transports`: UCX_TLS for this channel's context (empty: UCX's own choice).
  Impl(int rank, int world_size, const std::string& transports);
  ~Impl();

  /// Stops the progress thread and destroys the worker and context; idempotent. Called, with the
  /// live channels' lock held, by the destructor and, for channels still alive then, at process
  /// exit (see ucx_channel.cpp).
  void close();

  // Caller side (any thread).
  void connect(const std::vector<std::vector<uint8_t>>& addresses,
               const std::vector<bool>& same_host);
  std::vector<TensorDescriptor> send(int peer, const TransferKey& transfer,
                                     std::vector<Tensor> tensors);
  void post_receive(int peer, const TransferKey& transfer,
                    std::vector<TensorDescriptor> descriptors, Device device,
                    std::chrono::milliseconds timeout, ReceiveDone done);
  void cancel_receive(int peer, const TransferKey& transfer);
  void cancel_all();
  void cancel_stream(uint32_t stream);
  void drop_peer(int peer, const std::string& why);
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
    TransferKey transfer;
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

    /// `op` reset for reuse: no tensors, callback or progress, its vectors' capacity kept.
    static ReceiveOp emptied(ReceiveOp&& op) {
      ReceiveOp out;
      out.descriptors = std::move(op.descriptors);
      out.tensors = std::move(op.tensors);
      out.pieces = std::move(op.pieces);
      out.descriptors.clear();
      out.tensors.clear();
      out.pieces.clear();
      return out;
    }
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

  // -- channels alive in this process, closed at exit (ucx_channel.cpp) --------------------------

  struct LiveChannels;
  static LiveChannels& live_channels();
  static void close_live_channels();  // the atexit handler

  // -- caller side --------------------------------------------------------------------------------

  void check_peer(int peer, const char* verb) const;
  /// The checks of check_peer() that need no lock: a rank of the world, not this one.
  void check_rank(int peer, const char* verb) const;
  /// The checks of check_peer() that read shared state. Call with mutex_ held.
  void check_connected(int peer, const char* verb) const;
  /// Throws when the channel was closed at process exit. Call with mutex_ held.
  void check_open(const char* verb) const;
  TransferError closed_error(const char* verb) const;
  /// Hands `operation` to the progress thread; false (and dropped) once the channel is closed.
  bool enqueue(std::function<void()> operation);
  /// enqueue(), without wrapping `operation` in a std::function when it can run at once (on the
  /// progress thread, outside UCX's callbacks: a receive callback answering with a send).
  template <typename F>
  bool submit(F&& operation) {
    if (std::this_thread::get_id() == thread_id_ && !in_ucx_callback_) {
      operation();
      return true;
    }
    return enqueue(std::forward<F>(operation));
  }
  /// Runs `operation` on the progress thread and waits for it (inline when already there); does
  /// nothing once the channel is closed (nothing is pending then, and no handler runs again).
  void call_on_thread(std::function<void()> operation);

  /// Registers the receive of `key` (an error when one is posted already, or the peer cannot be
  /// received from) and hands out an operation to fill: a spare one when there is one.
  std::shared_ptr<ReceiveOp> claim_receive(const ReceiveKey& key);

  // -- progress thread ----------------------------------------------------------------------------

  void run();
  void create_worker();
  bool run_queued();
  void sleep_until_event(Clock::time_point now);
  void sweep();
  /// Hands finished receive operations UCX is done with to spare_receives_ (or drops them).
  void recycle_receives();
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
  /// Fails every receive from `peer` with `why` and force-closes its endpoint (its sends end).
  void fail_peer(int peer, const std::string& why);

  // -- state shared with callers (under mutex_) ---------------------------------------------------

  mutable std::mutex mutex_;
  std::vector<std::function<void()>> queue_;
  std::vector<PeerState> peers_;
  std::unordered_set<ReceiveKey, ReceiveKeyHash> posted_;  // receives not completed
  // Finished receive operations handed out again by claim_receive(): their vectors keep their
  // capacity, so posting a receive allocates nothing but its buffers (at most kSpareReceives).
  std::vector<std::shared_ptr<ReceiveOp>> spare_receives_;
  std::unordered_map<uint32_t, MessageHandler> handlers_;  // by stream
  bool connected_ = false;
  bool closed_ = false;              // set by close() (under both locks) once the thread is joined
  std::atomic<bool> queued_{false};  // queue_ is not empty
  std::atomic<bool> sleeping_{false};  // the thread is (about to be) blocked in poll
  std::atomic<bool> stop_{false};

  // -- progress thread only (the constructor and destructor, before and after it)
  // ------------------

  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int event_fd_ = -1;
  const SpinPolicy spin_ = spin_policy();
  const std::optional<ucp_err_handling_mode_t> forced_error_mode_ = forced_error_mode();
  std::vector<ucp_ep_h> endpoints_;
  std::vector<PeerArg> peer_args_;
  bool in_ucx_callback_ = false;  // inside a handler UCX called from ucp_worker_progress
  std::vector<std::pair<int, ucs_status_t>> failed_peers_;  // reported by UCX, not yet handled
  std::unordered_map<SendOp*, std::shared_ptr<SendOp>> sends_;
  std::unordered_map<ReceiveKey, std::shared_ptr<ReceiveOp>, ReceiveKeyHash> receives_;
  std::multimap<Clock::time_point, ReceiveOp*> deadlines_;
  std::vector<std::shared_ptr<ReceiveOp>> retired_;  // finished, not yet recycled
  std::vector<Completion> completions_;              // to deliver outside UCX callbacks
  std::vector<Completion> spare_completions_;        // an empty buffer that keeps its capacity
  std::vector<std::function<void()>> running_;       // operations taken from queue_
  std::vector<std::unique_ptr<Discard>> discards_;   // messages nobody will receive
  std::thread thread_;
  std::thread::id thread_id_;         // thread_'s, kept apart: close() may join thread_ meanwhile
  const pid_t owner_pid_ = getpid();  // a forked child's copy has no progress thread to stop
};

}  // namespace tensorplay::transport
