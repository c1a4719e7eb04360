// Rotary position embedding module: cos and sin tables as transformers computes them, applied
// by the fused rotary_embedding op.
#include "tensorplay/nn/rotary.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "tensorplay/core/ops/rotary.h"

namespace tensorplay::nn {

namespace {

std::string number(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

// float32 pow as torch computes base ** exponent on float tensors.
float powf32(float base, float exponent) { return std::pow(base, exponent); }

// The default inverse frequencies of transformers, in float32: 1 / theta^(arange(0, D, 2) / D).
std::vector<float> default_inverse(int64_t head_dim, float theta) {
  std::vector<float> out(static_cast<size_t>(head_dim / 2));
  for (int64_t c = 0; c < head_dim / 2; ++c)
    out[c] = 1.0f / powf32(theta, static_cast<float>(2 * c) / static_cast<float>(head_dim));
  return out;
}

// cos and sin tables [time, head_dim] of `f` (each pair of channels c, c + D/2 sharing an angle).
void fill_tables(const RotaryFrequencies& f, int64_t head_dim, int64_t time, Tensor& cos_out,
                 Tensor& sin_out) {
  const int64_t half = head_dim / 2;
  std::vector<float> cos_table(static_cast<size_t>(time * head_dim));
  std::vector<float> sin_table(cos_table.size());
  for (int64_t t = 0; t < time; ++t)
    for (int64_t c = 0; c < half; ++c) {
      // float32 throughout, as transformers: angles = t * inv_freq, each product rounded to
      // float before cos and sin, which are then multiplied by the attention scaling in float.
      const float angle = static_cast<float>(t) * f.inverse[c];
      const float cos_value =
          static_cast<float>(std::cos(static_cast<double>(angle))) * f.attention_scaling;
      const float sin_value =
          static_cast<float>(std::sin(static_cast<double>(angle))) * f.attention_scaling;
      for (int64_t k : {c, c + half}) {
        cos_table[t * head_dim + k] = cos_value;
        sin_table[t * head_dim + k] = sin_value;
      }
    }
  cos_out = from_vector(cos_table, {time, head_dim});
  sin_out = from_vector(sin_table, {time, head_dim});
}

}  // namespace

void check_rotary_scaling(const RotaryScaling& s) {
  auto fail = [&](const std::string& what) {
    throw std::invalid_argument("rotary scaling (" + describe(s) + "): " + what);
  };
  if (s.type == "default") return;
  if (s.type != "linear" && s.type != "dynamic" && s.type != "llama3" && s.type != "yarn")
    fail("unknown type \"" + s.type +
         "\"; tensorplay computes \"default\", \"linear\", \"dynamic\", \"llama3\" and \"yarn\"");
  if (!(s.factor > 0.0) || !std::isfinite(s.factor))
    fail("factor must be positive, got " + number(s.factor));
  if (s.original_context_length < 0)
    fail("original_context_length must be positive (or 0 for none)");
  if ((s.type == "llama3" || s.type == "dynamic") && s.original_context_length == 0)
    fail(s.type + " needs the original context length (original_max_position_embeddings)");
  if (s.type == "llama3" && !(s.high_freq_factor > s.low_freq_factor && s.low_freq_factor > 0.0))
    fail("llama3 needs 0 < low_freq_factor < high_freq_factor, got " + number(s.low_freq_factor) +
         " and " + number(s.high_freq_factor));
  if (s.type == "yarn" && !(s.beta_fast > 0.0 && s.beta_slow > 0.0))
    fail("yarn needs positive beta_fast and beta_slow");
  if (s.attention_factor < 0.0) fail("attention_factor must be positive (or 0: computed)");
}

std::string describe(const RotaryScaling& s) {
  if (s.type == "default") return "default";
  std::string out = "type=" + s.type + ", factor=" + number(s.factor);
  if (s.original_context_length > 0)
    out += ", original_context_length=" + std::to_string(s.original_context_length);
  if (s.type == "llama3")
    out += ", low_freq_factor=" + number(s.low_freq_factor) +
           ", high_freq_factor=" + number(s.high_freq_factor);
  if (s.type == "yarn") {
    out += ", beta_fast=" + number(s.beta_fast) + ", beta_slow=" + number(s.beta_slow);
    if (s.attention_factor > 0.0) out += ", attention_factor=" + number(s.attention_factor);
    if (s.mscale > 0.0) out += ", mscale=" + number(s.mscale);
    if (s.mscale_all_dim > 0.0) out += ", mscale_all_dim=" + number(s.mscale_all_dim);
    if (!s.truncate) out += ", truncate=false";
  }
  return out;
}

RotaryFrequencies rotary_frequencies(int64_t head_dim, float theta, const RotaryScaling& s,
                                     int64_t context_length, int64_t sequence_length) {
  check_rotary_scaling(s);
  if (head_dim <= 0 || head_dim % 2 != 0)
    throw std::invalid_argument("rotary_frequencies: head_dim must be even and positive, got " +
                                std::to_string(head_dim));
  const int64_t half = head_dim / 2;
  const auto dim = static_cast<double>(head_dim);
  RotaryFrequencies f;
  if (s.type == "default") {
    f.inverse = default_inverse(head_dim, theta);
  } else if (s.type == "linear") {
    f.inverse = default_inverse(head_dim, theta);
    for (float& v : f.inverse) v /= static_cast<float>(s.factor);
  } else if (s.type == "dynamic") {
    // transformers computes this on a 0-dim float32 tensor (the sequence length is one).
    const int64_t original = s.original_context_length;
    const int64_t seq = std::max(sequence_length > 0 ? sequence_length : original, original);
    const auto factor = static_cast<float>(s.factor);
    float ratio = factor * static_cast<float>(seq);
    ratio = ratio / static_cast<float>(original);
    ratio = ratio - static_cast<float>(s.factor - 1.0);
    const float base =
        static_cast<float>(theta) * powf32(ratio, static_cast<float>(dim / (dim - 2.0)));
    f.inverse = default_inverse(head_dim, base);
  } else if (s.type == "llama3") {
    const std::vector<float> inv = default_inverse(head_dim, theta);
    const auto factor = static_cast<float>(s.factor);
    const auto low = static_cast<float>(s.low_freq_factor);
    const double old_context = static_cast<double>(s.original_context_length);
    // Python floats, compared with the float32 wavelengths as float32.
    const auto low_wavelen = static_cast<float>(old_context / s.low_freq_factor);
    const auto high_wavelen = static_cast<float>(old_context / s.high_freq_factor);
    f.inverse.resize(static_cast<size_t>(half));
    for (int64_t c = 0; c < half; ++c) {
      // wavelen = 2 * pi / inv_freq: torch's reciprocal, then times the float32 scalar.
      const float wavelen = (1.0f / inv[c]) * static_cast<float>(2.0 * M_PI);
      float v = wavelen > low_wavelen ? inv[c] / factor : inv[c];
      const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
      if (medium) {
        float smooth = (1.0f / wavelen) * static_cast<float>(old_context);
        smooth = (smooth - low) / static_cast<float>(s.high_freq_factor - s.low_freq_factor);
        v = (1.0f - smooth) * v / factor + smooth * v;
      }
      f.inverse[c] = v;
    }
  } else {  // yarn
    const double base = theta;
    double factor = s.factor;
    const int64_t original =
        s.original_context_length > 0 ? s.original_context_length : context_length;
    auto get_mscale = [](double scale, double mscale) {
      return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
    };
    double attention = s.attention_factor;
    if (attention <= 0.0)
      attention = s.mscale > 0.0 && s.mscale_all_dim > 0.0
                      ? get_mscale(factor, s.mscale) / get_mscale(factor, s.mscale_all_dim)
                      : get_mscale(factor, 1.0);
    auto correction_dim = [&](double rotations) {
      return (dim * std::log(static_cast<double>(original) / (rotations * 2.0 * M_PI))) /
             (2.0 * std::log(base));
    };
    double low = correction_dim(s.beta_fast), high = correction_dim(s.beta_slow);
    if (s.truncate) {
      low = std::floor(low);
      high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, dim - 1.0);
    if (low == high) high += 0.001;  // transformers' guard against a zero-width ramp
    f.inverse.resize(static_cast<size_t>(half));
    for (int64_t c = 0; c < half; ++c) {
      const float pos = powf32(theta, static_cast<float>(2 * c) / static_cast<float>(head_dim));
      const float extrapolation = 1.0f / pos;
      const float interpolation = 1.0f / (static_cast<float>(factor) * pos);
      float ramp =
          (static_cast<float>(c) - static_cast<float>(low)) / static_cast<float>(high - low);
      ramp = std::clamp(ramp, 0.0f, 1.0f);
      const float extrapolation_factor = 1.0f - ramp;
      f.inverse[c] =
          interpolation * (1.0f - extrapolation_factor) + extrapolation * extrapolation_factor;
    }
    f.attention_scaling = static_cast<float>(attention);
  }
  return f;
}

RotaryEmbeddingImpl::RotaryEmbeddingImpl(int64_t head_dim_, int64_t context_length_, float theta_,
                                         RotaryScaling scaling_)
    : head_dim(head_dim_), context_length(context_length_), theta(theta_), scaling(scaling_) {
  if (head_dim <= 0 || head_dim % 2 != 0)
    throw std::invalid_argument("RotaryEmbedding: head_dim must be even and positive, got " +
                                std::to_string(head_dim));
  if (context_length <= 0)
    throw std::invalid_argument("RotaryEmbedding: context_length must be positive, got " +
                                std::to_string(context_length));
  if (!(theta > 0.0f))
    throw std::invalid_argument("RotaryEmbedding: theta must be positive, got " +
                                std::to_string(theta));
  check_rotary_scaling(scaling);
  // Under "dynamic" these are the tables of sequences within the original context (unscaled).
  // Past kEagerRows positions they are computed when a sequence needs them: a Llama 3.1 config
  // (131,072 positions) would otherwise hold 128 MiB of tables per layer.
  Tensor c, s;
  fill_tables(rotary_frequencies(head_dim, theta, scaling, context_length), head_dim,
              std::min(context_length, kEagerRows), c, s);
  cos = register_buffer("cos", c, /*persistent=*/false);
  sin = register_buffer("sin", s, /*persistent=*/false);
}

void RotaryEmbeddingImpl::computed_tables(int64_t time, Tensor& cos_out, Tensor& sin_out) {
  if (computed_time_ != time || !computed_cos_.defined() ||
      computed_cos_.device() != cos.device()) {
    Tensor c, s;
    // Dynamic frequencies follow the sequence's length; the others are the buffers' own.
    const int64_t length = scaling.type == "dynamic" ? time : 0;
    fill_tables(rotary_frequencies(head_dim, theta, scaling, context_length, length), head_dim,
                time, c, s);
    computed_cos_ = c.to(cos.device());
    computed_sin_ = s.to(cos.device());
    computed_time_ = time;
  }
  cos_out = computed_cos_;
  sin_out = computed_sin_;
}

Tensor RotaryEmbeddingImpl::forward(const Tensor& x) {
  const bool tokens_first = time_dim == 1;
  if (x.dim() < (tokens_first ? 3 : 2) || x.size(-1) != head_dim ||
      x.size(time_dim) > context_length)
    throw std::invalid_argument(
        "RotaryEmbedding: expected input " +
        std::string(tokens_first ? "[B, T, ..., " : "[..., T, ") + std::to_string(head_dim) +
        "] with T <= " + std::to_string(context_length) + ", got " + to_string(x.shape()));
  const int64_t time = x.size(time_dim);
  Tensor c, s;  // [T, D], broadcast over the rest
  if ((scaling.type == "dynamic" && time > scaling.original_context_length) || time > cos.size(0)) {
    computed_tables(time, c, s);
  } else {
    c = cos.slice0(0, time);
    s = sin.slice0(0, time);
  }
  if (c.dtype() != x.dtype()) {
    c = c.to(x.dtype());
    s = s.to(x.dtype());
  }
  return rotary_embedding(x, c, s, time_dim);
}

std::string RotaryEmbeddingImpl::extra_repr() const {
  return "head_dim=" + std::to_string(head_dim) +
         ", context_length=" + std::to_string(context_length) + ", theta=" + std::to_string(theta) +
         (scaling.type == "default" ? "" : ", scaling: " + describe(scaling));
}

}  // namespace tensorplay::nn
