// Llama folders as transformers writes them: config.json mapping, the name mapping of
// LlamaForCausalLM's tensors (every layout shared), and saving and loading a folder.
#include "tensorplay/nn/hf/hugging_face_llama.h"

#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "tensorplay/core/safetensors.h"
#include "tensorplay/nn/hf/detail/config_reader.h"
#include "tensorplay/nn/hf/detail/hugging_face_text.h"

namespace tensorplay::nn {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using detail::config_json_path;
using detail::ConfigReader;
using detail::list_names;
using detail::read_text;
using detail::shortest_double;
using detail::write_text;

// One tensor of the mapping: tensorplay's name and its shape (transformers' name is "model." +
// it, lm_head.weight aside).
struct Mapped {
  std::string ours;
  Shape shape;
};

std::string hf_name(const std::string& ours) {
  return ours == "lm_head.weight" ? ours : "model." + ours;
}

std::vector<Mapped> mapping(const LlamaConfig& c) {
  const int64_t w = c.width, d = c.head_size();
  const int64_t kv = (c.n_kv_head > 0 ? c.n_kv_head : c.n_head) * d;
  std::vector<Mapped> out;
  out.push_back({"embed_tokens.weight", {c.vocab_size, w}});
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const std::string p = "layers." + std::to_string(i) + ".";
    out.push_back({p + "input_layernorm.weight", {w}});
    out.push_back({p + "self_attn.q_proj.weight", {c.n_head * d, w}});
    if (c.qkv_bias) out.push_back({p + "self_attn.q_proj.bias", {c.n_head * d}});
    out.push_back({p + "self_attn.k_proj.weight", {kv, w}});
    if (c.qkv_bias) out.push_back({p + "self_attn.k_proj.bias", {kv}});
    out.push_back({p + "self_attn.v_proj.weight", {kv, w}});
    if (c.qkv_bias) out.push_back({p + "self_attn.v_proj.bias", {kv}});
    out.push_back({p + "self_attn.o_proj.weight", {w, c.n_head * d}});
    if (c.o_bias) out.push_back({p + "self_attn.o_proj.bias", {w}});
    if (c.qk_norm) {
      out.push_back({p + "self_attn.q_norm.weight", {d}});
      out.push_back({p + "self_attn.k_norm.weight", {d}});
    }
    out.push_back({p + "post_attention_layernorm.weight", {w}});
    out.push_back({p + "mlp.gate_proj.weight", {c.mlp_width, w}});
    out.push_back({p + "mlp.up_proj.weight", {c.mlp_width, w}});
    out.push_back({p + "mlp.down_proj.weight", {w, c.mlp_width}});
  }
  out.push_back({"norm.weight", {w}});
  if (!c.tie_weights) out.push_back({"lm_head.weight", {c.vocab_size, w}});
  return out;
}

// The rotary tables' inverse frequencies older transformers saved with each attention.
bool is_legacy_rotary(const std::string& name) { return name.ends_with("rotary_emb.inv_freq"); }

// One Hugging Face family of the Llama shape: its model_type, class and config defaults.
struct Family {
  const char* model_type;
  const char* architecture;
  int64_t vocab_size, width, mlp_width, n_layer, n_head, n_kv_head, context_length, head_dim;
};

const Family kFamilies[] = {
    {"llama", "LlamaForCausalLM", 32000, 4096, 11008, 32, 32, 0, 2048, 0},
    {"qwen2", "Qwen2ForCausalLM", 151936, 4096, 22016, 32, 32, 0, 32768, 0},
    {"qwen3", "Qwen3ForCausalLM", 151936, 4096, 22016, 32, 32, 0, 32768, 128},
    {"mistral", "MistralForCausalLM", 32000, 4096, 14336, 32, 32, 8, 131072, 0},
};

const Family& family_of(const std::string& model_type) {
  for (const Family& f : kFamilies)
    if (model_type == f.model_type) return f;
  throw std::invalid_argument("no Hugging Face family \"" + model_type + "\"");
}

