// Tensor-parallel plans for the library's models: the GPT's and the Llama's blocks split as
// Megatron-LM does (attention by heads, the MLP by its hidden features).
#pragma once

#include "tensorplay/distributed/tensor_parallel/parallelize_module.h"
#include "tensorplay/nn/gpt.h"
#include "tensorplay/nn/llama.h"

namespace tensorplay::distributed::tensor_parallel {

/// What a model plan splits besides the blocks.
struct ModelPlanOptions {
  /// The token embedding RowwiseParallel (vocabulary parallel) and the language-model head
  /// ColwiseParallel with its output gathered (Replicate): full logits on every rank.
  bool vocab_parallel = false;
  /// The head ColwiseParallel with its output left sharded (Shard(-1)): each rank gets its
  /// vocabulary columns of the logits, for vocab_parallel_cross_entropy. A token embedding tied
  /// to the head is split with it (RowwiseParallel).
  bool loss_parallel = false;
  /// Sequence parallelism: the norms (and the GPT's embedding dropout) run on sequence shards
  /// (SequenceParallel), column-parallel layers all-gather the sequence (input_layouts
  /// Shard(1)) and row-parallel ones reduce-scatter it (output_layouts Shard(1)) instead of
  /// all-reducing. The residual stream between blocks is sequence-sharded; the head gets the
  /// whole sequence back.
  bool sequence_parallel = false;
  /// With sequence_parallel: the column-parallel layers keep their input's sequence shard for
  /// the backward and gather it again there (ColwiseParallelOptions::keep_input_shard).
  bool keep_input_shards = false;
};

/// The plan of an nn::GPT over `tp` ranks: in every block, `attn.c_attn` ColwiseParallel with
/// packed = 3 (each rank keeps its heads' queries, keys and values), `attn.c_proj`
/// RowwiseParallel, `mlp.c_fc` ColwiseParallel, `mlp.c_proj` RowwiseParallel. The embeddings,
/// norms and head stay replicated (so tied embeddings stay tied) unless `options` split them.
/// Throws std::invalid_argument unless tp divides the heads (and the vocabulary, when split).
ParallelizePlan gpt_tp_plan(const nn::GPTConfig& config, int tp, ModelPlanOptions options = {});

/// The plan of an nn::Llama (or a model loaded from a Hugging Face folder) over `tp` ranks: in
/// every layer `self_attn.q_proj` ColwiseParallel; `k_proj` and `v_proj` ColwiseParallel when tp
/// divides the key-value heads, else ReplicatedColwise(kv heads) when they divide tp (each rank
/// computes them all and keeps the one its query heads read); `o_proj` RowwiseParallel;
/// `mlp.gate_proj` and `up_proj` ColwiseParallel, `down_proj` RowwiseParallel. Embedding, norms
/// and head stay replicated unless `options` split them. Throws std::invalid_argument unless tp
/// divides the heads and the MLP width, when the key-value heads neither divide nor are divided by
/// tp, and for qk_norm (its weights would need their gradients summed: not yet).
ParallelizePlan llama_tp_plan(const nn::LlamaConfig& config, int tp, ModelPlanOptions options = {});

}  // namespace tensorplay::distributed::tensor_parallel
