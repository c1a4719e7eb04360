// What the pipeline did in each step, measured: the message log kept in memory and read back after
// every step into the simulator's figures (makespan, busy and idle per rank, bubble, peak
// activations), the same ones tp-trace prints from a log file.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "tensorplay/schedules/simulator.h"

namespace train_gpt {

/// Turns the message log on (in memory; the terminal stays quiet unless SPDLOG_LEVEL is set) and
/// hands back each step's timeline.
class StepWatch {
 public:
  StepWatch();
  ~StepWatch();
  StepWatch(const StepWatch&) = delete;
  StepWatch& operator=(const StepWatch&) = delete;

  /// The timeline of the step that ran since the last call (times in microseconds), or nothing
  /// when no compute action was logged. In a run across processes it holds this process's
  /// ranks only.
  std::optional<tensorplay::schedules::SimulationResult> take_step();
  /// Drops what was logged since the last call (an eval pass that is not measured).
  void discard();

 private:
  struct Sink;
  std::shared_ptr<Sink> sink_;
};

}  // namespace train_gpt
