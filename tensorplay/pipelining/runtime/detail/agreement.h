// What each rank built, as it tells the others when a schedule is built across processes, and
// the check that they built alike (every rank runs it on the same facts, so all fail alike).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tensorplay/pipelining/tensor_meta.h"
#include "tensorplay/schedules/action.h"

namespace tensorplay::pipelining::detail {

/// Opens a rank's contribution to the construction meeting when it cannot build its share.
inline constexpr const char* kLocalError = "error: ";

/// One rank's part of the construction meeting. Small: the pipe and the order travel as hashes,
/// their full text (RankDetail) only when the hashes differ.
struct RankFacts {
  std::string error;  ///< this rank's own reason to fail (nothing else is set then)
  std::string kind;   ///< the schedule's name
  int n_microbatches = 0;
  int num_stages = 0;
  int stages_per_rank = 0;
  bool has_loss = false;  ///< a loss_fn or an outputs_loss_fn
  bool scale_grads = true;
  bool wants_nccl = false;  ///< this rank's stages could use NCCL
  uint64_t order_hash = 0;  ///< of order_text(order)
  uint64_t pipe_hash = 0;   ///< of the stages' PipeDigest; 0 for stages built by hand
  /// A stage this rank built, with the shapes and dtypes it receives and sends.
  struct Stage {
    int index = 0;
    std::vector<TensorMeta> inputs, outputs;
  };
  std::vector<Stage> stages;

  std::string encode() const;
  /// Throws std::invalid_argument for bytes that are not encode()'s (a rank of another version).
  static RankFacts decode(const std::string& bytes);
};

/// The full texts behind a rank's hashes.
struct RankDetail {
  std::string pipe;   ///< PipeDigest::encode() (empty for stages built by hand)
  std::string order;  ///< order_text(order)
  std::string encode() const;
  static RankDetail decode(const std::string& bytes);
};

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
