// ModelStage: one pipeline stage of a GPT or a Llama built by hand, holding the model's own
// modules under their model names (a run of blocks, with the embeddings first and the head last).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tensorplay/nn/gpt.h"
#include "tensorplay/nn/llama.h"
#include "tensorplay/nn/module.h"

namespace tensorplay::nn {

/// One stage of a GPT or a Llama cut into a pipeline by hand (torchtitan's per-stage model
/// split), for stages that cannot be traced: e.g. blocks split by tensor parallelism, whose
/// collectives the tracer does not record. The stage holds the model's own modules (shared, not
/// copied) under the model's names, so a model plan (`blocks.*.attn.c_attn`,
/// `layers.0`) and state-dict names read as on the whole model:
///
/// - blocks [first_block, end_block), under `blocks.N` (GPT) or `layers.N` (Llama), N the
///   block's index in the model;
/// - on the first stage (first_block == 0): the embeddings (`wte`, `wpe`, `drop`; or
///   `embed_tokens`), taking token ids [B, T];
/// - on the last stage (end_block == n_layer): the final norm and the head (`ln_f` or `norm`,
///   `lm_head`), giving logits, and the token embedding too when the head is tied to it (so the
///   tie has one name, `wte.weight` or `embed_tokens.weight`, on both stages that hold it).
///
/// The blocks' container reads as the model's ModuleList (its type name), so a stage's
/// recomputation policy (`full`, `every:K`) finds them. Two stages of one process must be cut
/// from two copies of the model (built alike, from the same seed): a module belongs to one stage.
class ModelStageImpl : public Module {
 public:
  /// Throws std::invalid_argument for an empty or out-of-range block range.
  ModelStageImpl(const GPT& model, int64_t first_block, int64_t end_block);
  ModelStageImpl(const Llama& model, int64_t first_block, int64_t end_block);
  /// Token ids [B, T] on the first stage, else the previous stage's output; logits on the last.
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "ModelStage"; }
  std::string extra_repr() const override;
  bool is_first() const { return first_block_ == 0; }
  bool is_last() const { return last_; }
  int64_t first_block() const { return first_block_; }
  int64_t end_block() const { return end_block_; }

 private:
  void check_range(const char* model, int64_t n_layer);
  Tensor embed(const Tensor& idx);
  std::vector<std::shared_ptr<Module>> blocks_;
  std::shared_ptr<Module> embedding_, positions_, dropout_, norm_, head_;
  Tensor pos_;  // the GPT's positions (first stage only)
  int64_t first_block_ = 0, end_block_ = 0;
  bool last_ = false;
};
TENSORPLAY_MODULE(ModelStage);

/// Blocks [first, end) of each of `num_stages` stages of a model of `n_layer` blocks: as even as
/// can be, the first `n_layer % num_stages` stages one block more. Throws std::invalid_argument
/// unless 1 <= num_stages <= n_layer.
std::vector<std::pair<int64_t, int64_t>> even_block_ranges(int64_t n_layer, int num_stages);

}  // namespace tensorplay::nn
