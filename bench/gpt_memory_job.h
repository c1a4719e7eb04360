// The GPT the memory benchmarks run: train_gpt's model (width, heads, batch and microbatches by
// default) cut at blocks into stages in one process, with a character vocabulary of 65, random
// tokens and a cross-entropy loss.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensorplay/pipelining/pipeline.h"
#include "tensorplay/pipelining/runtime/memory_profile.h"
#include "tensorplay/pipelining/runtime/schedule.h"
#include "tensorplay/schedules/schedule_kind.h"
#include "tensorplay/tensor.h"

namespace bench {

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;
namespace sc = tensorplay::schedules;

/// The model and pipeline shape.
struct GptMemoryJob {
  int64_t layers = 4;
  int64_t width = 128;
  int64_t heads = 4;
  int64_t context = 64;
  int64_t vocab = 65;
  int64_t batch = 32;
  int n_microbatches = 8;
  float dropout = 0.0f;  // after the embeddings, attention output and MLP output

  int64_t rows() const { return batch / n_microbatches; }

  pp::LossFn loss() const {
    return [v = vocab](const tp::Tensor& logits, const tp::Tensor& targets) {
      return tp::cross_entropy(logits.reshape({-1, v}), targets.reshape({-1}));
    };
  }

  /// The model cut before evenly spaced blocks into `stages` stages, each with `recompute`.
  std::vector<std::shared_ptr<pp::PipelineStage>> build(int stages,
                                                        const std::string& recompute) const {
    tp::manual_seed(11);
    auto model = tp::nn::GPT(tp::nn::GPTConfig{.vocab_size = vocab,
                                               .context_length = context,
                                               .n_layer = layers,
                                               .n_head = heads,
                                               .width = width,
                                               .dropout = dropout})
                     .ptr();
    pp::PipelineOptions split;
    for (int s = 1; s < stages; ++s)
      split.split_spec["blocks." + std::to_string(s * layers / stages)] = pp::SplitPoint::Beginning;
    auto pipe = pp::pipeline(model, {tp::zeros({rows(), context})}, split);
    auto built = pp::build_stages(pipe, {tp::cpu()});
    for (auto& s : built) s->set_recompute(pp::RecomputePolicy::parse(recompute));
    return built;
  }

  /// Random tokens [batch, context] (inputs or targets).
  tp::Tensor tokens(tp::Generator& g) const {
    return tp::randint(0, vocab, {batch, context}, {}, &g);
  }

  /// Each stage's profile of one microbatch (before any schedule claims the stages).
  std::vector<pp::StageMemoryProfile> profile(
      const std::vector<std::shared_ptr<pp::PipelineStage>>& stages) const {
    tp::Generator g(5);
    const tp::Tensor target = tp::randint(0, vocab, {rows(), context}, {}, &g);
    std::vector<pp::StageMemoryProfile> out;
    for (const auto& s : stages)
      out.push_back(pp::profile_stage_memory(*s, {.loss_fn = loss(), .target = target}));
    return out;
  }
};

/// Seconds since `start`.
inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// The median of `values` (0 for none).
inline double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

/// "[1,2,3]": byte counts as a JSON list of whole numbers.
inline std::string json_list(const std::vector<double>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i)
    out += (i ? "," : "") + std::to_string(static_cast<long long>(values[i]));
  return out + "]";
}

/// What each accepted "--flag N" does with its value.
using FlagSetters = std::map<std::string, std::function<void(long)>>;

/// Reads the command line as "--flag N" pairs, each N positive, each flag one of `setters`.
/// Throws std::invalid_argument naming a value that is not positive, an unknown flag, or a flag
/// without a value.
inline void read_positive_flags(int argc, char** argv, const FlagSetters& setters) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const long value = std::atol(argv[i + 1]);
    if (value <= 0) throw std::invalid_argument(flag + " needs a positive number");
    auto it = setters.find(flag);
    if (it == setters.end()) throw std::invalid_argument("unknown flag " + flag);
    it->second(value);
  }
  if (argc % 2 == 0) throw std::invalid_argument(std::string(argv[argc - 1]) + " needs a value");
}

/// A benchmark's main: runs `run`, and reports what it threw as "NAME: what", exit status 1.
inline int run_reporting(const char* name, int (*run)(int, char**), int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << name << ": " << e.what() << "\n";
    return 1;
  }
}

}  // namespace bench
