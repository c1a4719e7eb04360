// tp-launch: starts --nproc-per-node ranks of a program on this node with torchrun's environment
// (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, ...), prefixes their output with "[rank R] ", and
// stops them all as soon as one fails, exiting with that rank's status.
//
//   tp-launch --nproc-per-node 2 -- ./train --steps 10
//   tp-launch --nnodes 2 --node-rank 1 --master-addr 10.0.0.1 --master-port 29500
//             --nproc-per-node 8 --log-dir logs -- ./train
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <stdexcept>

#include "launch_options.h"
#include "rank_environment.h"
#include "rank_process.h"
#include "rdzv_endpoint.h"
#include "signal_pipe.h"
#include "supervisor.h"
#include "unique_fd.h"

namespace tl = tensorplay::launch;

namespace {

// Exit code when the launcher cannot set up the job (no rank has failed yet); 127 when the program
// cannot be started, as a shell would say.
constexpr int kSetupFailed = 1;
constexpr int kCannotStart = 127;
// Exit code of ranks stopped because the elastic rendezvous ended their round (not a failure).
constexpr int kRoundEnded = 75;

// Creates --log-dir and makes it absolute, so ranks that change directory still find it.
void prepare_log_dir(tl::LaunchOptions& options) {
  if (options.log_dir.empty()) return;
  std::error_code error;
  std::filesystem::create_directories(options.log_dir, error);
  if (error) {
    throw std::runtime_error("cannot create --log-dir " + options.log_dir + ": " + error.message());
  }
  options.log_dir = std::filesystem::absolute(options.log_dir).lexically_normal().string();
}

tl::UniqueFd open_rank_log(const tl::LaunchOptions& options, int rank, bool restart) {
  if (options.log_dir.empty()) return {};
  const std::string path = options.log_dir + "/rank_" + std::to_string(rank) + ".log";
  // A restart appends: the log keeps what the failed attempt said.
  const int mode = restart ? O_APPEND : O_TRUNC;
  tl::UniqueFd file(::open(path.c_str(), O_WRONLY | O_CREAT | mode | O_CLOEXEC, 0644));
  if (!file) throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno));
  return file;
}

// Starts every local rank; a rank that cannot start stops the ones already running.
void start_ranks(const tl::LaunchOptions& options, const tl::JobEnvironment& job,
                 tl::Supervisor& supervisor) {
  for (int local_rank = 0; local_rank < options.nproc_per_node; ++local_rank) {
    const int rank = options.node_rank * options.nproc_per_node + local_rank;
    try {
      tl::UniqueFd log_file = open_rank_log(options, rank, job.restart_count > 0);
      supervisor.add_rank(
          tl::start_rank(rank, options.program, tl::rank_environment(options, job, local_rank)),
          std::move(log_file));
    } catch (const std::runtime_error& e) {
      supervisor.abort_launch(std::string("tp-launch: ") + e.what(), kCannotStart);
      return;
    }
  }
}

// Elastic mode: this node's launcher serves the endpoint when it can listen there, unless it was
// given a --node-rank other than 0 (so on one host the endpoint stays with node 0).
std::unique_ptr<tl::RdzvServer> serve_endpoint(const tl::LaunchOptions& options,
                                               const tl::JobEnvironment& job,
                                               const std::string& host, int port) {
  if (options.elastic_node_rank > 0) return nullptr;
  try {
    return std::make_unique<tl::RdzvServer>(
        host, port,
        tl::RdzvConfig{.job_id = options.rdzv_id,
                       .min_nodes = options.min_nodes,
                       .max_nodes = options.nnodes,
                       .timeout_seconds = static_cast<double>(options.rdzv_timeout_seconds),
                       .max_restarts = options.max_restarts,
                       .token = job.cluster_token});
  } catch (const std::runtime_error&) {
    return nullptr;  // another node's launcher serves it
  }
}

