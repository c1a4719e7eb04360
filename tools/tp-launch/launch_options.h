// tp-launch's command line: what to start (the program after `--`), how many ranks on this node
// and in the whole job, where rank 0 listens, and how to stop. Parsed and checked in one place so
// the rest of the launcher can trust every field.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace tensorplay::launch {

struct LaunchOptions {
  int nproc_per_node = 0;
  int nnodes = 1;
  int node_rank = 0;
  /// Empty until resolved: --standalone picks 127.0.0.1 and a free port at launch time.
  std::string master_addr;
  int master_port = 0;
  bool standalone = false;
  std::string log_dir;  ///< empty: no per-rank log files
  int max_restarts = 0;
  int rdzv_timeout_seconds = 900;
  double grace_seconds = 5.0;
  std::vector<std::string> program;  ///< program and its arguments, everything after `--`
  /// Elastic mode (--rdzv-endpoint HOST:PORT): the launchers of all nodes meet there each round
  /// (tools/tp-launch/rdzv_endpoint.h); --nnodes MIN:MAX bounds the nodes of a round (nnodes is
  /// MAX), --rdzv-id names the job, --node-rank (optional) orders the nodes, --max-restarts
  /// counts rounds.
  std::string rdzv_endpoint;
  std::string rdzv_id = "none";
  int min_nodes = 1;
  int elastic_node_rank = -1;  ///< --node-rank in elastic mode; -1: any

  bool elastic() const { return !rdzv_endpoint.empty(); }

  /// Ranks in the whole job.
  int world_size() const { return nnodes * nproc_per_node; }
};

/// Either options to launch with, or the exit code to leave with at once (0 after --help or
/// --print-config, 2 after a usage error or a bad knob, which has already been printed).
struct ParsedCommandLine {
  std::optional<LaunchOptions> options;
  int exit_code = 0;
};

/// Parses and checks tp-launch's arguments; every error message names the flag at fault.
ParsedCommandLine parse_command_line(int argc, char** argv);

}  // namespace tensorplay::launch
