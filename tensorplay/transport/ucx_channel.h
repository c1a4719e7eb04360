// The UCX channel: tensors between processes (shared memory, CMA or TCP, as UCX chooses), one UCX
// tag message per tensor, driven by one progress thread that owns the UCX worker.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tensorplay/transport/channel.h"

namespace tensorplay::transport {

/// How a UcxChannel is made.
struct UcxChannelOptions {
  /// The UCX transports this channel may use, spelled as UCX_TLS spells them ("shm", "tcp",
  /// "posix,cma"); it overrides UCX_TLS for this channel only. Empty: UCX's own choice (UCX_TLS
  /// when set, else every transport).
  std::string transports;
};

/// Moves tensors between the ranks of a process group with UCX tag messages. Device tensors are
/// staged through host memory. A progress thread drives UCX: after any activity it polls for a
/// few tens of microseconds (yielding the core between polls), then sleeps on the worker's event
/// fd. UCX's own environment variables (UCX_TLS, UCX_NET_DEVICES, ...) apply, and:
///  - TENSORPLAY_UCX_SPIN_US: how long the thread polls before sleeping. Unset, with 2 cores or
///    more per rank (cores_per_rank()): 200, and on while a rank of the process waits in a step
///    (ranks_in_step(), threads_computing() 0). Unset, on a rank of one core: 200 outside steps
///    and no poll at all during one (a poll would take a core from a compute thread);
///  - TENSORPLAY_UCX_ERROR_MODE: `peer` reports a dead peer to the receives posted for it, but
///    UCX 1.13 then keeps to transports that detect one (loopback TCP between processes of one
///    host); `none` lets it use shared memory and CMA, and a dead peer is noticed only when a
///    receive times out (or by the runtime's heartbeats); `auto` (the default) is `none` for
///    peers on this host and `peer` for the others.
class UcxChannel final : public Channel {
 public:
  // -- construction -------------------------------------------------------------------------------

  /// A UCX context and worker for `rank` of `world_size` ranks; starts the progress thread.
  /// Throws TransferError when UCX cannot start with `options.transports` (one this host lacks).
  UcxChannel(int rank, int world_size, UcxChannelOptions options = {});
  /// Fails pending receives (their callbacks get errors), gives sends in flight a bounded time to
  /// leave, closes the endpoints and stops the progress thread.
  ~UcxChannel() override;
  UcxChannel(const UcxChannel&) = delete;
  UcxChannel& operator=(const UcxChannel&) = delete;

  // -- wiring -------------------------------------------------------------------------------------

  /// This worker's address, to give to the other ranks.
  std::vector<uint8_t> address() const;
  /// Creates endpoints to every other rank from their addresses (index = rank; the own entry and
  /// empty entries are skipped). Must be called once, before sending to or receiving from a peer.
  /// `same_host[r]` says rank r runs on this host (for the default error mode; absent: no).
  void connect(const std::vector<std::vector<uint8_t>>& addresses,
               const std::vector<bool>& same_host = {});
  /// This process's rank.
  int rank() const;
  /// Number of ranks.
  int world_size() const;

  // -- Channel ------------------------------------------------------------------------------------

  std::string name() const override { return "ucx"; }
  std::vector<TensorDescriptor> send(int peer, const TransferKey& key,
                                     std::vector<Tensor> tensors) override;
  /// As Channel::post_receive; `done` runs on the progress thread, where it may send and post
  /// receives but must not block: nothing moves on this channel while it runs.
  void post_receive(int peer, const TransferKey& key, std::vector<TensorDescriptor> descriptors,
                    Device device, std::chrono::milliseconds timeout, ReceiveDone done) override;
  /// Tensors of sends whose bytes have not left yet, plus tensors of receives not completed.
  size_t pending() const override;
  void cancel_receive(int peer, const TransferKey& key) override;
  /// Fails every pending receive and discards messages that arrived without a receive. Sends in
  /// flight stay (UCX cannot cancel them); they complete when the peer receives or discards them.
  void cancel_all() override;
  void cancel_stream(uint32_t stream) override;
  void drop_peer(int peer, const std::string& why) override;
  /// Messages travel as UCX active messages (eager, ordered per peer by UCX's endpoint).
  bool carries_messages() const override { return true; }
  void send_message(int peer, uint32_t stream, std::string bytes) override;
  void set_message_handler(uint32_t stream, MessageHandler handler) override;

  /// The 64-bit UCX tag of tensor `index` of the transfer `key`: the stream's low kStreamBits
  /// bits, the key's low kKeyBits bits and the index (layout in ucx_channel.cpp). Throws
  /// TransferError when `index` is kMaxTransferTensors or more.
  static uint64_t ucx_tag(const TransferKey& key, size_t index);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tensorplay::transport
