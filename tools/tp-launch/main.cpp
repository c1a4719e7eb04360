// tp-launch: starts --nproc-per-node ranks of a program on this node with torchrun's environment
// (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, ...), prefixes their output with "[rank R] ", and
// stops them all as soon as one fails, exiting with that rank's status.
//
//   tp-launch --nproc-per-node 2 -- ./train --steps 10
//   tp-launch --nnodes 2 --node-rank 1 --master-addr 10.0.0.1 --master-port 29500
//             --nproc-per-node 8 --log-dir logs -- ./train
#include <fcntl.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <stdexcept>

#include "launch_options.h"
#include "rank_environment.h"
#include "rank_process.h"
#include "signal_pipe.h"
#include "supervisor.h"
#include "unique_fd.h"

namespace tl = tensorplay::launch;

namespace {

// Exit code when the launcher cannot set up the job (no rank has failed yet); 127 when the program
// cannot be started, as a shell would say.
constexpr int kSetupFailed = 1;
constexpr int kCannotStart = 127;

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
