// Token window loader: window numbering over shards, the per-epoch shuffle, and steps shared out
// among data parallel replicas.
#include "tensorplay/data/token_window_loader.h"

#include <algorithm>
#include <random>
#include <stdexcept>

namespace tensorplay::data {

TokenWindowLoader::TokenWindowLoader(const std::string& path, TokenWindowOptions options)
    : options_(options) {
  const auto& o = options;
  auto fail = [](const std::string& what) {
    throw std::invalid_argument("TokenWindowLoader: " + what);
  };
  if (o.context <= 0) fail("context must be positive, got " + std::to_string(o.context));
  if (o.dp_size <= 0 || o.dp_rank < 0 || o.dp_rank >= o.dp_size)
    fail("dp_rank " + std::to_string(o.dp_rank) + " is not in [0, dp_size " +
         std::to_string(o.dp_size) + ")");
  if (o.batch <= 0 || o.batch % o.dp_size != 0)
    fail("batch " + std::to_string(o.batch) + " must be a positive multiple of dp_size " +
         std::to_string(o.dp_size));
  shards_ = open_token_shards(path);
  for (const auto& shard : shards_) {
    first_window_.push_back(num_windows_);
    num_windows_ += std::max<int64_t>(0, (shard.size() - 1) / o.context);
  }
  first_window_.push_back(num_windows_);
  if (num_windows_ < o.batch)
    fail(path + " holds " + std::to_string(num_windows_) + " windows of " +
         std::to_string(o.context) + " + 1 tokens, fewer than a step's batch of " +
         std::to_string(o.batch) + ": use more text, a shorter context or a smaller batch");
}

int64_t TokenWindowLoader::num_tokens() const {
  int64_t total = 0;
  for (const auto& shard : shards_) total += shard.size();
  return total;
}

void TokenWindowLoader::shuffle_for(int64_t epoch) {
  if (order_epoch_ == epoch) return;
  order_.resize(static_cast<size_t>(num_windows_));
  for (int64_t i = 0; i < num_windows_; ++i) order_[i] = i;
  // Fisher-Yates with an explicit draw, so that the order is the same with any standard library.
  std::mt19937_64 rng(options_.seed * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(epoch));
  for (int64_t i = num_windows_ - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(rng() % static_cast<uint64_t>(i + 1));
    std::swap(order_[i], order_[j]);
  }
  order_epoch_ = epoch;
}

std::vector<int64_t> TokenWindowLoader::next_windows() {
  if (position_.cursor + options_.batch > num_windows_) position_ = {position_.epoch + 1, 0};
  shuffle_for(position_.epoch);
  const int64_t share = options_.batch / options_.dp_size;
  const int64_t begin = position_.cursor + options_.dp_rank * share;
  std::vector<int64_t> windows(order_.begin() + begin, order_.begin() + begin + share);
  position_.cursor += options_.batch;
  return windows;
}

std::vector<int64_t> TokenWindowLoader::window(int64_t index) const {
  if (index < 0 || index >= num_windows_)
    throw std::out_of_range("TokenWindowLoader: window " + std::to_string(index) +
                            " is not in [0, " + std::to_string(num_windows_) + ")");
  const auto shard =
      static_cast<size_t>(std::upper_bound(first_window_.begin(), first_window_.end(), index) -
                          first_window_.begin() - 1);
  const int64_t start = (index - first_window_[shard]) * options_.context;
  std::vector<int64_t> tokens(static_cast<size_t>(options_.context + 1));
  for (int64_t i = 0; i <= options_.context; ++i) tokens[i] = shards_[shard].at(start + i);
  return tokens;
}

std::pair<Tensor, Tensor> TokenWindowLoader::next() {
  const std::vector<int64_t> windows = next_windows();
  const int64_t t = options_.context, rows = static_cast<int64_t>(windows.size());
  std::vector<float> inputs(static_cast<size_t>(rows * t)), targets(inputs.size());
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<int64_t> tokens = window(windows[r]);
    for (int64_t i = 0; i < t; ++i) {
      inputs[r * t + i] = static_cast<float>(tokens[i]);
      targets[r * t + i] = static_cast<float>(tokens[i + 1]);
    }
  }
  return {from_vector(inputs, {rows, t}), from_vector(targets, {rows, t})};
}

void TokenWindowLoader::set_position(TokenWindowPosition position) {
  if (position.epoch < 0 || position.cursor < 0 || position.cursor > num_windows_)
    throw std::invalid_argument("TokenWindowLoader: position (epoch " +
                                std::to_string(position.epoch) + ", cursor " +
                                std::to_string(position.cursor) + ") does not fit " +
                                std::to_string(num_windows_) + " windows");
  position_ = position;
}

TokenWindowPosition TokenWindowLoader::position_after(int64_t steps) const {
  const int64_t per_epoch = num_windows_ / options_.batch;
  if (steps == 0) return {};
  // The k-th step (1-based) ends at cursor ((k - 1) % per_epoch + 1) batch of epoch
  // (k - 1) / per_epoch.
  return {(steps - 1) / per_epoch, ((steps - 1) % per_epoch + 1) * options_.batch};
}

}  // namespace tensorplay::data
