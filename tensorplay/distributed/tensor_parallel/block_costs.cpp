// The collectives and parameter bytes of a split GPT or Llama block, from its plan's styles.
#include "tensorplay/distributed/tensor_parallel/block_costs.h"

#include <stdexcept>
#include <string>

namespace tensorplay::distributed::tensor_parallel {
namespace {

// Adds the collectives of the styles on `tokens` tokens over `tp` ranks, each of `e` bytes an
// element; `width` is the block's residual width.
struct Tally {
  int64_t tokens, width, tp, e;
  bool sp;
  BlockCosts costs;

  int64_t whole() const { return tokens * width * e; }
  int64_t shard() const { return whole() / tp; }
  void call(int64_t bytes) {
    if (tp == 1) return;  // a group of one runs no collective
    ++costs.collectives;
    costs.collective_bytes += bytes;
  }
  // A column-parallel layer: its input gathered (and the gradient reduce-scattered) under
  // sequence parallelism, else its input gradient all-reduced.
  void colwise() {
    if (sp) call(shard());
    call(whole());
  }
  // A row-parallel layer: its output reduce-scattered (its gradient all-gathered) under sequence
  // parallelism, else all-reduced. Its whole bias, added to the rank's sequence shard under
  // sequence parallelism, has its gradient all-reduced there.
  void rowwise(bool bias) {
    call(whole());
    if (sp) call(shard());
    if (sp && bias) call(width * e);
  }
  // A whole Linear narrowed per rank (ReplicatedColwise): its input gathered under sequence
  // parallelism (the gradient needs no reduce-scatter: the output's gradient is summed first),
  // its output's gradient (`out` features) all-reduced.
  void replicated(int64_t out) {
    if (sp) call(shard());
    call(tokens * out * e);
  }
  // A norm's weight tensors (their gradients all-reduced under sequence parallelism).
  void norm(int tensors) {
    if (!sp) return;
    for (int i = 0; i < tensors; ++i) call(width * e);
  }
};

void check_tokens(const char* model, int64_t tokens, int64_t element_bytes) {
  if (tokens < 1 || element_bytes < 1)
    throw std::invalid_argument(std::string(model) +
                                " block costs: tokens and element_bytes must be positive, got " +
                                std::to_string(tokens) + " and " + std::to_string(element_bytes));
}

}  // namespace

BlockCosts gpt_block_costs(const nn::GPTConfig& config, int64_t tokens, int tp,
                           ModelPlanOptions options, int64_t element_bytes) {
  gpt_tp_plan(config, tp, options);  // the plan's own checks
  check_tokens("GPT", tokens, element_bytes);
  const int64_t c = config.width;
  Tally t{tokens, c, tp, element_bytes, options.sequence_parallel, {}};
  t.norm(2);                                           // ln_1
  t.colwise();                                         // attn.c_attn
  t.rowwise(true);                                     // attn.c_proj
  t.norm(2);                                           // ln_2
  t.colwise();                                         // mlp.c_fc
  t.rowwise(true);                                     // mlp.c_proj
  const int64_t elements = 2 * 2 * c                   // ln_1, ln_2
                           + (3 * c * c + 3 * c) / tp  // c_attn
                           + c * c / tp + c            // attn.c_proj, its bias whole
                           + (4 * c * c + 4 * c) / tp  // c_fc
                           + 4 * c * c / tp + c;       // mlp.c_proj
  t.costs.parameter_bytes = elements * element_bytes;
  return t.costs;
}

BlockCosts llama_block_costs(const nn::LlamaConfig& config, int64_t tokens, int tp,
                             ModelPlanOptions options, int64_t element_bytes) {
  llama_tp_plan(config, tp, options);  // the plan's own checks
  check_tokens("Llama", tokens, element_bytes);
  const int64_t c = config.width, d = config.head_size(), m = config.mlp_width;
  const int64_t heads = config.n_head, kv = config.n_kv_head > 0 ? config.n_kv_head : heads;
  const bool kv_split = kv % tp == 0;
  Tally t{tokens, c, tp, element_bytes, options.sequence_parallel, {}};
  // In the order the block runs them.
  t.norm(1);                     // input_layernorm
  t.colwise();                   // q_proj
  for (int i = 0; i < 2; ++i) {  // k_proj, v_proj
    if (kv_split)
      t.colwise();
    else
      t.replicated(kv * d);
  }
  t.rowwise(config.o_bias);  // o_proj
  t.norm(1);                 // post_attention_layernorm
  t.colwise();               // gate_proj
  t.colwise();               // up_proj
  t.rowwise(false);          // down_proj

  const int64_t qkv_bias = config.qkv_bias ? 1 : 0;
  const int64_t kv_elements = 2 * (c * kv * d + qkv_bias * kv * d);
  const int64_t elements = 2 * c                                           // the two RMSNorms
                           + (c * heads * d + qkv_bias * heads * d) / tp   // q_proj
                           + (kv_split ? kv_elements / tp : kv_elements)   // k_proj, v_proj
                           + heads * d * c / tp + (config.o_bias ? c : 0)  // o_proj
                           + 3 * c * m / tp;                               // gate, up, down
  t.costs.parameter_bytes = elements * element_bytes;
  return t.costs;
}

}  // namespace tensorplay::distributed::tensor_parallel
