// How a process joins a job (InitOptions: backend, timeout, where it sits) and what a failed
// rendezvous or collective throws (DistributedError).
#pragma once

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>

#include "tensorplay/distributed/launch_env.h"

namespace tensorplay::distributed {

/// A rendezvous, a collective or a peer failed or timed out (the message names who and what).
class DistributedError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// What a rendezvous or a collective waits at most when no timeout is given.
inline constexpr std::chrono::milliseconds kDefaultTimeout = std::chrono::minutes(5);

/// How to join the job.
struct InitOptions {
  /// "ucx" (host memory), "nccl" (device memory; falls back to UCX through host memory where
  /// NCCL or a device is missing) or "auto" (NCCL for CUDA stages when available, else UCX).
  std::string backend = "auto";
  /// Longest the rendezvous and each collective may wait before failing, naming who is missing.
  /// Unset: collectives wait kDefaultTimeout, and the rendezvous `TENSORPLAY_RDZV_TIMEOUT` seconds
  /// (set by tp-launch's --rdzv-timeout) or, without it, kDefaultTimeout.
  std::optional<std::chrono::milliseconds> timeout;
  /// Where this process sits; by default read from the launcher's environment (launch_env.h).
  /// Without launcher variables the group is this process alone (the embedded default).
  std::optional<LaunchEnv> env;
};

}  // namespace tensorplay::distributed
