#include "tensorplay/schedules/detail/generator_checks.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace tensorplay::schedules::detail {

void check_sizes(std::string_view schedule, int ranks, int stages_per_rank, int microbatches) {
  std::string name(schedule);
  if (ranks < 1) {
    throw std::invalid_argument(name + " needs at least 1 rank, got " + std::to_string(ranks));
  }
  if (stages_per_rank < 1) {
    throw std::invalid_argument(name + " needs at least 1 stage per rank, got " +
                                std::to_string(stages_per_rank));
  }
  if (microbatches < 1) {
    throw std::invalid_argument(name + " needs at least 1 microbatch, got " +
                                std::to_string(microbatches));
  }
}

int microbatches_per_round(std::string_view schedule, int ranks, int microbatches) {
  int rounds = std::max(1, microbatches / ranks);
  if (microbatches % rounds != 0) {
    throw std::invalid_argument(
        std::string(schedule) + " requires the number of microbatches to be a multiple of the " +
        "number of rounds (" + std::to_string(rounds) +
        " = max(1, microbatches / ranks)), but got " + std::to_string(microbatches) +
        " microbatches for " + std::to_string(ranks) +
        " ranks; pick a microbatch count that the round count divides");
  }
  return microbatches / rounds;
}

}  // namespace tensorplay::schedules::detail
