// Where this process sits in a job, read from the launcher's environment: torchrun's (and
// tp-launch's) variables, Slurm's, or Open MPI's.
#pragma once

#include <functional>
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
  int restart_count = 0;  ///< TORCHELASTIC_RESTART_COUNT: which restart of the job this is
};

/// Looks up an environment variable (null when unset); tests pass their own.
using EnvLookup = std::function<const char*(const char* name)>;

/// Reads the launcher's variables, in this order of precedence: torchrun's `RANK`, `WORLD_SIZE`,
/// `LOCAL_RANK`, `LOCAL_WORLD_SIZE`, `MASTER_ADDR`, `MASTER_PORT`; Open MPI's
/// `OMPI_COMM_WORLD_RANK`, `_SIZE`, `_LOCAL_RANK`, `_LOCAL_SIZE`; Slurm's `SLURM_PROCID`,
/// `SLURM_NTASKS`, `SLURM_LOCALID`, `SLURM_NTASKS_PER_NODE` and the first host of
/// `SLURM_JOB_NODELIST`. `MASTER_ADDR` and `MASTER_PORT` override what Slurm and Open MPI imply
/// (port 29500 by default); torchrun's `TORCHELASTIC_RESTART_COUNT` says which restart this is
/// (0 by default). A variable that is missing, not a number or inconsistent with the
/// others throws std::invalid_argument naming it.
LaunchEnv read_launch_env(const EnvLookup& getenv);
/// The same from this process's environment.
LaunchEnv read_launch_env();

/// The first host of a Slurm node list: "node[03-05,7],gpu1" gives "node03".
std::string first_slurm_host(const std::string& nodelist);

}  // namespace tensorplay::distributed
