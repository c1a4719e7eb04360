// Argument checks shared by the order generators (internal), with messages that say what to
// change.

#include <string_view>

namespace tensorplay::schedules::detail {

/// Throws std::invalid_argument unless ranks >= 1, stages_per_rank >= 1 and microbatches >= 1.
void check_sizes(std::string_view schedule, int ranks, int stages_per_rank, int n_microbatches);

/// Interleaved schedules run m in rounds of max(1, m / p) microbatches: m must divide evenly.
/// Returns the microbatches per round.
int microbatches_per_round(std::string_view schedule, int ranks, int n_microbatches);

}  // namespace tensorplay::schedules::detail
