// tp-plan: reads a profile (pp::profile, or train_gpt --profile-out), searches every schedule,
// stages per rank, microbatch count, cut, recomputation and thread count with the simulator,
// prints the best few and why the others lost, and writes the chosen plan.
//
//   tp-plan --profile gpt.json --world 2 --batch 32 [--memory-cap 2e9] [--processes] [--top 5]
//           [--out plan.json]
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "../cli_checks.h"
#include "tensorplay/pipelining/planner/plan_file.h"
#include "tensorplay/pipelining/planner/plan_report.h"

namespace pp = tensorplay::pipelining;
namespace sc = tensorplay::schedules;

int main(int argc, char** argv) {
  CLI::App app{"tp-plan: choose a pipeline configuration from a measured profile"};
  std::string profile_path, out = "plan.json", schedules;
  pp::PlanRequest request;
  int top = 5;
  bool processes = false;
  app.add_option("--profile", profile_path, "profile JSON (pp::profile, train_gpt --profile-out)")
      ->required();
  app.add_option("--world", request.world, "ranks of the pipeline")
      ->required()
      ->check(CLI::PositiveNumber);
  app.add_option("--batch", request.batch, "samples per step")
      ->required()
      ->check(CLI::PositiveNumber);
  app.add_option("--memory-cap", request.memory_cap, "bytes per rank (0: none)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--schedules", schedules, "comma-separated schedules to try (default: all)");
  app.add_option("--max-microbatches", request.max_microbatches, "most microbatches to try")
      ->check(CLI::PositiveNumber);
  app.add_option("--channel", request.channel,
                 "the profile's channel between ranks (default: in_process; with --processes "
                 "ucx_shm, or ucx_tcp when --ranks-per-host puts ranks on several hosts)");
  app.add_option("--cores", request.cores, "cores of a host (default: the profile's)");
  app.add_option("--ranks-per-host", request.ranks_per_host, "default: the whole world");
  app.add_flag("--processes", processes,
               "one process per rank (tp-launch): each steps its own optimizer; default: the "
               "embedded runtime, one process");
  app.add_option("--top", top, "configurations to print")->check(CLI::PositiveNumber);
  app.add_option("--out", out, "where to write the chosen plan")->capture_default_str();
  try {
    tensorplay::tools::reject_unknown_flags(app, argc, argv);
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tp-plan: %s\n", e.what());
    return 2;
  }
  try {
    for (size_t at = 0; !schedules.empty() && at != std::string::npos;) {
      const size_t comma = schedules.find(',', at);
      request.schedules.push_back(sc::parse_schedule_kind(
          schedules.substr(at, comma == std::string::npos ? comma : comma - at)));
      at = comma == std::string::npos ? comma : comma + 1;
    }
    request.one_process = !processes;
    const pp::Profile profile = pp::load_profile(profile_path);
    const pp::PlanResult result = pp::plan(profile, request);
    std::cout << pp::format_plan_report(result, top);
    const pp::Plan plan = pp::make_plan(profile, result.best(), request.batch);
    pp::save_plan(plan, out);
    std::cout << "plan written to " << out << "\n";
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tp-plan: %s\n", e.what());
    return 1;
  }
  return 0;
}
