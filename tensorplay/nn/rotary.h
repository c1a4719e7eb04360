// RotaryEmbedding: rotary position embedding (RoPE) of queries and keys, as Llama applies it
// (transformers' LlamaRotaryEmbedding with apply_rotary_pos_emb, the "rotate half" layout).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensorplay/nn/module.h"

namespace tensorplay::nn {

/// How the rotary frequencies are scaled, as transformers' `rope_scaling` (transformers 4) or
/// `rope_parameters` (transformers 5) describe it, each type computed as transformers'
/// modeling_rope_utils does:
/// - "default": inverse frequencies theta^(-2c / head_dim);
/// - "linear": those divided by `factor` (positions interpolated);
/// - "dynamic" (NTK): for a sequence of T > `original_context_length` positions, theta becomes
///   theta * (factor * T / original - (factor - 1))^(head_dim / (head_dim - 2)); shorter ones
///   are unscaled. The tables are those of transformers' first forward at that length
///   (transformers keeps the longest length seen so far; tensorplay is stateless);
/// - "llama3": low frequencies (wavelengths above original / low_freq_factor) divided by
///   `factor`, high ones (below original / high_freq_factor) kept, those between interpolated;
/// - "yarn": the inverse frequencies blended between interpolated and extrapolated over the
///   channel range beta_fast..beta_slow, cos and sin multiplied by an attention factor.
struct RotaryScaling {
  std::string type = "default";
  double factor = 1.0;
  /// The context the model was pretrained on (original_max_position_embeddings); 0 when the
  /// config gives none (yarn then takes the model's context length; dynamic needs it).
  int64_t original_context_length = 0;
  double low_freq_factor = 1.0;   // llama3
  double high_freq_factor = 4.0;  // llama3
  double attention_factor = 0.0;  // yarn: cos and sin scale; 0 means computed from factor
  double beta_fast = 32.0;        // yarn
  double beta_slow = 1.0;         // yarn
  double mscale = 0.0;            // yarn (DeepSeek's), 0: unset
  double mscale_all_dim = 0.0;    // yarn (DeepSeek's), 0: unset
  bool truncate = true;           // yarn: correction range rounded to whole channels

  bool operator==(const RotaryScaling&) const = default;
};

/// Inverse frequencies [head_dim / 2] and the factor cos and sin are multiplied by.
struct RotaryFrequencies {
  std::vector<float> inverse;
  float attention_scaling = 1.0f;
};

/// The rotary frequencies of a model with heads of `head_dim`, base `theta`, `scaling` and
/// context `context_length` (max_position_embeddings) for a sequence of `sequence_length`
/// positions (which only "dynamic" looks at; 0: context_length), computed in float32 where
/// transformers computes in float32 and in double where it computes on Python floats. Throws
/// std::invalid_argument naming an unknown type or a parameter out of range.
RotaryFrequencies rotary_frequencies(int64_t head_dim, float theta, const RotaryScaling& scaling,
                                     int64_t context_length, int64_t sequence_length = 0);

/// Throws std::invalid_argument naming what is wrong with `scaling` (an unknown type, a factor
/// below 1 where one is needed, a missing original context length).
void check_rotary_scaling(const RotaryScaling& scaling);

/// "type=llama3, factor=8, ..." for messages; "default" when unscaled.
std::string describe(const RotaryScaling& scaling);

/// x [..., T, head_dim] -> x * cos + rotate_half(x) * sin, where for position t < T and channel
/// c < head_dim / 2, both c and c + head_dim / 2 turn by the angle t * theta^(-2c / head_dim), and
/// rotate_half(x) = cat(-x[..., head_dim/2:], x[..., :head_dim/2]). Position t is the row's
/// index along the second-last dimension (queries and keys laid out [B, heads, T, head_dim]).
///
/// Buffers `cos` and `sin` [min(context_length, kEagerRows), head_dim] (a longer sequence takes
/// tables computed for its length, the last such kept), non-persistent (derived, so not part of
/// state_dict, as in transformers), computed as transformers does in float32: inverse
/// frequencies 1 / theta^(2c / head_dim) (scaled by `scaling`, see rotary_frequencies), angles
/// t * inverse frequency, then cos and sin (times the scaling's attention factor). Under
/// "dynamic" scaling a sequence longer than the original context takes tables computed for its
/// length (the last such tables kept).
class RotaryEmbeddingImpl : public Module {
 public:
  /// Throws std::invalid_argument unless head_dim is even and positive, context_length > 0,
  /// theta > 0 and `scaling` is valid.
  RotaryEmbeddingImpl(int64_t head_dim, int64_t context_length, float theta = 10000.0f,
                      RotaryScaling scaling = {});
  /// Throws std::invalid_argument when x is not [..., T, head_dim] (or, with time_dim 1,
  /// [B, T, ..., head_dim]) with T <= context_length.
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "RotaryEmbedding"; }
  std::string extra_repr() const override;

  /// The dimension of the input that indexes positions: -2 for [..., T, head_dim] (heads first,
  /// the default), 1 for [B, T, heads, head_dim] (tokens first, as a projection writes them).
  int64_t time_dim = -2;
  /// The most positions the buffers hold.
  static constexpr int64_t kEagerRows = 8192;
  Tensor cos;  // buffer [min(context_length, kEagerRows), head_dim]
  Tensor sin;  // buffer [min(context_length, kEagerRows), head_dim]
  int64_t head_dim, context_length;
  float theta;
  RotaryScaling scaling;

 private:
  // Tables [time, head_dim] computed for a sequence of `time` positions (past the buffers, or
  // "dynamic" past the original context), the last kept.
  void computed_tables(int64_t time, Tensor& cos_out, Tensor& sin_out);
  int64_t computed_time_ = 0;
  Tensor computed_cos_, computed_sin_;
};
TENSORPLAY_MODULE(RotaryEmbedding);

}  // namespace tensorplay::nn
