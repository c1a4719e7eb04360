// Reading a process's place in a job from torchrun's, Slurm's or Open MPI's variables.
#include "actors/launch_env.h"

#include <charconv>
#include <cstdlib>
#include <stdexcept>

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

LaunchEnv read_launch_env(const EnvLookup& getenv) {
  constexpr int kMaxRanks = 1 << 20;
  LaunchEnv env;
  auto master = [&](const std::string& fallback_addr) {
    const char* addr = getenv("MASTER_ADDR");
    env.master_addr = addr ? std::string(addr) : fallback_addr;
    if (env.master_addr.empty())
      throw std::invalid_argument("launcher environment: MASTER_ADDR is empty");
    env.master_port = parse_or(getenv, "MASTER_PORT", 29500, 1, 65535);
  };
  if (getenv("RANK") || getenv("WORLD_SIZE")) {
    env.source = "torchrun";
    env.world_size = parse_int(getenv, "WORLD_SIZE", 1, kMaxRanks);
    env.rank = parse_int(getenv, "RANK", 0, kMaxRanks);
    check_below(env.rank, "RANK", env.world_size, "WORLD_SIZE");
    env.local_rank = parse_or(getenv, "LOCAL_RANK", env.rank, 0, kMaxRanks);
    env.local_world_size = parse_or(getenv, "LOCAL_WORLD_SIZE", env.world_size, 1, kMaxRanks);
    if (!getenv("MASTER_ADDR") && env.world_size > 1)
      throw std::invalid_argument(
          "launcher environment: MASTER_ADDR is not set (RANK and WORLD_SIZE are): set it to "
          "rank 0's host, or start the program with tp-launch");
    if (!getenv("MASTER_PORT") && env.world_size > 1)
      throw std::invalid_argument(
          "launcher environment: MASTER_PORT is not set (RANK and WORLD_SIZE are): set it to a "
          "free port on rank 0's host, or start the program with tp-launch");
    master("127.0.0.1");
  } else if (getenv("OMPI_COMM_WORLD_RANK") || getenv("OMPI_COMM_WORLD_SIZE")) {
    env.source = "openmpi";
    env.world_size = parse_int(getenv, "OMPI_COMM_WORLD_SIZE", 1, kMaxRanks);
    env.rank = parse_int(getenv, "OMPI_COMM_WORLD_RANK", 0, kMaxRanks);
    check_below(env.rank, "OMPI_COMM_WORLD_RANK", env.world_size, "OMPI_COMM_WORLD_SIZE");
    env.local_rank = parse_or(getenv, "OMPI_COMM_WORLD_LOCAL_RANK", env.rank, 0, kMaxRanks);
    env.local_world_size =
        parse_or(getenv, "OMPI_COMM_WORLD_LOCAL_SIZE", env.world_size, 1, kMaxRanks);
    if (!getenv("MASTER_ADDR") && env.local_world_size != env.world_size)
      throw std::invalid_argument(
          "launcher environment: MASTER_ADDR is not set, and this Open MPI job spans several "
          "hosts: set MASTER_ADDR to rank 0's host (mpirun -x MASTER_ADDR=...)");
    master("127.0.0.1");
  } else if (getenv("SLURM_PROCID") || getenv("SLURM_NTASKS")) {
    env.source = "slurm";
    env.world_size = parse_int(getenv, "SLURM_NTASKS", 1, kMaxRanks);
    env.rank = parse_int(getenv, "SLURM_PROCID", 0, kMaxRanks);
    check_below(env.rank, "SLURM_PROCID", env.world_size, "SLURM_NTASKS");
    env.local_rank = parse_or(getenv, "SLURM_LOCALID", 0, 0, kMaxRanks);
    env.local_world_size = parse_or(getenv, "SLURM_NTASKS_PER_NODE", 1, 1, kMaxRanks);
    const char* nodes = getenv("SLURM_JOB_NODELIST");
    if (!nodes) nodes = getenv("SLURM_NODELIST");
    if (!nodes && !getenv("MASTER_ADDR"))
      throw std::invalid_argument(
          "launcher environment: SLURM_JOB_NODELIST is not set (SLURM_PROCID is): cannot tell "
          "rank 0's host; set MASTER_ADDR");
    master(nodes ? first_slurm_host(nodes) : std::string());
  } else {
    env.source = "none";
    return env;
  }
  env.launched = true;
  check_below(env.local_rank, "the local rank", env.local_world_size, "the local world size");
  return env;
}

LaunchEnv read_launch_env() {
  return read_launch_env([](const char* name) { return std::getenv(name); });
}

}  // namespace tensorplay::distributed