// One of rope_scaling (transformers 4) and rope_parameters (transformers 5): its type and
// parameters into `s`, and the theta it holds (transformers 5) into `theta`.
void read_rope_block(const ConfigReader& r, const char* key, RotaryScaling& s, float& theta) {
  const Json& p = r.at(key);
  if (!p.is_object()) r.fail(std::string(key) + " is " + p.dump() + ", not an object");
  auto field = [&](const char* name) -> const Json* {
    return p.contains(name) && !p[name].is_null() ? &p[name] : nullptr;
  };
  auto number = [&](const char* name, double& out) {
    if (const Json* v = field(name)) {
      r.number(*v, std::string(key) + "." + name);  // fails unless a number
      out = v->get<double>();
    }
  };
  for (const char* type_key : {"type", "rope_type"})
    if (const Json* v = field(type_key)) {
      if (!v->is_string()) r.fail(std::string(key) + "." + type_key + " is not a string");
      s.type = v->get<std::string>();
    }
  if (s.type != "default" && s.type != "linear" && s.type != "dynamic" && s.type != "llama3" &&
      s.type != "yarn")
    r.fail(std::string(key) + " has rope type \"" + s.type +
           "\"; tensorplay computes \"default\", \"linear\", \"dynamic\", \"llama3\" and "
           "\"yarn\"");
  if (const Json* v = field("rope_theta")) theta = r.number(*v, std::string(key) + ".rope_theta");
  if (const Json* v = field("partial_rotary_factor"))
    if (r.number(*v, std::string(key) + ".partial_rotary_factor") != 1.0f)
      r.fail(std::string(key) + ".partial_rotary_factor is " + v->dump() +
             "; tensorplay turns every channel of a head (1.0)");
  number("factor", s.factor);
  number("low_freq_factor", s.low_freq_factor);
  number("high_freq_factor", s.high_freq_factor);
  number("attention_factor", s.attention_factor);
  number("beta_fast", s.beta_fast);
  number("beta_slow", s.beta_slow);
  number("mscale", s.mscale);
  number("mscale_all_dim", s.mscale_all_dim);
  if (const Json* v = field("truncate")) {
    if (!v->is_boolean()) r.fail(std::string(key) + ".truncate is not a boolean");
    s.truncate = v->get<bool>();
  }
  if (const Json* v = field("original_max_position_embeddings")) {
    if (!v->is_number_integer() || v->get<int64_t>() <= 0)
      r.fail(std::string(key) + ".original_max_position_embeddings is " + v->dump() +
             ", not a positive integer");
    s.original_context_length = v->get<int64_t>();
  }
}

// The rope type and parameters of transformers 4's rope_scaling and rope_theta, or transformers
// 5's rope_parameters (rope_theta inside); types transformers computes and tensorplay does not
// (longrope, ...) and partial rotary factors are refused, naming the field.
void read_rope(const ConfigReader& r, LlamaConfig& c, int64_t max_position_embeddings) {
  float theta = 10000.0f;
  if (r.has("rope_theta")) theta = r.number(r.at("rope_theta"), "rope_theta");
  if (r.has("partial_rotary_factor") &&
      r.number(r.at("partial_rotary_factor"), "partial_rotary_factor") != 1.0f)
    r.fail("partial_rotary_factor is " + r.at("partial_rotary_factor").dump() +
           "; tensorplay turns every channel of a head (1.0)");
  RotaryScaling& s = c.rope_scaling;
  for (const char* key : {"rope_scaling", "rope_parameters"})
    if (r.has(key)) read_rope_block(r, key, s, theta);
  if (!(theta > 0.0f)) r.fail("rope_theta " + std::to_string(theta) + " is not positive");
  c.rope_theta = theta;
  if (s.type == "default") {
    s = RotaryScaling{};
  } else if (s.type == "dynamic") {
    // Dynamic NTK scales past max_position_embeddings, the original context: tensorplay's
    // context is the original one times the factor.
    s.original_context_length = max_position_embeddings;
    c.context_length = static_cast<int64_t>(static_cast<double>(max_position_embeddings) *
                                            std::max(s.factor, 1.0));
  }
  if (s.type == "llama3" && s.original_context_length == 0)
    r.fail("rope_scaling of type llama3 has no original_max_position_embeddings");
  try {
    check_rotary_scaling(s);
  } catch (const std::invalid_argument& e) {
    r.fail(e.what());
  }
}

