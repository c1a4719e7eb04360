// Parsing and checking tp-launch's command line. Flags follow torchrun's names, with dashes or
// underscores (--nproc-per-node or --nproc_per_node); the program to start follows `--`.
#include "launch_options.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstring>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string_view>

#include "bench/bench_knobs.h"
#include "tensorplay/base/knobs.h"

namespace tensorplay::launch {
namespace {

constexpr const char* kFooter = R"(Each rank's environment (as torchrun sets it):
  RANK, WORLD_SIZE (nnodes * nproc-per-node), LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK (node rank),
  GROUP_WORLD_SIZE (nnodes), MASTER_ADDR, MASTER_PORT,
  TORCHELASTIC_RUN_ID (kept if set, else one per launch),
  TENSORPLAY_CLUSTER_TOKEN (kept if set, else 32 random hex digits shared by all ranks),
  TENSORPLAY_RDZV_TIMEOUT (seconds), TENSORPLAY_LOG_DIR (with --log-dir).
tensorplay's other knobs pass through; --print-config lists them all.
Each line a rank prints is prefixed with "[rank R] " on tp-launch's stdout or stderr; a line over
64 KiB comes in pieces, each further piece prefixed "[rank R+] ". When a rank fails, the others get
SIGTERM, then SIGKILL after --grace-seconds; tp-launch exits with the failed rank's status (128 +
signal if it was killed). SIGINT and SIGTERM are forwarded to all ranks; on SIGHUP they get SIGTERM
(tp-launch exits 129). Ranks get SIGKILL when tp-launch dies.

Examples:
  tp-launch --nproc-per-node 4 -- ./train --steps 100
  tp-launch --nnodes 2 --node-rank 0 --master-addr 10.0.0.1 --master-port 29500 \
            --nproc-per-node 8 --log-dir logs -- ./train)";

// CLI11 would show the hidden catch-all positional as "[...]"; say where the program goes instead.
class UsageFormatter : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App*, std::string) const override {
    return "Usage: tp-launch --nproc-per-node N [flags] -- program [args...]\n";
  }
};

// Raised by check_options with a message that names the flag.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void require(bool condition, const std::string& message) {
  if (!condition) throw UsageError(message);
}

// Cross-field rules CLI11 cannot express: counts, ranges and which flags a multi-node job needs.
// --nnodes N or MIN:MAX (elastic only).
void parse_nnodes(LaunchOptions& options, const std::string& text) {
  const size_t colon = text.find(':');
  auto number = [&](const std::string& part) {
    require(!part.empty() && part.size() < 6 &&
                part.find_first_not_of("0123456789") == std::string::npos,
            "--nnodes takes N or MIN:MAX (got '" + text + "')");
    return std::stoi(part);
  };
  options.nnodes = number(colon == std::string::npos ? text : text.substr(colon + 1));
  options.min_nodes = colon == std::string::npos ? options.nnodes : number(text.substr(0, colon));
  require(colon == std::string::npos || options.elastic(),
          "--nnodes MIN:MAX needs --rdzv-endpoint HOST:PORT (an elastic job)");
}

// Elastic mode: nodes meet at the endpoint; the master address and port come with each round.
void check_elastic(LaunchOptions& options, const CLI::App& app) {
  auto given = [&](const char* flag) { return app.count(flag) > 0; };
  const size_t colon = options.rdzv_endpoint.rfind(':');
  require(
      colon != std::string::npos && colon > 0 &&
          options.rdzv_endpoint.find_first_not_of("0123456789", colon + 1) == std::string::npos &&
          colon + 1 < options.rdzv_endpoint.size(),
      "--rdzv-endpoint takes HOST:PORT (got '" + options.rdzv_endpoint + "')");
  require(options.min_nodes >= 1 && options.min_nodes <= options.nnodes,
          "--nnodes MIN:MAX needs 1 <= MIN <= MAX (got " + std::to_string(options.min_nodes) + ":" +
              std::to_string(options.nnodes) + ")");
  for (const char* flag : {"--master-addr", "--master-port", "--standalone"})
    require(!given(flag),
            std::string("--rdzv-endpoint gives every round its rendezvous; drop ") + flag);
  if (given("--node-rank")) {
    require(options.node_rank >= 0 && options.node_rank < options.nnodes,
            "--node-rank must be in 0.." + std::to_string(options.nnodes - 1) + " (got " +
                std::to_string(options.node_rank) + ")");
    options.elastic_node_rank = options.node_rank;
  }
  require(!options.rdzv_id.empty() && options.rdzv_id.find_first_of(" \t\n") == std::string::npos,
          "--rdzv-id must be one word");
}

