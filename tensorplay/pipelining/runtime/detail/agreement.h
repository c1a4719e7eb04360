// The check that the ranks of a schedule built across processes built alike, from what each
// tells the others (RankFacts and RankDetail, tensorplay/wire/protocol.h) (every rank runs it on
// the same facts, so all fail alike).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tensorplay/schedules/action.h"
#include "tensorplay/wire/protocol.h"

namespace tensorplay::pipelining::detail {

/// A schedule's order as text: one line per schedule rank, its actions separated by spaces.
std::string order_text(const schedules::PipelineOrder& order);

/// What check_built_alike needs besides the facts.
struct AgreementContext {
  std::string name;                          ///< the schedule's, opening every message
  std::function<std::string(int)> describe;  ///< "rank 1 (host)", by schedule rank
  /// Every rank's RankDetail bytes by schedule rank; a collective, called on every rank alike
  /// (the decision to call it depends on the facts only).
  std::function<std::vector<std::string>()> gather_detail;
};

/// Throws schedules::ScheduleError when the ranks built differently, naming two ranks and the
/// first difference: a loss function on one rank and none on another, scale_grads, the cuts of
/// their pipes ("rank 0 cuts before layers.1, rank 1 before layers.2"), a boundary whose sender
/// and receiver disagree ("on rank 1, stage 1 expects float32[4,16] from stage 0; rank 0 sends
/// bfloat16[4,16]"), the order, then the rest of the pipes (parameters, graph). Call it after
/// the checks of kind, counts and placement: every stage is built on exactly one rank.
void check_built_alike(const std::vector<RankFacts>& facts, const AgreementContext& context);

}  // namespace tensorplay::pipelining::detail