void check_unsupported(const ConfigReader& r, const LlamaConfig& c) {
  if (r.has("hidden_act") && r.at("hidden_act") != "silu")
    r.fail("hidden_act is " + r.at("hidden_act").dump() +
           "; tensorplay's Llama gates its MLP with SiLU (\"silu\")");
  if (r.flag("mlp_bias", false)) r.fail("mlp_bias is true; tensorplay's Llama MLP has no bias");
  if (r.flag("use_sliding_window", false))
    r.fail("use_sliding_window is true; tensorplay has a sliding window only for Mistral (a " +
           c.model_type + " model with one per layer is not supported)");
  if (r.has("layer_types") && r.at("layer_types").is_array())
    for (const Json& t : r.at("layer_types"))
      if (t != "full_attention")
        r.fail("layer_types holds " + t.dump() + "; tensorplay's " + c.model_type +
               " has full attention in every layer");
  if (c.head_dim == 0 && (c.width % c.n_head != 0 || (c.width / c.n_head) % 2 != 0))
    r.fail("num_attention_heads (" + std::to_string(c.n_head) + ") must divide hidden_size (" +
           std::to_string(c.width) + ") into an even head size, or head_dim must be given");
  if (c.head_dim % 2 != 0)
    r.fail("head_dim is " + std::to_string(c.head_dim) +
           "; rotary positions need an even head size");
  if (c.n_head % c.n_kv_head != 0)
    r.fail("num_key_value_heads (" + std::to_string(c.n_kv_head) +
           ") does not divide num_attention_heads (" + std::to_string(c.n_head) + ")");
}

}  // namespace

LlamaConfig llama_config_from_json(const std::string& json_text, const std::string& source) {
  const ConfigReader r(json_text, "Llama", source);
  LlamaConfig c;
  if (r.has("model_type")) {
    const Json& t = r.at("model_type");
    bool known = false;
    for (const Family& f : kFamilies) known = known || t == f.model_type;
    if (!known)
      r.fail("model_type is " + t.dump() +
             "; this reads the families of Llama's shape: \"llama\", \"qwen2\", \"qwen3\" and "
             "\"mistral\"");
    c.model_type = t.get<std::string>();
  }
  const Family& f = family_of(c.model_type);
  c.vocab_size = r.size("vocab_size", f.vocab_size);
  c.width = r.size("hidden_size", f.width);
  c.mlp_width = r.size("intermediate_size", f.mlp_width);
  c.n_layer = r.size("num_hidden_layers", f.n_layer);
  c.n_head = r.size("num_attention_heads", f.n_head);
  c.n_kv_head = r.size("num_key_value_heads", f.n_kv_head > 0 ? f.n_kv_head : c.n_head);
  c.context_length = r.size("max_position_embeddings", f.context_length);
  c.tie_weights = r.flag("tie_word_embeddings", false);
  if (r.has("rms_norm_eps")) c.norm_eps = r.number(r.at("rms_norm_eps"), "rms_norm_eps");
  if (!(c.norm_eps >= 0.0f)) r.fail("rms_norm_eps is negative");
  // head_dim: null or absent means hidden_size / num_attention_heads, Qwen3's default aside.
  c.head_dim = r.size("head_dim", f.head_dim);
  if (c.head_dim == c.width / c.n_head && c.width % c.n_head == 0) c.head_dim = 0;
  if (c.model_type == "qwen2") {
    c.qkv_bias = true;
  } else if (c.model_type == "mistral") {
    if (r.flag("attention_bias", false)) r.fail("attention_bias is true; Mistral has none");
    c.sliding_window = r.size("sliding_window", 0);
  } else {
    c.qkv_bias = c.o_bias = r.flag("attention_bias", false);
  }
  c.qk_norm = c.model_type == "qwen3";
  read_rope(r, c, c.context_length);
  check_unsupported(r, c);
  return c;
}