void check_options(LaunchOptions& options, const CLI::App& app) {
  auto given = [&](const char* flag) { return app.count(flag) > 0; };
  require(options.nproc_per_node >= 1, "--nproc-per-node must be at least 1 (got " +
                                           std::to_string(options.nproc_per_node) + ")");
  require(options.nnodes >= 1,
          "--nnodes must be at least 1 (got " + std::to_string(options.nnodes) + ")");
  require(options.max_restarts >= 0,
          "--max-restarts must be 0 or more (got " + std::to_string(options.max_restarts) + ")");
  require(options.max_restarts == 0 || options.nnodes == 1 || options.elastic(),
          "--max-restarts " + std::to_string(options.max_restarts) +
              " needs a single-node job (--nnodes 1) or an elastic one (--rdzv-endpoint)");
  require(options.rdzv_timeout_seconds >= 1, "--rdzv-timeout must be at least 1 second (got " +
                                                 std::to_string(options.rdzv_timeout_seconds) +
                                                 ")");
  require(options.grace_seconds >= 0.0 && options.grace_seconds <= 3600.0,
          "--grace-seconds must be between 0 and 3600 (got " +
              std::to_string(options.grace_seconds) + ")");
  if (options.elastic()) return check_elastic(options, app);
  if (given("--master-port")) {
    require(options.master_port >= 1 && options.master_port <= 65535,
            "--master-port must be in 1..65535 (got " + std::to_string(options.master_port) + ")");
  }
  if (given("--master-addr")) {
    require(!options.master_addr.empty(), "--master-addr must not be empty");
  }

  if (options.standalone) {
    require(options.nnodes == 1, "--standalone runs one node, but --nnodes is " +
                                     std::to_string(options.nnodes) +
                                     "; drop --standalone or --nnodes");
    for (const char* flag : {"--master-addr", "--master-port", "--node-rank"}) {
      require(!given(flag), std::string("--standalone picks its own rendezvous; drop ") + flag);
    }
  }
  if (options.nnodes > 1) {
    for (const char* flag : {"--node-rank", "--master-addr", "--master-port"}) {
      require(given(flag), std::string(flag) + " is required when --nnodes is " +
                               std::to_string(options.nnodes) + " (more than one node)");
    }
  }
  require(options.node_rank >= 0 && options.node_rank < options.nnodes,
          "--node-rank must be in 0.." + std::to_string(options.nnodes - 1) + " for --nnodes " +
              std::to_string(options.nnodes) + " (got " + std::to_string(options.node_rank) + ")");

  // One node without a rendezvous named: run standalone, as torchrun does.
  if (options.nnodes == 1 && !given("--master-addr") && !given("--master-port")) {
    options.standalone = true;
  }
  if (options.master_addr.empty()) options.master_addr = "127.0.0.1";
}

// --nnodes (N or MIN:MAX) and the elastic rendezvous's flags.
void add_node_options(CLI::App& app, LaunchOptions& options, std::string& nnodes) {
  app.add_option("--nnodes", nnodes,
                 "Nodes in the job, or MIN:MAX for an elastic job (--rdzv-endpoint)")
      ->capture_default_str();
  app.add_option("--rdzv-endpoint,--rdzv_endpoint", options.rdzv_endpoint,
                 "HOST:PORT where the launchers of an elastic job meet each round (the first "
                 "launcher that can listen there serves it, never one given a --node-rank "
                 "other than 0)");
  app.add_option("--rdzv-id,--rdzv_id", options.rdzv_id,
                 "The elastic job's name; every node passes the same")
      ->capture_default_str();
}

