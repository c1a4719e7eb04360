// The GPT's and the Llama's tensor-parallel plans.
#include "tensorplay/distributed/tensor_parallel/model_plans.h"

#include <stdexcept>
#include <string>

#include "tensorplay/distributed/tensor_parallel/colwise_parallel.h"
#include "tensorplay/distributed/tensor_parallel/prepare_module.h"
#include "tensorplay/distributed/tensor_parallel/replicated_colwise.h"
#include "tensorplay/distributed/tensor_parallel/rowwise_parallel.h"
#include "tensorplay/distributed/tensor_parallel/sequence_parallel.h"

namespace tensorplay::distributed::tensor_parallel {
namespace {

void check_tp(const char* model, int tp, int64_t size, const char* what) {
  if (tp < 1)
    throw std::invalid_argument(std::string(model) + " tp plan: tp must be positive, got " +
                                std::to_string(tp));
  if (size % tp != 0)
    throw std::invalid_argument(std::string(model) + " tp plan: tp " + std::to_string(tp) +
                                " does not divide the " + what + " (" + std::to_string(size) +
                                "); choose a tp degree that divides it");
}

// The layouts at the edges of split work: replicated activations, or sequence shards.
Placement colwise_input(const ModelPlanOptions& o) {
  return o.sequence_parallel ? Placement(Shard{1}) : Replicate();
}
Placement rowwise_output(const ModelPlanOptions& o) {
  return o.sequence_parallel ? Placement(Shard{1}) : Replicate();
}

// The embedding and head entries `options` ask for; `embedding_output` is the split embedding's
// output layout. Under sequence parallelism an unsplit head gets the sequence gathered.
void add_vocab_entries(ParallelizePlan& plan, const char* model, int tp, int64_t vocab, bool tied,
                       const char* embedding, const ModelPlanOptions& options,
                       const Placement& embedding_output) {
  if (!options.vocab_parallel && !options.loss_parallel) {
    if (options.sequence_parallel)
      plan.emplace_back("lm_head", PrepareModuleInput({.input_layouts = Shard{1},
                                                       .desired_input_layouts = Replicate()}));
    return;
  }
  check_tp(model, tp, vocab, "vocabulary");
  if (options.vocab_parallel || tied)
    plan.emplace_back(embedding, RowwiseParallel({.output_layouts = embedding_output}));
  const Placement logits = options.loss_parallel ? Placement(Shard{-1}) : Replicate();
  plan.emplace_back("lm_head", ColwiseParallel({.input_layouts = colwise_input(options),
                                                .output_layouts = logits}));
}

}  // namespace

ParallelizePlan gpt_tp_plan(const nn::GPTConfig& config, int tp, ModelPlanOptions options) {
  check_tp("GPT", tp, config.n_head, "heads");
  const Placement in = colwise_input(options), out = rowwise_output(options);
  const bool keep = options.sequence_parallel && options.keep_input_shards;
  ParallelizePlan plan = {
      {"blocks.*.attn.c_attn",
       ColwiseParallel({.input_layouts = in, .packed = 3, .keep_input_shard = keep})},
      {"blocks.*.attn.c_proj", RowwiseParallel({.output_layouts = out})},
      {"blocks.*.mlp.c_fc", ColwiseParallel({.input_layouts = in, .keep_input_shard = keep})},
      {"blocks.*.mlp.c_proj", RowwiseParallel({.output_layouts = out})},
  };
  if (options.sequence_parallel) {
    // The embeddings' sum is cut into sequence shards by the dropout after it.
    plan.emplace_back("drop", PrepareModuleInput({.input_layouts = Replicate(),
                                                  .desired_input_layouts = Shard{1}}));
    plan.emplace_back("blocks.*.ln_1", SequenceParallel());
    plan.emplace_back("blocks.*.ln_2", SequenceParallel());
    plan.emplace_back("ln_f", SequenceParallel());
  }
  add_vocab_entries(plan, "GPT", tp, config.vocab_size, config.tie_weights, "wte", options,
                    Replicate());
  return plan;
}

ParallelizePlan llama_tp_plan(const nn::LlamaConfig& config, int tp, ModelPlanOptions options) {
  check_tp("Llama", tp, config.n_head, "heads");
  check_tp("Llama", tp, config.mlp_width, "MLP width");
  const int64_t kv = config.n_kv_head > 0 ? config.n_kv_head : config.n_head;
  if (config.qk_norm)
    throw std::invalid_argument(
        "Llama tp plan: qk_norm (Qwen3) is not supported under tensor parallelism yet: its "
        "per-head norm weights would need their gradients summed across the tp group");
  const Placement in = colwise_input(options), out = rowwise_output(options);
  const ColwiseParallelOptions colwise{
      .input_layouts = in,
      .keep_input_shard = options.sequence_parallel && options.keep_input_shards};
  ParallelizePlan plan = {{"layers.*.self_attn.q_proj", ColwiseParallel(colwise)}};
  if (kv % tp == 0) {
    plan.emplace_back("layers.*.self_attn.k_proj", ColwiseParallel(colwise));
    plan.emplace_back("layers.*.self_attn.v_proj", ColwiseParallel(colwise));
  } else if (tp % kv == 0) {
    plan.emplace_back("layers.*.self_attn.k_proj", ReplicatedColwise(kv, in));
    plan.emplace_back("layers.*.self_attn.v_proj", ReplicatedColwise(kv, in));
  } else {
    throw std::invalid_argument("Llama tp plan: " + std::to_string(kv) +
                                " key-value heads neither divide nor are divided by tp " +
                                std::to_string(tp) +
                                "; choose a tp degree that divides them or that they divide");
  }
  plan.emplace_back("layers.*.self_attn.o_proj", RowwiseParallel({.output_layouts = out}));
  plan.emplace_back("layers.*.mlp.gate_proj", ColwiseParallel(colwise));
  plan.emplace_back("layers.*.mlp.up_proj", ColwiseParallel(colwise));
  plan.emplace_back("layers.*.mlp.down_proj", RowwiseParallel({.output_layouts = out}));
  const bool embedding_split =
      options.vocab_parallel || (options.loss_parallel && config.tie_weights);
  if (options.sequence_parallel) {
    // The token embedding's output is cut into sequence shards: reduce-scattered when the
    // embedding is split, else at the first layer's input.
    if (!embedding_split)
      plan.emplace_back("layers.0", PrepareModuleInput({.input_layouts = Replicate(),
                                                        .desired_input_layouts = Shard{1}}));
    plan.emplace_back("layers.*.input_layernorm", SequenceParallel());
    plan.emplace_back("layers.*.post_attention_layernorm", SequenceParallel());
    plan.emplace_back("norm", SequenceParallel());
  }
  add_vocab_entries(plan, "Llama", tp, config.vocab_size, config.tie_weights, "embed_tokens",
                    options, out);
  return plan;
}

}  // namespace tensorplay::distributed::tensor_parallel