// Runs this node's ranks for one round; true when the round ended for a reason to join again
// (a failure here or on another node, a node leaving or joining), false when the job is over
// (`exit_code` then holds how).
bool run_round(const tl::LaunchOptions& options, const tl::JobEnvironment& job,
               tl::RdzvClient& client, int& exit_code) {
  tl::Supervisor supervisor(options.grace_seconds);
  bool ended = false, endpoint_lost = false;
  supervisor.watch(
      client.fd(),
      [&]() -> std::optional<std::string> {
        try {
          if (!client.round_ended(0)) return std::nullopt;
          ended = true;
          return "tp-launch: the rendezvous ended round " + std::to_string(job.restart_count) +
                 " (a node failed, left or joined): stopping this node's ranks to join the next";
        } catch (const std::runtime_error& e) {
          endpoint_lost = true;  // the ranks may still finish; no later round is possible
          supervisor.unwatch();
          std::cerr << "tp-launch: " << e.what() << "\n";
          return std::nullopt;
        }
      },
      kRoundEnded);
  start_ranks(options, job, supervisor);
  const tl::Outcome outcome = supervisor.run();
  if (!outcome.message.empty()) std::cerr << outcome.message << "\n";
  exit_code = outcome.exit_code;
  if (outcome.launcher_signalled || endpoint_lost) return false;
  if (outcome.exit_code == 0 && !ended) {
    client.report_done();
    return false;
  }
  if (ended) return true;
  client.report_failure();  // a rank of this node failed: the round ends everywhere
  for (int waited = 0; waited < options.rdzv_timeout_seconds; ++waited)
    if (client.round_ended(1.0)) return true;
  return false;
}

// An elastic job: join each round at --rdzv-endpoint and run this node's ranks in it.
int run_elastic(tl::LaunchOptions options, tl::JobEnvironment job) {
  const size_t colon = options.rdzv_endpoint.rfind(':');
  const std::string host = options.rdzv_endpoint.substr(0, colon);
  const int port = std::stoi(options.rdzv_endpoint.substr(colon + 1));
  const auto server = serve_endpoint(options, job, host, port);
  char name[256] = "node";
  ::gethostname(name, sizeof(name) - 1);
  const tl::JoinRequest request{.job_id = options.rdzv_id,
                                .node_id = std::string(name) + "." + std::to_string(::getpid()),
                                .node_rank = options.elastic_node_rank,
                                .nproc = options.nproc_per_node,
                                .token = job.cluster_token};
  try {
    tl::RdzvClient client(host, port, options.rdzv_timeout_seconds);
    for (;;) {
      const tl::RoundAssignment round = client.join(request, options.rdzv_timeout_seconds + 60.0);
      options.nnodes = round.nnodes;
      options.node_rank = round.node_index;
      job.master_addr = options.master_addr = round.master_addr;
      job.master_port = port + 1 + round.round % 50;
      job.restart_count = round.round;
      std::cerr << "tp-launch: round " << round.round << ": node " << round.node_index << " of "
                << round.nnodes << ", ranks " << round.rank_offset << ".."
                << round.rank_offset + options.nproc_per_node - 1 << " of " << round.world_size
                << "\n";
      int exit_code = 0;
      if (!run_round(options, job, client, exit_code)) return exit_code;
    }
  } catch (const std::runtime_error& e) {
    std::cerr << "tp-launch: " << e.what() << "\n";
    return kSetupFailed;
  }
}

}  // namespace

int main(int argc, char** argv) {
  tl::ParsedCommandLine parsed = tl::parse_command_line(argc, argv);
  if (!parsed.options) return parsed.exit_code;
  tl::LaunchOptions& options = *parsed.options;

  tl::JobEnvironment job;
  try {
    prepare_log_dir(options);
    job = tl::resolve_job_environment(options);
    tl::install_signal_pipe();  // before the first rank starts, so no SIGCHLD is missed
  } catch (const std::runtime_error& e) {
    std::cerr << "tp-launch: " << e.what() << "\n";
    return kSetupFailed;
  }

  if (options.elastic()) return run_elastic(options, job);

  // torchrun's rule: when a rank fails, every rank is stopped and all are started again, up to
  // --max-restarts times; the program resumes from its last checkpoint.
  for (;;) {
    tl::Supervisor supervisor(options.grace_seconds);
    start_ranks(options, job, supervisor);
    const tl::Outcome outcome = supervisor.run();
    if (!outcome.message.empty()) std::cerr << outcome.message << "\n";
    if (outcome.exit_code == 0 || outcome.launcher_signalled ||
        job.restart_count >= options.max_restarts)
      return outcome.exit_code;
    try {
      job = tl::restarted_job_environment(options, std::move(job));
    } catch (const std::runtime_error& e) {
      std::cerr << "tp-launch: cannot restart: " << e.what() << "\n";
      return outcome.exit_code;
    }
    std::cerr << "tp-launch: restarting every rank (restart " << job.restart_count << " of "
              << options.max_restarts << ")\n";
  }
}