// Every flag of the launcher, in --help's order.
void add_options(CLI::App& app, LaunchOptions& options, std::string& nnodes) {
  app.add_option("--nproc-per-node,--nproc_per_node", options.nproc_per_node,
                 "Ranks (processes) to start on this node")
      ->required();
  add_node_options(app, options, nnodes);
  app.add_option("--node-rank,--node_rank", options.node_rank,
                 "This node's index, 0..nnodes-1 (required with --nnodes > 1)");
  app.add_option("--master-addr,--master_addr", options.master_addr,
                 "Host where rank 0 listens (required with --nnodes > 1)");
  app.add_option("--master-port,--master_port", options.master_port,
                 "Port where rank 0 listens (required with --nnodes > 1)");
  app.add_flag("--standalone", options.standalone,
               "One node, rendezvous on 127.0.0.1 at a free port (the default for one node)");
  app.add_option("--log-dir,--log_dir", options.log_dir,
                 "Also write each rank's output to DIR/rank_R.log; sets TENSORPLAY_LOG_DIR for the "
                 "ranks");
  app.add_option("--max-restarts,--max_restarts", options.max_restarts,
                 "Times to restart every rank after one fails (TORCHELASTIC_RESTART_COUNT "
                 "tells a rank which attempt it is; resume from a checkpoint)")
      ->capture_default_str();
  app.add_option("--rdzv-timeout,--rdzv_timeout", options.rdzv_timeout_seconds,
                 "Seconds the ranks may take to find each other (TENSORPLAY_RDZV_TIMEOUT)")
      ->capture_default_str();
  app.add_option("--grace-seconds,--grace_seconds", options.grace_seconds,
                 "Seconds between SIGTERM and SIGKILL when stopping ranks")
      ->capture_default_str();
  app.add_flag("--print-config,--print_config")
      ->description(
          "Print every tensorplay knob (environment variable) with its value here and where it "
          "comes from (default, environment, alias), then exit; as ucx_info -c does");
}

}  // namespace

ParsedCommandLine parse_command_line(int argc, char** argv) {
  // Everything after the first `--` belongs to the program, so CLI11 sees only what comes before.
  char** separator = std::find_if(argv + 1, argv + argc,
                                  [](const char* arg) { return std::strcmp(arg, "--") == 0; });
  const int launcher_argc = static_cast<int>(separator - argv);

  LaunchOptions options;
  CLI::App app{
      "tp-launch: starts one process per rank on this node with torchrun's environment, "
      "relays their output, and stops them all when one fails.",
      "tp-launch"};
  app.formatter(std::make_shared<UsageFormatter>());
  app.footer(kFooter);
  std::string nnodes = "1";
  add_options(app, options, nnodes);
  std::vector<std::string> stray;
  app.add_option("stray", stray)->group("");  // a program given without `--`, to say so

  // --print-config needs nothing else (no ranks, no program), so it is answered before parsing.
  if (std::any_of(argv + 1, separator, [](const char* arg) {
        return std::strcmp(arg, "--print-config") == 0 || std::strcmp(arg, "--print_config") == 0;
      })) {
    bench::register_bench_knobs();  // one table: the library's knobs and the benchmarks'
    return {std::nullopt, process_knobs().print(std::cout) == 0 ? 0 : 2};
  }

  try {
    app.parse(launcher_argc, argv);
    require(stray.empty(), "put `--` before the program: tp-launch [flags] -- " +
                               (stray.empty() ? std::string() : stray.front()) + " ...");
    require(separator != argv + argc && separator + 1 != argv + argc,
            "no program given: tp-launch [flags] -- program [args...]");
    parse_nnodes(options, nnodes);
    check_options(options, app);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return {std::nullopt, app.exit(e)};  // --help
    std::cerr << "tp-launch: " << e.what() << "\nRun tp-launch --help for usage.\n";
    return {std::nullopt, 2};
  } catch (const UsageError& e) {
    std::cerr << "tp-launch: " << e.what() << "\nRun tp-launch --help for usage.\n";
    return {std::nullopt, 2};
  }
  options.program.assign(separator + 1, argv + argc);
  return {std::move(options), 0};
}

}  // namespace tensorplay::launch