// transformers 4's rope_scaling of `s` (null for the default rope).
Json rope_scaling_json(const RotaryScaling& s) {
  if (s.type == "default") return nullptr;
  Json scaling = {{"rope_type", s.type}, {"factor", s.factor}};
  if (s.type == "llama3") {
    scaling["low_freq_factor"] = s.low_freq_factor;
    scaling["high_freq_factor"] = s.high_freq_factor;
  }
  if (s.type == "yarn") {
    scaling["beta_fast"] = s.beta_fast;
    scaling["beta_slow"] = s.beta_slow;
    if (s.attention_factor > 0.0) scaling["attention_factor"] = s.attention_factor;
    if (s.mscale > 0.0) scaling["mscale"] = s.mscale;
    if (s.mscale_all_dim > 0.0) scaling["mscale_all_dim"] = s.mscale_all_dim;
    if (!s.truncate) scaling["truncate"] = false;
  }
  if (s.original_context_length > 0 && s.type != "dynamic")
    scaling["original_max_position_embeddings"] = s.original_context_length;
  return scaling;
}

std::string llama_config_to_json(const LlamaConfig& c, DType dtype) {
  const Family& f = family_of(c.model_type);
  const double theta = shortest_double(c.rope_theta);
  const RotaryScaling& s = c.rope_scaling;
  // transformers 5's rope_parameters: the same, with the theta inside.
  Json rope = {{"rope_theta", theta}, {"rope_type", s.type}};
  const Json scaling = rope_scaling_json(s);
  if (!scaling.is_null())
    for (const auto& [key, value] : scaling.items()) rope[key] = value;
  const int64_t max_positions = s.type == "dynamic" ? s.original_context_length : c.context_length;
  Json j = {{"architectures", {f.architecture}},
            {"attention_dropout", 0.0},
            {"bos_token_id", nullptr},
            {"dtype", dtype == DType::Float32 ? "float32" : "bfloat16"},
            {"eos_token_id", nullptr},
            {"head_dim", c.head_size()},
            {"hidden_act", "silu"},
            {"hidden_size", c.width},
            {"initializer_range", 0.02},
            {"intermediate_size", c.mlp_width},
            {"max_position_embeddings", max_positions},
            {"model_type", c.model_type},
            {"num_attention_heads", c.n_head},
            {"num_hidden_layers", c.n_layer},
            {"num_key_value_heads", c.n_kv_head > 0 ? c.n_kv_head : c.n_head},
            {"rms_norm_eps", shortest_double(c.norm_eps)},
            {"rope_parameters", rope},
            {"rope_scaling", scaling},
            {"rope_theta", theta},
            {"tie_word_embeddings", c.tie_weights},
            {"use_cache", true},
            {"vocab_size", c.vocab_size}};
  if (c.model_type == "llama") {
    j["attention_bias"] = c.qkv_bias;
    j["mlp_bias"] = false;
    j["pretraining_tp"] = 1;
  } else if (c.model_type == "qwen3") {
    j["attention_bias"] = c.qkv_bias;
  }
  if (c.model_type == "qwen2" || c.model_type == "qwen3") {
    j["use_sliding_window"] = false;
    j["sliding_window"] = nullptr;
    j["max_window_layers"] = c.n_layer;
  }
  if (c.model_type == "mistral")
    j["sliding_window"] = c.sliding_window > 0 ? Json(c.sliding_window) : Json(nullptr);
  return j.dump(2) + "\n";
}

std::vector<std::string> llama_tensor_names(const LlamaConfig& config) {
  std::vector<std::string> out;
  for (const Mapped& m : mapping(config)) out.push_back(hf_name(m.ours));
  return out;
}

std::vector<HfTensorName> llama_tensor_map(const LlamaConfig& config) {
  std::vector<HfTensorName> out;
  for (const Mapped& m : mapping(config)) out.push_back({m.ours, hf_name(m.ours), false});
  return out;
}

