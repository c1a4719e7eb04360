// Where this process sits in a job, read from the launcher's environment: torchrun's (and
// tp-launch's) variables, Open MPI's, MPICH's (and Intel MPI's) or Slurm's.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tensorplay::distributed {

/// One process's place in a job.
struct LaunchEnv {
  bool launched = false;  ///< false: no launcher variables (the embedded single-process default)
  std::string source;     ///< "torchrun", "openmpi", "mpich", "slurm" or "none"
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";  ///< where the other ranks reach rank 0
  /// Where rank 0 listens: "" is master_addr, "0.0.0.0" every interface (a Slurm job on several
  /// nodes, whose first node's name may resolve to a loopback address on that node).
  std::string listen_addr;
  int master_port = 29500;
  /// MASTER_PORT was not given: the port is derived from job_id (derived_port).
  bool port_derived = false;
  /// The launcher's id of this job, the same on every rank and different for every job (empty:
  /// none); a rank of another job is refused at the rendezvous.
  std::string job_id;
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
/// `OMPI_COMM_WORLD_RANK`, `_SIZE`, `_LOCAL_RANK`, `_LOCAL_SIZE`; MPICH's and Intel MPI's
/// `PMI_RANK`, `PMI_SIZE`, `MPI_LOCALRANKID`, `MPI_LOCALNRANKS`; PMIx's `PMIX_RANK` (with a size
/// from one of these); Slurm's `SLURM_PROCID`, `SLURM_NTASKS`, `SLURM_LOCALID`, the count of this
/// node (`SLURM_STEP_TASKS_PER_NODE` or `SLURM_TASKS_PER_NODE`, "2(x3),1", at `SLURM_NODEID`;
/// else `SLURM_NTASKS_PER_NODE`) and the first host of `SLURM_JOB_NODELIST`. A Slurm batch or
/// allocation shell (a job without a job step, `SLURM_STEP_ID` unset) is a group of one, or with
/// `SLURM_NTASKS` above 1 an error saying to start the program with `srun`.
///
/// The job id is torchrun's `TORCHELASTIC_RUN_ID` (unless "none"), Slurm's
/// `SLURM_JOB_ID.SLURM_STEP_ID`, Open MPI's `OMPI_MCA_ess_base_jobid`, PMIx's `PMIX_NAMESPACE`, or
/// for MPICH on one host its process manager's process. `MASTER_ADDR` and `MASTER_PORT` override
/// what the launcher implies: without `MASTER_PORT`, the port is derived from the job id
/// (derived_port; 29500 without one). tensorplay's own: `TENSORPLAY_RDZV_TIMEOUT` (seconds, e.g.
/// 900 or 2.5) and `TENSORPLAY_CLUSTER_TOKEN` (old names `TP_...` still read). A variable that is
/// missing, not a number or inconsistent with the others throws std::invalid_argument naming it
/// (and an example of a good value).
LaunchEnv read_launch_env(const EnvLookup& getenv);
/// The same from this process's environment.
LaunchEnv read_launch_env();

/// The first host of a Slurm node list: "node[03-05,7],gpu1" gives "node03".
std::string first_slurm_host(const std::string& nodelist);

/// The task count of node `node` (0-based) in a Slurm per-node list: "2(x3),1" gives 2 for nodes
/// 0 to 2 and 1 for node 3. Throws std::invalid_argument naming `name` when malformed or short.
int slurm_tasks_on_node(const std::string& spec, int node, const char* name);

/// The rendezvous port of a job without MASTER_PORT: from 20000 to 29999, a hash of `job_id`
/// (29500 when empty), so two jobs on one node rarely meet on one port.
int derived_port(const std::string& job_id);

/// What rank 0 of a job of several ranks without a cluster token says once on stderr: what the
/// token protects and how to set one (empty where there is nothing to say: a token is set, this
/// is not rank 0, or the group is one process).
std::string missing_token_advice(const LaunchEnv& env);

/// The UCX variables tp-launch sets that `getenv` leaves unset, as (name, value):
/// `UCX_VFS_ENABLE=n` and `UCX_MEM_EVENTS=no` (see ucx_process_settings.h for why).
std::vector<std::pair<std::string, std::string>> missing_ucx_settings(const EnvLookup& getenv);
/// The same from this process's environment.
std::vector<std::pair<std::string, std::string>> missing_ucx_settings();

}  // namespace tensorplay::distributed
