// Where this process sits in a job, read from the launcher's environment: torchrun's (and
// tp-launch's) variables, Slurm's, or Open MPI's.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

namespace tensorplay::distributed {

/// One process's place in a job.
struct LaunchEnv {
  bool launched = false;  ///< false: no launcher variables (the embedded single-process default)
  std::string source;     ///< "torchrun", "slurm", "openmpi" or "none"
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string job_id;     ///< the launcher's id of this job, the same on every rank (empty: none)
  int restart_count = 0;  ///< times the launcher restarted the job (TORCHELASTIC_RESTART_COUNT)
  /// How long the rendezvous may take (`TENSORPLAY_RDZV_TIMEOUT`, seconds; tp-launch's
  /// `--rdzv-timeout`); unset: init_process_group's default.
  std::optional<std::chrono::milliseconds> rdzv_timeout;
  /// The secret every rank presents at the rendezvous (`TENSORPLAY_CLUSTER_TOKEN`; empty when
  /// unset).
  std::string cluster_token;
};

/// The place of `rank` in a job of `world_size` ranks whose rendezvous is at 127.0.0.1:`port`, as
/// torchrun would give it: for several ranks joined in one process (dist::join_job), as tests and
/// benchmarks run them.
LaunchEnv loopback_launch_env(int rank, int world_size, int port);

/// A loopback TCP port that was free a moment ago, for such a job's rendezvous: below the
/// kernel's ephemeral range, as tp-launch chooses (tensorplay/base/loopback_port.h). Throws
/// std::runtime_error when no port there can be bound.
int free_loopback_port();

/// Looks up an environment variable (null when unset); tests pass their own.
using EnvLookup = std::function<const char*(const char* name)>;

/// Reads the launcher's variables, in this order of precedence: torchrun's `RANK`, `WORLD_SIZE`,
/// `LOCAL_RANK`, `LOCAL_WORLD_SIZE`, `MASTER_ADDR`, `MASTER_PORT`; Open MPI's
/// `OMPI_COMM_WORLD_RANK`, `_SIZE`, `_LOCAL_RANK`, `_LOCAL_SIZE`; Slurm's `SLURM_PROCID`,
/// `SLURM_NTASKS`, `SLURM_LOCALID`, `SLURM_NTASKS_PER_NODE` and the first host of
/// `SLURM_JOB_NODELIST`. `MASTER_ADDR` and `MASTER_PORT` override what Slurm and Open MPI imply
/// (port 29500 by default). The job id is torchrun's `TORCHELASTIC_RUN_ID` (unless "none"), else
/// Slurm's `SLURM_JOB_ID.SLURM_STEP_ID`. tensorplay's own: `TENSORPLAY_RDZV_TIMEOUT` (seconds, e.g.
/// 900 or 2.5) and `TENSORPLAY_CLUSTER_TOKEN` (old names `TP_...` still read). A variable that is
/// missing, not a number or inconsistent with the others throws std::invalid_argument naming it
/// (and an example of a good value).
LaunchEnv read_launch_env(const EnvLookup& getenv);
/// The same from this process's environment.
LaunchEnv read_launch_env();

/// The first host of a Slurm node list: "node[03-05,7],gpu1" gives "node03".
std::string first_slurm_host(const std::string& nodelist);

}  // namespace tensorplay::distributed
