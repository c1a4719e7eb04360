// bench_runtime_vs_sim: the embedded runtime (stage actors in one process) against its own
// simulator. Stages whose forward, input-gradient and weight-gradient backward are waits of
// exactly F = I = W = 2 ms (timed_stage.h) run every schedule on 4 and 8 ranks with 16 and 32
// microbatches; each case prints the measured step time (the best of a few steps after a warm-up),
// the simulator's makespan for the same order and costs, and their ratio. The simulator is given
// the waits as they really ran (their mean, timed_stage::WaitTally), so that a late wake-up of
// the stand-in's sleep is not counted as the runtime's; "nominal_ratio" holds the step against
// the requested waits. The last line holds "bench", the worst ratio and the case it came from
// (goal: at most 1.03), and the worst nominal ratio.
//
//   bench_runtime_vs_sim [steps per case, default 3] [wait in us, default 2000]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tensorplay/pipelining/runtime/schedule.h"
#include "tensorplay/schedules/simulator.h"
#include "timed_stage.h"

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;
namespace sc = tensorplay::schedules;

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 3;
  const auto wait = std::chrono::microseconds(argc > 2 ? std::atoi(argv[2]) : 2000);
  const timed_stage::Waits waits{wait, wait, wait};
  double worst = 0.0, worst_nominal = 0.0;
  std::string worst_case;
  for (sc::ScheduleKind kind : sc::all_schedule_kinds()) {
    for (int ranks : {4, 8}) {
      for (int n : {16, 32}) {
        const int num_stages = ranks * sc::default_stages_per_rank(kind);
        auto stages = timed_stage::make_stages(num_stages, waits);
        pp::PipelineSchedule schedule(stages, n, tp::nn::mse_loss, kind);
        tp::Tensor x = tp::zeros({n, 4}), y = tp::zeros({n, 4});
        schedule.step({x}, {.target = y});  // warm-up: threads, allocations
        timed_stage::wait_tally().reset();
        double best_ms = 1e300;
        for (int s = 0; s < steps; ++s) {
          auto t0 = std::chrono::steady_clock::now();
          schedule.step({x}, {.target = y});
          auto t1 = std::chrono::steady_clock::now();
          best_ms = std::min(best_ms, std::chrono::duration<double, std::milli>(t1 - t0).count());
        }
        sc::SimulationOptions options;
        options.record_timeline = false;
        auto simulate = [&](const sc::CostModel& costs) {
          return sc::simulate_order(
                     schedule.order(),
                     sc::stage_to_rank(kind, ranks, sc::default_stages_per_rank(kind)), n, costs,
                     options)
              .makespan;
        };
        const double nominal = simulate(timed_stage::costs_of(num_stages, waits));
        const double simulated = simulate(timed_stage::measured_costs_of(num_stages, waits));
        const double ratio = best_ms / simulated;
        std::string name = std::string(sc::schedule_name(kind)) +
                           " ranks=" + std::to_string(ranks) + " microbatches=" + std::to_string(n);
        worst_nominal = std::max(worst_nominal, best_ms / nominal);
        if (ratio > worst) {
          worst = ratio;
          worst_case = name;
        }
        std::printf(
            "{\"schedule\":\"%s\",\"ranks\":%d,\"microbatches\":%d,\"measured_ms\":%.2f,"
            "\"simulated_ms\":%.2f,\"ratio\":%.4f,\"nominal_simulated_ms\":%.2f,"
            "\"nominal_ratio\":%.4f}\n",
            std::string(sc::schedule_name(kind)).c_str(), ranks, n, best_ms, simulated, ratio,
            nominal, best_ms / nominal);
        std::fflush(stdout);
      }
    }
  }
  std::printf(
      "{\"bench\":\"bench_runtime_vs_sim\",\"wait_us\":%lld,\"steps\":%d,\"ratio\":%.4f,"
      "\"worst_case\":\"%s\",\"nominal_ratio\":%.4f,\"goal\":1.03}\n",
      static_cast<long long>(wait.count()), steps, worst, worst_case.c_str(), worst_nominal);
  return 0;
}
