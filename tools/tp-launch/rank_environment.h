// The environment each rank starts with: torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK, ...,
// MASTER_ADDR, MASTER_PORT) plus tensorplay's knobs TENSORPLAY_CLUSTER_TOKEN,
// TENSORPLAY_RDZV_TIMEOUT and TENSORPLAY_LOG_DIR, laid over the launcher's own environment.
#pragma once

#include <string>
#include <vector>

#include "launch_options.h"

namespace tensorplay::launch {

/// What every rank of this node shares; resolved once, before any rank starts.
struct JobEnvironment {
  std::string master_addr;
  int master_port = 0;
  std::string cluster_token;
  int restart_count = 0;  ///< which restart this is (0: the first start)
};

/// Fills in what the options leave open: a free loopback port when none was given, and the
/// cluster token (TENSORPLAY_CLUSTER_TOKEN from the environment, or 32 hex digits from
/// /dev/urandom).
/// Throws std::runtime_error when the system refuses either, or when a knob the ranks would read
/// holds a bad value (tensorplay/base/knobs.h).
JobEnvironment resolve_job_environment(const LaunchOptions& options);

/// The same job started again after a failure: a fresh rendezvous port when the launcher chose
/// it (the old one may still be held by a dying rank), the same token, the next restart count.
JobEnvironment restarted_job_environment(const LaunchOptions& options, JobEnvironment job);

/// The full environment, as "NAME=value" strings, for the rank with this local index.
std::vector<std::string> rank_environment(const LaunchOptions& options, const JobEnvironment& job,
                                          int local_rank);

}  // namespace tensorplay::launch
