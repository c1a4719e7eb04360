// bench_sim_scale: how long the simulator takes for 1F1B on 1024 ranks and 8192 microbatches
// (16.8 million compute actions). Prints one JSON line per phase, the last with "bench" and
// "seconds" (the simulation itself; generation and policy setup are reported beside it).
//
//   bench_sim_scale [ranks] [microbatches]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <vector>

#include "tensorplay/schedules/generators.h"
#include "tensorplay/schedules/policy.h"
#include "tensorplay/schedules/schedule_kind.h"
#include "tensorplay/schedules/simulator.h"

namespace ts = tensorplay::schedules;

int main(int argc, char** argv) {
  const int ranks = argc > 1 ? std::atoi(argv[1]) : 1024;
  const int n_microbatches = argc > 2 ? std::atoi(argv[2]) : 8192;
  using clock = std::chrono::steady_clock;
  auto seconds = [](clock::time_point a, clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  };

  // Each rank's order is generated and turned into its policy at once, while it is in cache: the
  // whole order (16.8 million actions of 32 bytes) is never held.
  auto t0 = clock::now();
  std::vector<std::unique_ptr<ts::SchedulePolicy>> owned;
  std::vector<ts::SchedulePolicy*> policies;
  for (int rank = 0; rank < ranks; ++rank) {
    owned.push_back(
        ts::make_static_order_policy(ts::one_f_one_b_rank_order(ranks, rank, n_microbatches)));
    policies.push_back(owned.back().get());
  }
  auto t1 = clock::now();
  const std::vector<int> placement = ts::stage_to_rank(ts::ScheduleKind::OneFOneB, ranks, 1);
  auto t2 = clock::now();
  const std::clock_t cpu_start = std::clock();
  ts::SimulationOptions options;
  options.record_timeline = false;
  ts::SimulationResult result =
      ts::simulate(policies, placement, n_microbatches, ts::CostModel::uniform(1, 1, 1), options);
  auto t3 = clock::now();
  const double cpu_seconds = double(std::clock() - cpu_start) / CLOCKS_PER_SEC;

  // Unit costs: (m + p - 1) * (F + B) = (m + p - 1) * 3.
  const double expected = 3.0 * (n_microbatches + ranks - 1);
  std::printf("{\"phase\":\"generate and policies\",\"seconds\":%.3f}\n", seconds(t0, t2));
  std::printf(
      "{\"bench\":\"bench_sim_scale\",\"schedule\":\"1F1B\",\"ranks\":%d,\"microbatches\":%d,"
      "\"actions\":%zu,\"makespan\":%.1f,\"makespan_ok\":%s,\"seconds\":%.3f,"
      "\"cpu_seconds\":%.3f,\"total_seconds\":%.3f}\n",
      ranks, n_microbatches, result.actions, result.makespan,
      result.makespan == expected ? "true" : "false", seconds(t2, t3), cpu_seconds,
      seconds(t0, t3));
  return result.makespan == expected ? 0 : 1;
}
