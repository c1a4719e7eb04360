// Reading a process's place in a job from torchrun's, Open MPI's, MPICH's or Slurm's variables.
#include "tensorplay/distributed/launch_env.h"

#include <unistd.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <stdexcept>

#include "tensorplay/base/knobs.h"
#include "tensorplay/base/loopback_port.h"
#include "tensorplay/core/detail/fnv1a.h"
#include "tensorplay/distributed/distributed_knobs.h"

namespace tensorplay::distributed {
namespace {

int parse_int(const EnvLookup& getenv, const char* name, int min, int max) {
  const char* value = getenv(name);
  if (!value)
    throw std::invalid_argument(std::string("launcher environment: ") + name + " is not set");
  std::string text(value);
  // Slurm writes counts per node as "2(x3)": the count is the leading number.
  int out = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  if (ec != std::errc() || end == text.data() || (end != text.data() + text.size() && *end != '('))
    throw std::invalid_argument(std::string("launcher environment: ") + name + "='" + text +
                                "' is not a whole number");
  if (out < min || out > max)
    throw std::invalid_argument(std::string("launcher environment: ") + name + "=" + text +
                                " is out of range [" + std::to_string(min) + ", " +
                                std::to_string(max) + "]");
  return out;
}

int parse_or(const EnvLookup& getenv, const char* name, int fallback, int min, int max) {
  return getenv(name) ? parse_int(getenv, name, min, max) : fallback;
}

void check_below(int value, const char* value_name, int bound, const char* bound_name) {
  if (value >= bound)
    throw std::invalid_argument(std::string("launcher environment: ") + value_name + "=" +
                                std::to_string(value) + " must be less than " + bound_name + "=" +
                                std::to_string(bound));
}

/// tensorplay's own variables, read whether or not a launcher set the others.
/// Their rows are distributed_knobs.h's; the reader is tensorplay/base/knobs.h.
void read_own_variables(const EnvLookup& getenv, LaunchEnv& env) {
  KnobReader knobs(getenv, [](const std::string& message) { std::cerr << message << "\n"; });
  if (knobs.is_set(kRdzvTimeoutKnob))
    env.rdzv_timeout = std::chrono::milliseconds(
        static_cast<int64_t>(std::llround(knobs.get_double(kRdzvTimeoutKnob) * 1000)));
  env.cluster_token = knobs.get_string(kClusterTokenKnob);
}

}  // namespace

std::string first_slurm_host(const std::string& nodelist) {
  // The first entry ends at a comma outside brackets.
  size_t depth = 0, end = nodelist.size();
  for (size_t i = 0; i < nodelist.size(); ++i) {
    if (nodelist[i] == '[') ++depth;
    if (nodelist[i] == ']' && depth > 0) --depth;
    if (nodelist[i] == ',' && depth == 0) {
      end = i;
      break;
    }
  }
  std::string first = nodelist.substr(0, end);
  size_t open = first.find('[');
  if (open == std::string::npos) return first;
  size_t close = first.find(']', open);
  if (close == std::string::npos)
    throw std::invalid_argument("launcher environment: SLURM_JOB_NODELIST='" + nodelist +
                                "' has an unclosed '['");
  std::string range = first.substr(open + 1, close - open - 1);
  std::string head = range.substr(0, range.find_first_of(",-"));
  return first.substr(0, open) + head + first.substr(close + 1);
}

namespace {

/// The variables one launcher sets (a missing local pair defaults to one host).
struct Convention {
  const char* source;
  const char* rank;
  const char* size;
  const char* local_rank;
  const char* local_size;
};

constexpr Convention kConventions[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"mpich", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
    // The local size comes from the per-node lists (slurm_local_size).
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", nullptr},
};

bool is_mpi(const LaunchEnv& env) { return env.source == "openmpi" || env.source == "mpich"; }

bool is_loopback(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}

/// The rendezvous address on a Slurm job without MASTER_ADDR: loopback on one node; on several,
/// the first node's name for the others, and rank 0 listens on every interface (the name may
/// resolve to a loopback address on that node).
void slurm_master(const EnvLookup& getenv, LaunchEnv& env) {
  if (env.local_world_size == env.world_size) return;  // one node: 127.0.0.1
  const char* nodes = getenv("SLURM_STEP_NODELIST");
  if (!nodes) nodes = getenv("SLURM_JOB_NODELIST");
  if (!nodes) nodes = getenv("SLURM_NODELIST");
  if (!nodes)
    throw std::invalid_argument(
        "launcher environment: SLURM_JOB_NODELIST is not set (SLURM_PROCID is): cannot tell "
        "rank 0's host; set MASTER_ADDR");
  env.master_addr = first_slurm_host(nodes);
  env.listen_addr = "0.0.0.0";
}

/// Where rank 0 listens: MASTER_ADDR/MASTER_PORT wherever they are set; torchrun requires them,
/// Slurm and the MPIs on one host imply loopback, Slurm on several its node list's first host.
void read_master(const EnvLookup& getenv, LaunchEnv& env) {
  const char* addr = getenv("MASTER_ADDR");
  const bool one_host = env.local_world_size == env.world_size;
  if (!addr && env.source == std::string("torchrun") && env.world_size > 1)
    throw std::invalid_argument(
        "launcher environment: MASTER_ADDR is not set (RANK and WORLD_SIZE are): set it to "
        "rank 0's host, or start the program with tp-launch");
  if (!getenv("MASTER_PORT") && env.source == std::string("torchrun") && env.world_size > 1)
    throw std::invalid_argument(
        "launcher environment: MASTER_PORT is not set (RANK and WORLD_SIZE are): set it to a "
        "free port on rank 0's host, or start the program with tp-launch");
  if (!addr && is_mpi(env) && !one_host)
    throw std::invalid_argument("launcher environment: MASTER_ADDR is not set, and this " +
                                env.source +
                                " job spans several hosts: set MASTER_ADDR to rank 0's host "
                                "(mpirun -x MASTER_ADDR=... for Open MPI, -genv for MPICH)");
  if (addr) {
    env.master_addr = addr;
    if (env.source == std::string("slurm") && !one_host && is_loopback(env.master_addr))
      throw std::invalid_argument("launcher environment: MASTER_ADDR=" + env.master_addr +
                                  " is a loopback address, but this Slurm job spans several "
                                  "nodes: unset it, or set rank 0's node's address");
  } else if (env.source == std::string("slurm")) {
    slurm_master(getenv, env);
  }
  if (env.master_addr.empty())
    throw std::invalid_argument("launcher environment: MASTER_ADDR is empty");
  env.port_derived = !getenv("MASTER_PORT");
  env.master_port =
      env.port_derived ? derived_port(env.job_id) : parse_int(getenv, "MASTER_PORT", 1, 65535);
}

/// The job's id, the same on every rank of a job and different for every job: torchrun's run id
/// ("none" when torchrun was given no --rdzv-id, the same for every such job), Slurm's job step,
/// Open MPI's job id or PMIx's namespace; MPICH's process manager, on one host, is one process per
/// job (its PMI proxy, this process's parent).
void read_job_id(const EnvLookup& getenv, LaunchEnv& env) {
  auto set = [&](const char* name) { return getenv(name) && *getenv(name); };
  const char* run_id = getenv("TORCHELASTIC_RUN_ID");
  if (run_id && *run_id && std::string(run_id) != "none") {
    env.job_id = run_id;
  } else if (env.source == std::string("slurm") && set("SLURM_JOB_ID")) {
    const char* step = set("SLURM_STEP_ID") ? getenv("SLURM_STEP_ID") : getenv("SLURM_STEPID");
    env.job_id =
        std::string("slurm-") + getenv("SLURM_JOB_ID") + (step ? "." + std::string(step) : "");
  } else if (env.source == std::string("openmpi") && set("OMPI_MCA_ess_base_jobid")) {
    env.job_id = std::string("openmpi-") + getenv("OMPI_MCA_ess_base_jobid");
  } else if (is_mpi(env) && set("PMIX_NAMESPACE")) {
    env.job_id = std::string("pmix-") + getenv("PMIX_NAMESPACE");
  } else if (env.source == std::string("mpich") && env.local_world_size == env.world_size) {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    env.job_id = "mpich-" + std::string(host) + "-" + std::to_string(::getppid());
  }
}

/// This node's task count under Slurm: its entry of the step's (or job's) per-node list, else
/// SLURM_NTASKS_PER_NODE, else every task on this node.
int slurm_local_size(const EnvLookup& getenv, int world_size) {
  constexpr int kMax = 1 << 20;
  for (const char* name : {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"})
    if (const char* spec = getenv(name))
      return slurm_tasks_on_node(spec, parse_or(getenv, "SLURM_NODEID", 0, 0, kMax), name);
  return parse_or(getenv, "SLURM_NTASKS_PER_NODE", world_size, 1, kMax);
}

/// Slurm sets SLURM_STEP_ID in a job step (srun) only: a batch script or an salloc shell is the
/// job's allocation, where one process is not one of the job's tasks.
bool slurm_outside_step(const EnvLookup& getenv) {
  return getenv("SLURM_JOB_ID") && !getenv("SLURM_STEP_ID") && !getenv("SLURM_STEPID");
}

/// A group of one in a batch or allocation shell of one task; with more tasks, an error at once.
LaunchEnv slurm_shell(const EnvLookup& getenv, LaunchEnv env) {
  const char* tasks = getenv("SLURM_NTASKS") ? "SLURM_NTASKS" : "SLURM_NPROCS";
  const int ntasks = parse_or(getenv, tasks, 1, 1, 1 << 20);
  if (ntasks > 1)
    throw std::invalid_argument(
        std::string("launcher environment: this process runs in the batch script or salloc shell "
                    "of Slurm job ") +
        getenv("SLURM_JOB_ID") + " (" + tasks + "=" + std::to_string(ntasks) +
        ") but outside a job step, so it is none of the job's tasks: start it with srun (srun "
        "./program in the script starts one rank per task)");
  env.source = "none";
  return env;
}

}  // namespace

LaunchEnv read_launch_env(const EnvLookup& getenv) {
  constexpr int kMaxRanks = 1 << 20;
  LaunchEnv env;
  read_own_variables(getenv, env);
  const Convention* found = nullptr;
  for (const Convention& c : kConventions)
    if (getenv(c.rank) || getenv(c.size)) {
      found = &c;
      break;
    }
  if (found && found->source == std::string("slurm") && slurm_outside_step(getenv))
    return slurm_shell(getenv, env);
  if (!found && getenv("PMIX_RANK"))
    throw std::invalid_argument(
        "launcher environment: PMIX_RANK is set but no world size (OMPI_COMM_WORLD_SIZE, "
        "PMI_SIZE, SLURM_NTASKS or WORLD_SIZE): start the program with mpirun or srun, or set "
        "RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT");
  if (!found) {
    env.source = "none";
    return env;
  }
  const Convention& c = *found;
  env.launched = true;
  env.source = c.source;
  env.world_size = parse_int(getenv, c.size, 1, kMaxRanks);
  env.rank = parse_int(getenv, c.rank, 0, kMaxRanks);
  check_below(env.rank, c.rank, env.world_size, c.size);
  env.local_rank = parse_or(getenv, c.local_rank, env.rank, 0, kMaxRanks);
  env.local_world_size = c.local_size ? parse_or(getenv, c.local_size, env.world_size, 1, kMaxRanks)
                                      : slurm_local_size(getenv, env.world_size);
  check_below(env.local_rank, c.local_rank, env.local_world_size,
              c.local_size ? c.local_size : "this node's Slurm task count");

  read_job_id(getenv, env);
  read_master(getenv, env);
  env.restart_count =
      parse_or(getenv, "TORCHELASTIC_RESTART_COUNT", 0, 0, std::numeric_limits<int>::max());
  return env;
}

LaunchEnv read_launch_env() {
  return read_launch_env([](const char* name) { return std::getenv(name); });
}

LaunchEnv loopback_launch_env(int rank, int world_size, int port) {
  LaunchEnv env;
  env.launched = true;
  env.source = "torchrun";
  env.rank = rank;
  env.world_size = world_size;
  env.master_addr = "127.0.0.1";
  env.master_port = port;
  return env;
}

int free_loopback_port() { return tensorplay::free_loopback_port(); }

int slurm_tasks_on_node(const std::string& spec, int node, const char* name) {
  auto bad = [&](const std::string& why) {
    return std::invalid_argument(std::string("launcher environment: ") + name + "='" + spec + "' " +
                                 why + " (expected counts per node such as 2(x3),1)");
  };
  int first = 0, found = 0;  // the first node of the current entry; node's count
  size_t at = 0;
  if (spec.empty() || spec.back() == ',') throw bad("is not a list of counts");
  while (at < spec.size()) {
    int count = 0, repeat = 1;
    auto [end, ec] = std::from_chars(spec.data() + at, spec.data() + spec.size(), count);
    if (ec != std::errc() || count < 1) throw bad("is not a list of counts");
    at = end - spec.data();
    if (at < spec.size() && spec[at] == '(') {
      if (spec.compare(at, 2, "(x") != 0) throw bad("has a repeat not written (xN)");
      auto [rend, rec] = std::from_chars(spec.data() + at + 2, spec.data() + spec.size(), repeat);
      if (rec != std::errc() || repeat < 1 || rend == spec.data() + spec.size() || *rend != ')')
        throw bad("has a repeat not written (xN)");
      at = rend - spec.data() + 1;
    }
    if (!found && node < first + repeat) found = count;
    first += repeat;
    if (at < spec.size() && spec[at++] != ',') throw bad("is not a list of counts");
  }
  if (!found) throw bad("has no entry for node " + std::to_string(node) + " (SLURM_NODEID)");
  return found;
}

int derived_port(const std::string& job_id) {
  if (job_id.empty()) return 29500;
  return 20000 + static_cast<int>(tensorplay::detail::fnv1a64(job_id) % 10000);
}

std::string missing_token_advice(const LaunchEnv& env) {
  if (!env.cluster_token.empty() || env.rank != 0 || env.world_size < 2) return {};
  return "tensorplay: no cluster token (TENSORPLAY_CLUSTER_TOKEN): rank 0 admits any process that "
         "reaches " +
         env.master_addr + ":" + std::to_string(env.master_port) +
         " claiming this job's id, including another user's. Give every rank of the job one "
         "secret, e.g. in an sbatch script before srun: export "
         "TENSORPLAY_CLUSTER_TOKEN=$(openssl rand -hex 16)";
}

std::vector<std::pair<std::string, std::string>> missing_ucx_settings(const EnvLookup& getenv) {
  std::vector<std::pair<std::string, std::string>> out;
  for (auto [name, value] : {std::pair{"UCX_VFS_ENABLE", "n"}, std::pair{"UCX_MEM_EVENTS", "no"}})
    if (!getenv(name)) out.emplace_back(name, value);
  return out;
}

std::vector<std::pair<std::string, std::string>> missing_ucx_settings() {
  return missing_ucx_settings([](const char* name) { return std::getenv(name); });
}

}  // namespace tensorplay::distributed
