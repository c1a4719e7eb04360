// The channel between ranks in separate processes, measured: a ping-pong through the UCX channel
// between two ranks of this process, once per UCX transport selection, fitted to a ChannelProfile.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "tensorplay/pipelining/planner/profile.h"

namespace tensorplay::pipelining {

/// One UCX channel to measure: the profile's name for it and the UCX transports it may use.
struct UcxChannelSpec {
  std::string kind;        ///< the ChannelProfile's kind: "ucx_shm"
  std::string transports;  ///< spelled as UCX_TLS spells them: "shm", "tcp"
  /// Whether the two ranks count as one host's (UcxChannel::connect's same_host): by default UCX
  /// then handles no peer errors, as between ranks of one host; false: as between hosts.
  bool same_host = true;
};

/// What pp::profile measures by default: "ucx_shm" (UCX shared memory, as ranks of one host talk
/// by default) and "ucx_tcp" (TCP over loopback, as ranks on other hosts talk without RDMA).
std::vector<UcxChannelSpec> default_ucx_channels();

/// How the ping-pong runs.
struct PingPongOptions {
  size_t small_bytes = 64;        ///< the size that gives the latency
  size_t large_bytes = 4u << 20;  ///< the size that gives the bandwidth
  int rounds = 15;                ///< round trips per size after one warm-up; the median counts
  /// Idle time before each round trip, so that both channels' progress threads have gone to sleep,
  /// as between a pipeline's transfers (the wake-up is part of a transfer's latency there).
  std::chrono::microseconds pause{1000};
  std::chrono::milliseconds timeout{5000};  ///< the most one round trip may take
};

/// Measures `spec`: two UcxChannels of this process (ranks 0 and 1 of a world of two, with
/// `spec.transports`) connected over loopback send a float32 tensor back and forth at the small and
/// the large size; half the median round trip at each gives latency + bytes / bandwidth. Throws
/// transport::TransferError when UCX cannot run with those transports here (UCX's reason in the
/// message), and std::runtime_error when a round trip fails or outlasts options.timeout.
ChannelProfile measure_ucx_channel(const UcxChannelSpec& spec, const PingPongOptions& options = {});

/// Where measure_ucx_channels says which channel it left out and why.
using ChannelNote = std::function<void(const std::string& line)>;

/// Measures each of `specs` in order. One that cannot be measured is left out, not an error:
/// `note` gets a line naming it and why (null: the line goes to standard error).
std::vector<ChannelProfile> measure_ucx_channels(const std::vector<UcxChannelSpec>& specs,
                                                 const PingPongOptions& options = {},
                                                 const ChannelNote& note = nullptr);

}  // namespace tensorplay::pipelining
