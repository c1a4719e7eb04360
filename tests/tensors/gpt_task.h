// A small synthetic language task for GPT tests: every sequence repeats a random pattern of
// `period` tokens, so from the second period on the next token is determined by the context.
#pragma once

#include <utility>
#include <vector>

#include "tensorplay/tensor.h"

namespace gpt_task {

namespace tp = tensorplay;

/// idx [batch, time] and targets [batch * time]; targets of positions whose next token is not yet
/// determined (t < period - 1) are -100 (cross_entropy's ignore_index).
inline std::pair<tp::Tensor, tp::Tensor> batch(tp::Generator& gen, int64_t batch, int64_t time,
                                               int64_t vocab, int64_t period = 4) {
  std::vector<float> idx, targets;
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<float> pattern(period);
    for (auto& p : pattern) p = static_cast<float>(static_cast<int64_t>(gen.uniform() * vocab));
    for (int64_t t = 0; t < time; ++t) {
      idx.push_back(pattern[t % period]);
      targets.push_back(t < period - 1 ? -100.0f : pattern[(t + 1) % period]);
    }
  }
  return {tp::from_vector(idx, {batch, time}), tp::from_vector(targets, {batch * time})};
}

/// Mean cross entropy of the model's next-token predictions.
inline tp::Tensor loss(tp::nn::GPT& model, const tp::Tensor& idx, const tp::Tensor& targets) {
  tp::Tensor logits = model(idx);
  return tp::cross_entropy(logits.reshape({-1, logits.size(-1)}), targets);
}

}  // namespace gpt_task
