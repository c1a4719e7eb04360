// Reading a process's place in a job from torchrun's, Slurm's or Open MPI's variables.
#include "tensorplay/distributed/launch_env.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <stdexcept>

#include "tensorplay/base/knobs.h"
#include "tensorplay/base/loopback_port.h"

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
/// Their names, old names and parsing are the knob table's (tensorplay/base/knobs.h).
void read_own_variables(const EnvLookup& getenv, LaunchEnv& env) {
  KnobReader knobs(getenv, [](const std::string& message) { std::cerr << message << "\n"; });
  if (knobs.is_set(Knob::RdzvTimeout))
    env.rdzv_timeout = std::chrono::milliseconds(
        static_cast<int64_t>(std::llround(knobs.get_double(Knob::RdzvTimeout) * 1000)));
  env.cluster_token = knobs.get_string(Knob::ClusterToken);
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
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
};

/// Where rank 0 listens: MASTER_ADDR/MASTER_PORT wherever they are set; torchrun requires them,
/// Open MPI on one host and Slurm (its node list's first host) imply the address.
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
  if (!addr && env.source == std::string("openmpi") && !one_host)
    throw std::invalid_argument(
        "launcher environment: MASTER_ADDR is not set, and this Open MPI job spans several "
        "hosts: set MASTER_ADDR to rank 0's host (mpirun -x MASTER_ADDR=...)");
  if (addr) {
    env.master_addr = addr;
  } else if (env.source == std::string("slurm")) {
    const char* nodes = getenv("SLURM_JOB_NODELIST");
    if (!nodes) nodes = getenv("SLURM_NODELIST");
    if (!nodes)
      throw std::invalid_argument(
          "launcher environment: SLURM_JOB_NODELIST is not set (SLURM_PROCID is): cannot tell "
          "rank 0's host; set MASTER_ADDR");
    env.master_addr = first_slurm_host(nodes);
  }
  if (env.master_addr.empty())
    throw std::invalid_argument("launcher environment: MASTER_ADDR is empty");
  env.master_port = parse_or(getenv, "MASTER_PORT", 29500, 1, 65535);
}

/// The job's id, which every rank records in its message log: torchrun's run id ("none" when
/// torchrun was given no --rdzv-id, the same for every such job), else Slurm's job step.
void read_job_id(const EnvLookup& getenv, LaunchEnv& env) {
  const char* run_id = getenv("TORCHELASTIC_RUN_ID");
  const char* slurm_job = getenv("SLURM_JOB_ID");
  const char* slurm_step = getenv("SLURM_STEP_ID");
  if (run_id && *run_id && std::string(run_id) != "none")
    env.job_id = run_id;
  else if (env.source == std::string("slurm") && slurm_job && *slurm_job)
    env.job_id =
        std::string("slurm-") + slurm_job + (slurm_step ? std::string(".") + slurm_step : "");
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
  env.local_world_size = parse_or(getenv, c.local_size, env.world_size, 1, kMaxRanks);
  check_below(env.local_rank, c.local_rank, env.local_world_size, c.local_size);

  read_master(getenv, env);
  read_job_id(getenv, env);
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

}  // namespace tensorplay::distributed
