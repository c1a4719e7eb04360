// A model unlike the GPT for the memory benchmarks and tests: gated residual blocks of mixed
// hidden widths with dropout, x + down(dropout(gelu(up(x)) * sigmoid(gate(x)))), hidden widths
// cycling through 1, 4, 2 and 3 times the model width, two blocks per stage, an MSE loss.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tensorplay/core/ops/activation.h"
#include "tensorplay/nn/dropout.h"
#include "tensorplay/pipelining/pipeline_stage.h"
#include "tensorplay/pipelining/runtime/memory_profile.h"
#include "tensorplay/tensor.h"

namespace bench {

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;

/// One gated residual block.
struct GatedBlock : tp::nn::Module {
  GatedBlock(int64_t dim, int64_t hidden, float p) {
    up = register_module("up", tp::nn::Linear(dim, hidden));
    gate = register_module("gate", tp::nn::Linear(dim, hidden));
    down = register_module("down", tp::nn::Linear(hidden, dim));
    drop = register_module("drop", tp::nn::Dropout(p));
  }
  tp::Tensor forward(const tp::Tensor& x) override {
    return x + down(drop(tp::gelu(up(x)) * tp::sigmoid(gate(x))));
  }
  std::string type_name() const override { return "GatedBlock"; }
  tp::nn::Linear up{nullptr}, gate{nullptr}, down{nullptr};
  tp::nn::Dropout drop{nullptr};
};

/// The model and pipeline shape.
struct GatedMlpJob {
  int64_t width = 64;
  int64_t rows_per_microbatch = 64;
  int blocks_per_stage = 2;
  float dropout = 0.1f;
  int n_microbatches = 8;
  uint64_t seed = 11;  ///< of the blocks' initial weights

  pp::LossFn loss() const { return tp::nn::mse_loss; }

  /// `stages` stages of blocks_per_stage blocks, each with `recompute`.
  std::vector<std::shared_ptr<pp::PipelineStage>> build(int stages,
                                                        const std::string& recompute) const {
    tp::manual_seed(seed);
    const int64_t widths[] = {1, 4, 2, 3};
    std::vector<std::shared_ptr<pp::PipelineStage>> out;
    int k = 0;
    for (int i = 0; i < stages; ++i) {
      auto module = tp::nn::Sequential().ptr();
      for (int b = 0; b < blocks_per_stage; ++b)
        module->push_back(std::make_shared<GatedBlock>(width, width * widths[k++ % 4], dropout));
      out.push_back(std::make_shared<pp::PipelineStage>(
          module, i, stages, tp::cpu(),
          std::vector<tp::Tensor>{tp::zeros({rows_per_microbatch, width})}));
      out.back()->set_recompute(pp::RecomputePolicy::parse(recompute));
    }
    return out;
  }

  /// A batch [microbatches * rows, width] (inputs or targets).
  tp::Tensor batch(tp::Generator& g) const {
    return tp::randn({rows_per_microbatch * n_microbatches, width}, {}, &g);
  }

  /// Each stage's profile of one microbatch (before any schedule claims the stages).
  std::vector<pp::StageMemoryProfile> profile(
      const std::vector<std::shared_ptr<pp::PipelineStage>>& stages) const {
    std::vector<pp::StageMemoryProfile> out;
    for (const auto& s : stages)
      out.push_back(pp::profile_stage_memory(
          *s, {.loss_fn = loss(), .target = tp::zeros({rows_per_microbatch, width})}));
    return out;
  }
};

}  // namespace bench
