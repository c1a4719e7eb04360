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
  const int64_t w = c.width, d = c.width / c.n_head;
  const int64_t kv = (c.n_kv_head > 0 ? c.n_kv_head : c.n_head) * d;
  std::vector<Mapped> out;
  out.push_back({"embed_tokens.weight", {c.vocab_size, w}});
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const std::string p = "layers." + std::to_string(i) + ".";
    out.push_back({p + "input_layernorm.weight", {w}});
    out.push_back({p + "self_attn.q_proj.weight", {c.n_head * d, w}});
    out.push_back({p + "self_attn.k_proj.weight", {kv, w}});
    out.push_back({p + "self_attn.v_proj.weight", {kv, w}});
    out.push_back({p + "self_attn.o_proj.weight", {w, c.n_head * d}});
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

// rope_theta from transformers 4's top-level field or transformers 5's rope_parameters; any
// scaling (rope_scaling, or a rope_type other than "default") is refused.
float read_rope_theta(const ConfigReader& r) {
  float theta = 10000.0f;
  if (r.has("rope_theta")) theta = r.number(r.at("rope_theta"), "rope_theta");
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    if (!r.has(key)) continue;
    const Json& p = r.at(key);
    if (!p.is_object()) r.fail(std::string(key) + " is " + p.dump() + ", not an object");
    std::string type = "default";
    for (const char* type_key : {"rope_type", "type"})
      if (p.contains(type_key) && p[type_key].is_string()) type = p[type_key].get<std::string>();
    if (type != "default")
      r.fail(std::string(key) + " has rope type \"" + type +
             "\"; tensorplay's Llama has unscaled rotary positions (\"default\")");
    if (p.contains("rope_theta"))
      theta = r.number(p["rope_theta"], std::string(key) + ".rope_theta");
  }
  if (!(theta > 0.0f)) r.fail("rope_theta " + std::to_string(theta) + " is not positive");
  return theta;
}

void check_unsupported(const ConfigReader& r, const LlamaConfig& c) {
  if (r.has("hidden_act") && r.at("hidden_act") != "silu")
    r.fail("hidden_act is " + r.at("hidden_act").dump() +
           "; tensorplay's Llama gates its MLP with SiLU (\"silu\")");
  if (r.flag("attention_bias", false))
    r.fail("attention_bias is true; tensorplay's Llama projections have no bias");
  if (r.flag("mlp_bias", false)) r.fail("mlp_bias is true; tensorplay's Llama MLP has no bias");
  if (c.width % c.n_head != 0 || (c.width / c.n_head) % 2 != 0)
    r.fail("num_attention_heads (" + std::to_string(c.n_head) + ") must divide hidden_size (" +
           std::to_string(c.width) + ") into an even head size");
  if (r.has("head_dim") && r.size("head_dim", 0) != c.width / c.n_head)
    r.fail("head_dim is " + r.at("head_dim").dump() +
           "; tensorplay's Llama has heads of hidden_size / num_attention_heads (" +
           std::to_string(c.width / c.n_head) + ")");
  if (c.n_head % c.n_kv_head != 0)
    r.fail("num_key_value_heads (" + std::to_string(c.n_kv_head) +
           ") does not divide num_attention_heads (" + std::to_string(c.n_head) + ")");
}

}  // namespace

LlamaConfig llama_config_from_json(const std::string& json_text, const std::string& source) {
  const ConfigReader r(json_text, "Llama", source);
  r.expect_model_type("llama");
  LlamaConfig c;
  c.vocab_size = r.size("vocab_size", 32000);
  c.width = r.size("hidden_size", 4096);
  c.mlp_width = r.size("intermediate_size", 11008);
  c.n_layer = r.size("num_hidden_layers", 32);
  c.n_head = r.size("num_attention_heads", 32);
  c.n_kv_head = r.size("num_key_value_heads", c.n_head);
  c.context_length = r.size("max_position_embeddings", 2048);
  c.tie_weights = r.flag("tie_word_embeddings", false);
  if (r.has("rms_norm_eps")) c.norm_eps = r.number(r.at("rms_norm_eps"), "rms_norm_eps");
  if (!(c.norm_eps >= 0.0f)) r.fail("rms_norm_eps is negative");
  c.rope_theta = read_rope_theta(r);
  check_unsupported(r, c);
  return c;
}

std::string llama_config_to_json(const LlamaConfig& c, DType dtype) {
  const double theta = shortest_double(c.rope_theta);
  Json j = {{"architectures", {"LlamaForCausalLM"}},
            {"attention_bias", false},
            {"attention_dropout", 0.0},
            {"bos_token_id", nullptr},
            {"dtype", dtype == DType::Float32 ? "float32" : "bfloat16"},
            {"eos_token_id", nullptr},
            {"head_dim", c.width / c.n_head},
            {"hidden_act", "silu"},
            {"hidden_size", c.width},
            {"initializer_range", 0.02},
            {"intermediate_size", c.mlp_width},
            {"max_position_embeddings", c.context_length},
            {"mlp_bias", false},
            {"model_type", "llama"},
            {"num_attention_heads", c.n_head},
            {"num_hidden_layers", c.n_layer},
            {"num_key_value_heads", c.n_kv_head > 0 ? c.n_kv_head : c.n_head},
            {"pretraining_tp", 1},
            {"rms_norm_eps", shortest_double(c.norm_eps)},
            {"rope_parameters", {{"rope_theta", theta}, {"rope_type", "default"}}},
            {"rope_scaling", nullptr},
            {"rope_theta", theta},
            {"tie_word_embeddings", c.tie_weights},
            {"use_cache", true},
            {"vocab_size", c.vocab_size}};
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
  model.load_state_dict(from_llama_state_dict(load_safetensors_folder(folder, options), theirs));
}

}  // namespace tensorplay::nn
