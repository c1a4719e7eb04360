// Building each rank's environment: a free port for a standalone rendezvous, the cluster token,
// and the per-rank variables torchrun defines, so programs written for torchrun run unchanged.
#include "rank_environment.h"

#include <cstdlib>
#include <fstream>
#include <map>
#include <stdexcept>

#include "bench/bench_knobs.h"
#include "tensorplay/base/knobs.h"
#include "tensorplay/base/loopback_port.h"
#include "tensorplay/distributed/distributed_knobs.h"
#include "tensorplay/observe/observe_knobs.h"

extern char** environ;

namespace tensorplay::launch {
namespace {

// A free loopback port below the kernel's ephemeral range, released for rank 0 to take
// (tensorplay/base/loopback_port.h says why there).
int pick_free_port() {
  try {
    return free_loopback_port();
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string(e.what()) + "; pass --master-port");
  }
}

std::string random_token() {
  unsigned char bytes[16];
  std::ifstream urandom("/dev/urandom", std::ios::binary);
  if (!urandom.read(reinterpret_cast<char*>(bytes), sizeof(bytes))) {
    throw std::runtime_error(
        "cannot read /dev/urandom for TENSORPLAY_CLUSTER_TOKEN; set it yourself");
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string token;
  for (unsigned char byte : bytes) {
    token += kHex[byte >> 4];
    token += kHex[byte & 0xf];
  }
  return token;
}

}  // namespace

JobEnvironment resolve_job_environment(const LaunchOptions& options) {
  // A bad knob would stop every rank with the same error: say it once, before any starts. The
  // knobs the launcher sets itself are replaced, whatever the environment holds.
  bench::register_bench_knobs();  // every knob a rank may read: the library's and the benchmarks'
  for (const KnobSpec& spec : knob_table()) {
    if (&spec == &distributed::kRdzvTimeoutKnob ||
        (&spec == &pipelining::kLogDirKnob && !options.log_dir.empty()))
      continue;
    if (std::string problem = process_knobs().problem(spec); !problem.empty())
      throw std::runtime_error(problem);
  }
  JobEnvironment job;
  job.master_addr = options.master_addr;
  job.master_port = options.master_port != 0 ? options.master_port : pick_free_port();
  job.cluster_token = knob_string(distributed::kClusterTokenKnob);
  if (job.cluster_token.empty()) job.cluster_token = random_token();
  return job;
}

JobEnvironment restarted_job_environment(const LaunchOptions& options, JobEnvironment job) {
  if (options.master_port == 0) job.master_port = pick_free_port();
  ++job.restart_count;
  return job;
}

std::vector<std::string> rank_environment(const LaunchOptions& options, const JobEnvironment& job,
                                          int local_rank) {
  // A map keeps one value per name: ours replace any the launcher inherited (a stale RANK, say).
  std::map<std::string, std::string> variables;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    std::string text = *entry;
    const auto equals = text.find('=');
    if (equals == std::string::npos) continue;
    variables[text.substr(0, equals)] = text.substr(equals + 1);
  }
  const int rank = options.node_rank * options.nproc_per_node + local_rank;
  variables["RANK"] = std::to_string(rank);
  variables["WORLD_SIZE"] = std::to_string(options.world_size());
  variables["LOCAL_RANK"] = std::to_string(local_rank);
  variables["LOCAL_WORLD_SIZE"] = std::to_string(options.nproc_per_node);
  variables["GROUP_RANK"] = std::to_string(options.node_rank);
  variables["GROUP_WORLD_SIZE"] = std::to_string(options.nnodes);
  variables["MASTER_ADDR"] = job.master_addr;
  variables["MASTER_PORT"] = std::to_string(job.master_port);
  variables["TORCHELASTIC_RESTART_COUNT"] = std::to_string(job.restart_count);
  variables["TORCHELASTIC_MAX_RESTARTS"] = std::to_string(options.max_restarts);
  // torchrun's run id, which every rank's message log records: the one this launcher was given
  // (inherited), else one per launch, kept across restarts (on several hosts, named after the
  // rendezvous they share; set TORCHELASTIC_RUN_ID on each to tell such jobs apart).
  static const std::string launch_id = random_token().substr(0, 16);
  variables.emplace("TORCHELASTIC_RUN_ID",
                    options.nnodes > 1
                        ? "tp-launch-" + job.master_addr + ":" + std::to_string(job.master_port)
                        : launch_id);
  // tensorplay's knobs under their names (their rows: tensorplay/distributed/distributed_knobs.h,
  // observe/observe_knobs.h); an old name inherited for one of them would only make the rank warn
  // that it differs.
  auto set_knob = [&](const KnobSpec& spec, const std::string& value) {
    variables[std::string(spec.name)] = value;
    if (!spec.alias.empty()) variables.erase(std::string(spec.alias));
  };
  set_knob(distributed::kClusterTokenKnob, job.cluster_token);
  set_knob(distributed::kRdzvTimeoutKnob, std::to_string(options.rdzv_timeout_seconds));
  if (!options.log_dir.empty()) set_knob(pipelining::kLogDirKnob, options.log_dir);
  // UCX's virtual file system (a debugging view of its objects) registers every endpoint a
  // peer opens from UCX's own thread, and under heavy load that races with the progress thread
  // (an assertion in vfs_obj.c aborts the rank). Off unless the user asks for it.
  variables.emplace("UCX_VFS_ENABLE", "n");
  // UCX's memory-event hooks patch the C library's mmap, munmap and brk at run time for its
  // registration cache; they stay patched after UCX has closed, and a rank's exit handlers then
  // free into them (seen as heap corruption or SIGSEGV at exit, rarely, under load; TSan builds
  // crash there every time). Shared memory, CMA and tcp do not need that cache. Off unless the
  // user asks for it.
  variables.emplace("UCX_MEM_EVENTS", "no");

  std::vector<std::string> environment;
  environment.reserve(variables.size());
  for (const auto& [name, value] : variables) environment.push_back(name + "=" + value);
  return environment;
}

}  // namespace tensorplay::launch
