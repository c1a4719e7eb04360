#include "tensorplay/schedules/detail/generator_checks.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace tensorplay::schedules::detail {

void check_sizes(std::string_view schedule, int ranks, int stages_per_rank, int n_microbatches) {
  std::string name(schedule);
  if (ranks < 1) {
    throw std::invalid_argument(name + " needs at least 1 rank, got " + std::to_string(ranks));
  }
  if (stages_per_rank < 1) {
    throw std::invalid_argument(name + " needs at least 1 stage per rank, got " +
                                std::to_string(stages_per_rank));
  }
  if (n_microbatches < 1) {
    throw std::invalid_argument(name + " needs at least 1 microbatch, got " +
                                std::to_string(n_microbatches));
  }
}

int microbatches_per_round(std::string_view schedule, int ranks, int n_microbatches) {
  int rounds = std::max(1, n_microbatches / ranks);
  if (n_microbatches % rounds != 0) {
    throw std::invalid_argument(
        std::string(schedule) + " requires the number of microbatches to be a multiple of the " +
        "number of rounds (" + std::to_string(rounds) +
        " = max(1, microbatches / ranks)), but got " + std::to_string(n_microbatches) +
        " microbatches for " + std::to_string(ranks) +
        " ranks; pick a microbatch count that the round count divides");
  }
  return n_microbatches / rounds;
}

}  // namespace tensorplay::schedules::detail
