// train_gpt's run figures (run_figures.h).
#include "run_figures.h"

#include <algorithm>

namespace train_gpt {

double step_bubble(const tensorplay::schedules::SimulationResult& r) {
  double busy = 0, span = 0;
  for (size_t i = 0; i < r.busy.size(); ++i)
    if (r.busy[i] > 0) {  // ranks of other processes have no events here
      busy += r.busy[i];
      span += r.makespan;
    }
  return span > 0 ? 1.0 - busy / span : 0.0;
}

void RunFigures::add(const tensorplay::schedules::SimulationResult& r) {
  if (ranks.size() < r.busy.size()) ranks.resize(r.busy.size());
  for (size_t i = 0; i < r.busy.size(); ++i) {
    if (r.busy[i] <= 0) continue;  // a rank of another process
    ranks[i].seen = true;
    ranks[i].busy_us += r.busy[i];
    ranks[i].idle_us += r.idle[i];
    ranks[i].peak_activations = std::max(ranks[i].peak_activations, r.peak_activations[i]);
  }
  bubble_sum += step_bubble(r);
  ++bubble_steps;
}

}  // namespace train_gpt
