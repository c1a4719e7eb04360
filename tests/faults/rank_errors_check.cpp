// One rank of an errors-across-ranks check, started by tp-launch with two ranks:
//   --case csv-order  rank 1 is given an invalid CSV order (a backward missing): both ranks'
//   schedule
//                     construction must throw schedules::ScheduleError naming rank 1, at once
//   --case late-rank  rank 1 runs step 1, then does not call step() for step 2: rank 0's
//                     step_timeout must say that rank 1 has not started step 2 (not that it is
//                     finished)
// Prints one "rank-errors" line per rank, OK or WRONG; exits 0 when that rank saw what it should.
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <typeinfo>

#include "tensorplay/distributed/process_group.h"
#include "tensorplay/pipelining/runtime/schedule.h"
#include "tensorplay/schedules/csv.h"
#include "tensorplay/schedules/errors.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;
namespace sc = tensorplay::schedules;
namespace dist = tensorplay::distributed;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int64_t kWidth = 8;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

int report(int rank, bool ok, const std::string& what) {
  std::printf("rank-errors rank %d: %s: %s\n", rank, ok ? "OK" : "WRONG", what.c_str());
  std::fflush(stdout);
  return ok ? 0 : 1;
}

bool holds(const std::string& text, const std::string& words) {
  return text.find(words) != std::string::npos;
}

int csv_order(pp::PipelineStage& stage, int rank) {
  // Rank 0's order is whole; rank 1's, as if edited by hand, lacks rank 0's last backward.
  const sc::PipelineOrder order = sc::parse_csv(rank == 1 ? "0F0,0F1,0B0\n1F0,1B0,1F1,1B1\n"
                                                          : "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n");
  pp::ScheduleOptions options;
  options.order = order;
  const auto started = Clock::now();
  try {
    pp::Schedule1F1B schedule(stage, 2, tp::nn::mse_loss, options);
  } catch (const sc::ScheduleError& e) {
    const std::string what = e.what();
    const bool ok = holds(what, "rank 1 (") && holds(what, "the given order cannot run") &&
                    seconds_since(started) < 10;
    return report(rank, ok,
                  "ScheduleError after " + std::to_string(seconds_since(started)) + " s: " + what);
  } catch (const std::exception& e) {
    return report(rank, false,
                  std::string("not a ScheduleError (") + typeid(e).name() + "): " + e.what());
  }
  return report(rank, false, "the schedule was built from an invalid order");
}

int late_rank(pp::PipelineStage& stage, int rank) {
  pp::Schedule1F1B schedule(stage, 4, tp::nn::mse_loss,
                            {.step_timeout = std::chrono::milliseconds(1500)});
  tp::Tensor x = tp::randn({8, kWidth}), y = tp::randn({8, kWidth});
  auto step = [&] {
    schedule.step(rank == 0 ? std::vector<tp::Tensor>{x} : std::vector<tp::Tensor>{},
                  {.target = y});
  };
  step();  // step 1 runs on both ranks
  if (rank == 1) {
    // Busy elsewhere past rank 0's step_timeout (and its wind-down), then leaves.
    std::this_thread::sleep_for(std::chrono::seconds(5));
    return report(rank, true, "stayed away from step 2");
  }
  const auto started = Clock::now();
  try {
    step();
  } catch (const pp::PipelineError& e) {
    const std::string what = e.what();
    const bool ok = holds(what, "did not finish within 1500 ms") &&
                    holds(what, "rank 1: has not started step 2") &&
                    !holds(what, "rank 1: finished") && seconds_since(started) < 4;
    return report(rank, ok, "after " + std::to_string(seconds_since(started)) + " s: " + what);
  }
  return report(rank, false, "step 2 finished without rank 1");
}

}  // namespace

int main(int argc, char** argv) {
  const std::string which = argc == 3 && std::string(argv[1]) == "--case" ? argv[2] : "";
  if (which != "csv-order" && which != "late-rank") {
    std::fprintf(stderr, "usage: rank_errors_check --case csv-order|late-rank\n");
    return 2;
  }
  int rank = -1;
  try {
    dist::init_process_group({.timeout = std::chrono::seconds(30)});
    rank = dist::get_rank();
    tp::manual_seed(3);
    pp::PipelineStage stage(tp::nn::Linear(kWidth, kWidth).ptr(), rank, dist::get_world_size(),
                            tp::cpu(), std::vector<tp::Tensor>{tp::zeros({2, kWidth})});
    return which == "csv-order" ? csv_order(stage, rank) : late_rank(stage, rank);
  } catch (const std::exception& e) {
    return report(rank, false, std::string("unexpected error: ") + e.what());
  }
}
