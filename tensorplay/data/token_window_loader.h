// TokenWindowLoader: training batches sampled from memory-mapped token shards: windows of a
// context's length in a shuffled order per epoch, each step's windows shared out among the data
// parallel replicas, and a position that a checkpoint saves and restores.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tensorplay/core/tensor.h"
#include "tensorplay/data/token_shards.h"

namespace tensorplay::data {

/// How a TokenWindowLoader samples.
struct TokenWindowOptions {
  int64_t context = 0;  // tokens per window (T); a window reads T + 1 tokens (inputs, targets)
  int64_t batch = 0;    // windows per step over all replicas; dp_size must divide it
  int dp_rank = 0;
  int dp_size = 1;
  uint64_t seed = 0;  // of the per-epoch shuffles
};

/// Where the sampling stands: whole epochs done and windows of the current epoch drawn (by all
/// replicas together).
struct TokenWindowPosition {
  int64_t epoch = 0;
  int64_t cursor = 0;
  bool operator==(const TokenWindowPosition&) const = default;
};

/// Window w of a shard of n tokens starts at token w T and covers T + 1 tokens, so a shard has
/// (n - 1) / T windows (a window never crosses shards); windows are numbered over the shards in
/// order. Each epoch visits every window once in an order shuffled from (seed, epoch); a step
/// takes the next `batch` windows of that order (a tail too short for a step is skipped, and the
/// next epoch begins) and replica r takes the r-th slice of batch / dp_size of them. So for
/// any dp_size the replicas' windows of a step are disjoint and together the windows dp_size 1
/// draws, and the sampling is a function of the steps drawn: position() after k steps is what
/// position_after(k) says.
class TokenWindowLoader {
 public:
  /// Opens the shards at `path` (open_token_shards). Throws std::invalid_argument naming a bad
  /// option, or shards with fewer windows than one step needs.
  TokenWindowLoader(const std::string& path, TokenWindowOptions options);

  /// This replica's windows of the next step, as global window indices; advances a step.
  std::vector<int64_t> next_windows();
  /// This replica's next step as token ids (float32, as the models take them): inputs and the
  /// targets one token on, each [batch / dp_size, context]; advances a step.
  std::pair<Tensor, Tensor> next();
  /// Window `index`'s T + 1 tokens.
  std::vector<int64_t> window(int64_t index) const;

  TokenWindowPosition position() const { return position_; }
  /// Continues from `position` (one saved from position() by a loader of the same shards and
  /// options); throws std::invalid_argument when the cursor is past the epoch's windows.
  void set_position(TokenWindowPosition position);
  /// The position after `steps` steps from the start.
  TokenWindowPosition position_after(int64_t steps) const;

  int64_t num_windows() const { return num_windows_; }
  int64_t num_tokens() const;
  const TokenWindowOptions& options() const { return options_; }

 private:
  void shuffle_for(int64_t epoch);
  std::vector<TokenShard> shards_;
  std::vector<int64_t> first_window_;  // per shard, then the total
  TokenWindowOptions options_;
  int64_t num_windows_ = 0;
  TokenWindowPosition position_;
  int64_t order_epoch_ = -1;
  std::vector<int64_t> order_;  // the shuffled windows of order_epoch_
};

}  // namespace tensorplay::data