StateDict to_llama_state_dict(const LlamaImpl& model) {
  return to_llama_state_dict(model.state_dict(), model.config());
}

StateDict to_llama_state_dict(const StateDict& tensors, const LlamaConfig& config, bool partial) {
  StateDict out;
  for (const Mapped& m : mapping(config)) {
    const Tensor* t = tensors.find(m.ours);
    if (t == nullptr || !t->defined()) {
      if (partial) continue;
      throw std::invalid_argument("to_llama_state_dict: no tensor " + m.ours +
                                  " for a Llama with " + describe(config));
    }
    out.insert(hf_name(m.ours), *t);
  }
  return out;
}

StateDict from_llama_state_dict(const StateDict& hf, const LlamaConfig& config, bool partial) {
  // LlamaForCausalLM names its body "model."; a bare LlamaModel does not.
  bool prefixed = false;
  for (const auto& item : hf) prefixed = prefixed || item.first.starts_with("model.");
  StateDict out;
  std::set<std::string> expected;
  std::vector<std::string> missing, wrong_shape, unexpected;
  for (const Mapped& m : mapping(config)) {
    const std::string name = prefixed ? hf_name(m.ours) : m.ours;
    expected.insert(name);
    const Tensor* t = hf.find(name);
    if (t == nullptr) {
      if (!partial) missing.push_back(name);
      continue;
    }
    if (t->shape() != m.shape) {
      wrong_shape.push_back(name + " is " + to_string(t->shape()) + ", expected " +
                            to_string(m.shape));
      continue;
    }
    out.insert(m.ours, *t);
  }
  for (const auto& [name, tensor] : hf) {
    if (expected.count(name) || is_legacy_rotary(name)) continue;
    if (name == "lm_head.weight" && config.tie_weights) continue;  // the tied head, written out
    unexpected.push_back(name);
  }
  if (!missing.empty() || !wrong_shape.empty() || !unexpected.empty()) {
    std::string message = "Llama weights do not fit a Llama with " + describe(config) + ":";
    if (!missing.empty()) message += " missing " + list_names(missing) + ";";
    if (!wrong_shape.empty()) message += " " + list_names(wrong_shape) + ";";
    if (!unexpected.empty()) message += " not part of Llama: " + list_names(unexpected) + ";";
    message.back() = '.';
    throw std::invalid_argument(message);
  }
  if (config.tie_weights && out.contains("embed_tokens.weight"))
    out.insert("lm_head.weight", out.at("embed_tokens.weight"));
  return out;
}

void save_pretrained(const LlamaImpl& model, const std::string& folder, uint64_t max_shard_bytes) {
  save_safetensors_folder(to_llama_state_dict(model), folder, max_shard_bytes);
  write_text(fs::path(folder) / "config.json",
             llama_config_to_json(model.config(), model.embed_tokens->weight.dtype()),
             "save_pretrained");
}

LlamaConfig read_llama_config(const std::string& folder) {
  const fs::path path = config_json_path(folder, "Llama");
  return llama_config_from_json(read_text(path), path.string());
}

Llama llama_from_pretrained(const std::string& folder, DType dtype) {
  Llama model(read_llama_config(folder));
  load_pretrained(*model, folder);
  if (dtype != DType::Float32) model->to(dtype);
  model->eval();  // as transformers' from_pretrained
  return model;
}

void load_pretrained(LlamaImpl& model, const std::string& folder) {
  const LlamaConfig theirs = read_llama_config(folder);
  const LlamaConfig& ours = model.config();
  if (theirs != ours)
    throw std::invalid_argument("load_pretrained: " + folder + " holds a Llama with " +
                                describe(theirs) + ", but the model has " + describe(ours));
  SafetensorsLoadOptions options;
  options.select = [](const std::string& name) { return !is_legacy_rotary(name); };
  detail::naming_files("load_pretrained", folder, [&] {
    model.load_state_dict(from_llama_state_dict(load_safetensors_folder(folder, options), theirs));
  });
}

}  // namespace tensorplay::nn
