// The NCCL channel: moves tensors that live in GPU memory between ranks with NCCL point-to-point
// sends and receives, the two lanes of TransferKey on separate communicators and streams.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tensorplay/transport/channel.h"

namespace tensorplay::transport {

/// True when this build has NCCL and a CUDA device is visible.
bool nccl_available();

/// The bytes of a fresh ncclUniqueId (call on one rank, hand to all); throws when
/// !nccl_available().
std::vector<uint8_t> nccl_unique_id();

/// Device-memory channel between the ranks of one process group, one GPU per rank.
///
/// Ordering. NCCL matches a send with a receive by issue order per communicator and peer, not by
/// key: the caller must post receives from a peer in the order that peer issued its sends. The
/// runtime posts a receive when the sender's descriptor arrives, and CAF keeps per-sender order,
/// so the two orders agree. Every (lane, sender, receiver) has a link of its own (lane:
/// TransferKey::lane): a two-rank communicator split from the lane's group communicator, with its
/// own stream (NCCL serialises all work of one communicator, so separate streams alone would not
/// do). A link carries one way, so its sends and receives always match in issue order; a transfer
/// never waits behind one to another peer, the other way, or in the other lane, so skip
/// connections, V placements and several peers per rank cannot block each other. Making the channel
/// splits 4 x (world - 1) links per rank (collective over the group) and connects each once.
///
/// Streams. A send waits (on the GPU) for work already queued on the device's tensor stream,
/// so the caller may send a tensor it has just computed (a receive waits for it too: its memory
/// may have been freed by that work); it reads the bytes later, so the caller
/// must not write into a sent tensor in place until the receiver has it. A received tensor is
/// reported only once its bytes have arrived, so work queued after `done` sees them.
///
/// Several communicators. A rank holds 4 x (world - 1) link communicators, and a data-parallel
/// all-reduce may hold another; they are used from different threads in no order common to all
/// ranks. Their kernels spin until the peer is there, so they must all fit on the GPU at once:
/// every communicator is capped to a share of half the SMs (detail::max_ctas_per_communicator),
/// and the link streams never block with the legacy default stream. Each of a rank's streams also
/// needs a hardware queue of its own (streams sharing one run in order, as one queue per
/// direction did): tensorplay sets CUDA_DEVICE_MAX_CONNECTIONS to 32 before CUDA starts when it
/// is unset, and the constructor refuses a group whose 4 x (world - 1) + 2 streams do not fit
/// (detail::hardware_queue_problem).
///
/// Failure. NCCL cannot cancel one transfer: a receive that times out, cancel_receive, and
/// cancel_all with transfers in flight abort every link's communicator (ncclCommAbort, the only way
/// to unblock NCCL). Every pending receive then completes with an error, and every later call
/// fails: a timed-out NCCL channel is unusable, and continuing needs a new channel with new unique
/// ids on every rank. Errors NCCL reports itself (a peer that died, a broken connection) do the
/// same.
class NcclChannel final : public Channel {
 public:
  /// Joins the communicators of `world_size` ranks as `rank` on CUDA device `device`. `ids`
  /// holds two unique ids made on one rank (one per lane; the links are split from them).
  /// Every rank needs its own GPU: NCCL rejects two ranks of one group on the same device (unless
  /// each process claims its own NCCL_HOSTID, as the single-GPU checks do). Waits until every rank
  /// has joined and connected to every other rank (so later calls only enqueue work), or throws
  /// TransferError after `connect_timeout`. Throws std::invalid_argument for bad arguments or
  /// too few hardware queues for the group (CUDA_DEVICE_MAX_CONNECTIONS, see above),
  /// TransferError when NCCL is not built in or no CUDA device is visible.
  NcclChannel(int rank, int world_size, Device device, const std::vector<std::vector<uint8_t>>& ids,
              std::chrono::milliseconds connect_timeout = std::chrono::minutes(2));
  /// Waits briefly for transfers in flight, aborts what remains, and frees the communicators.
  ~NcclChannel() override;
  NcclChannel(const NcclChannel&) = delete;
  NcclChannel& operator=(const NcclChannel&) = delete;

  // -- Channel -------------------------------------------------------------------------------

  /// "nccl".
  std::string name() const override { return "nccl"; }
  /// Queues the defined, non-empty tensors for `peer` on the key's lane's communicator; a tensor
  /// on another device (or the host) is first copied to this channel's device. Never waits for
  /// the receiver. Throws TransferError once the channel has failed.
  std::vector<TensorDescriptor> send(int peer, const TransferKey& key,
                                     std::vector<Tensor> tensors) override;
  /// Allocates the described tensors on this channel's device (`device` must be it) and queues
  /// their receives; `done` runs on the channel's completion thread (it must not destroy the
  /// channel), or at once on this thread when nothing is to be moved or the channel has failed. A
  /// receive not complete within `timeout` aborts the channel (see the class comment).
  void post_receive(int peer, const TransferKey& key, std::vector<TensorDescriptor> descriptors,
                    Device device, std::chrono::milliseconds timeout, ReceiveDone done) override;
  /// Sends and receives queued and not yet complete.
  size_t pending() const override;
  /// Aborts the channel when the receive for (`peer`, `key`) is still in flight.
  void cancel_receive(int peer, const TransferKey& key) override;
  /// Aborts the channel when anything is in flight; otherwise does nothing.
  void cancel_all() override;

  // -- observers -----------------------------------------------------------------------------

  /// This process's rank in the group.
  int rank() const { return rank_; }
  /// Number of ranks in the group.
  int world_size() const { return world_size_; }
  /// The CUDA device this rank sends from and receives onto.
  Device device() const { return device_; }

 private:
  struct Impl;
  int rank_ = 0;
  int world_size_ = 0;
  Device device_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tensorplay::transport
