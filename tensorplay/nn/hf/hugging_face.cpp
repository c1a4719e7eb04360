// GPT-2 folders as transformers writes them: config.json mapping, the name and layout mapping of
// GPT2LMHeadModel's tensors (Conv1D weights transposed), and saving and loading a folder.
#include "tensorplay/nn/hf/hugging_face.h"

#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "tensorplay/core/autograd/grad_mode.h"
#include "tensorplay/core/ops/shape_ops.h"
#include "tensorplay/core/safetensors.h"
#include "tensorplay/nn/hf/detail/config_reader.h"
#include "tensorplay/nn/hf/detail/hugging_face_text.h"

namespace tensorplay::nn {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using detail::config_json_path;
using detail::list_names;
using detail::read_text;
using detail::shortest_double;
using detail::write_text;

// Per-block tensors, in GPT2's order, and whether each is a Conv1D weight (stored transposed).
struct BlockTensor {
  const char* name;
  bool conv1d;
};
constexpr BlockTensor kBlockTensors[] = {
    {"ln_1.weight", false},      {"ln_1.bias", false},         {"attn.c_attn.weight", true},
    {"attn.c_attn.bias", false}, {"attn.c_proj.weight", true}, {"attn.c_proj.bias", false},
    {"ln_2.weight", false},      {"ln_2.bias", false},         {"mlp.c_fc.weight", true},
    {"mlp.c_fc.bias", false},    {"mlp.c_proj.weight", true},  {"mlp.c_proj.bias", false}};

// One tensor of the mapping: tensorplay's name, GPT-2's name (without the "transformer." prefix
// where GPT2Model has it), GPT-2's shape, and whether GPT-2 stores it transposed.
struct Mapped {
  std::string ours;
  std::string theirs;
  bool in_transformer;  // under "transformer." in GPT2LMHeadModel
  Shape shape;          // GPT-2's shape
  bool transposed;
};

Shape block_shape(const std::string& name, int64_t c) {
  if (name.starts_with("ln_")) return {c};
  if (name == "attn.c_attn.weight") return {c, 3 * c};
  if (name == "attn.c_attn.bias") return {3 * c};
  if (name == "attn.c_proj.weight") return {c, c};
  if (name == "mlp.c_fc.weight") return {c, 4 * c};
  if (name == "mlp.c_fc.bias") return {4 * c};
  if (name == "mlp.c_proj.weight") return {4 * c, c};
  return {c};  // the projections' biases
}

std::vector<Mapped> mapping(const GPTConfig& config) {
  const int64_t c = config.width;
  std::vector<Mapped> out;
  out.push_back({"wte.weight", "wte.weight", true, {config.vocab_size, c}, false});
  out.push_back({"wpe.weight", "wpe.weight", true, {config.context_length, c}, false});
  for (int64_t i = 0; i < config.n_layer; ++i)
    for (const BlockTensor& t : kBlockTensors) {
      const std::string index = std::to_string(i);
      out.push_back({"blocks." + index + "." + t.name, "h." + index + "." + t.name, true,
                     block_shape(t.name, c), t.conv1d});
    }
  out.push_back({"ln_f.weight", "ln_f.weight", true, {c}, false});
  out.push_back({"ln_f.bias", "ln_f.bias", true, {c}, false});
  if (!config.tie_weights)
    out.push_back({"lm_head.weight", "lm_head.weight", false, {config.vocab_size, c}, false});
  return out;
}

// The attention-mask buffers older transformers saved with GPT-2 blocks.
bool is_legacy_mask(const std::string& name) {
  return name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias");
}

Tensor transposed(const Tensor& t) {
  NoGradGuard no_grad;
  return transpose(t, 0, 1);
}

}  // namespace

namespace {

// The fields tensorplay's GPT has no counterpart for, each refused with what it has instead.
void check_unsupported(const detail::ConfigReader& r, const GPTConfig& config) {
  if (config.width % config.n_head != 0)
    r.fail("n_head (" + std::to_string(config.n_head) + ") does not divide n_embd (" +
           std::to_string(config.width) + ")");
  if (r.has("n_inner") && r.size("n_inner", 0) != 4 * config.width)
    r.fail("n_inner is " + r.at("n_inner").dump() + "; tensorplay's GPT has an MLP of 4 n_embd (" +
           std::to_string(4 * config.width) + ")");
  const std::string activation =
      r.has("activation_function") && r.at("activation_function").is_string()
          ? r.at("activation_function").get<std::string>()
          : (r.has("activation_function") ? r.at("activation_function").dump() : "gelu_new");
  if (activation != "gelu_new" && activation != "gelu_pytorch_tanh")
    r.fail("activation_function is \"" + activation +
           "\"; tensorplay's GPT uses GELU's tanh form (\"gelu_new\" or \"gelu_pytorch_tanh\")");
  if (r.has("layer_norm_epsilon")) {
    if (!r.at("layer_norm_epsilon").is_number()) r.fail("layer_norm_epsilon is not a number");
    const double eps = r.at("layer_norm_epsilon").get<double>();
    if (std::abs(eps - 1e-5) > 1e-12)
      r.fail("layer_norm_epsilon is " + r.at("layer_norm_epsilon").dump() +
             "; tensorplay's GPT normalises with 1e-5");
  }
  if (!r.flag("scale_attn_weights", true))
    r.fail(
        "scale_attn_weights is false; tensorplay's attention always scales by 1/sqrt(head size)");
  if (r.flag("scale_attn_by_inverse_layer_idx", false))
    r.fail(
        "scale_attn_by_inverse_layer_idx is true; tensorplay's attention does not scale by layer");
  if (r.flag("add_cross_attention", false))
    r.fail("add_cross_attention is true; tensorplay's GPT is decoder-only");
}

}  // namespace

GPTConfig gpt2_config_from_json(const std::string& json_text, const std::string& source) {
  const detail::ConfigReader r(json_text, "GPT-2", source);
  r.expect_model_type("gpt2");
  GPTConfig config;
  config.vocab_size = r.size("vocab_size", 50257);
  config.context_length = r.size("n_positions", 1024);
  config.width = r.size("n_embd", 768);
  config.n_layer = r.size("n_layer", 12);
  config.n_head = r.size("n_head", 12);
  config.tie_weights = r.flag("tie_word_embeddings", true);
  check_unsupported(r, config);
  if (r.has("resid_pdrop")) {
    if (!r.at("resid_pdrop").is_number()) r.fail("resid_pdrop is not a number");
    const double p = r.at("resid_pdrop").get<double>();
    if (!(p >= 0.0 && p <= 1.0))
      r.fail("resid_pdrop " + r.at("resid_pdrop").dump() + " is not in [0, 1]");
    config.dropout = static_cast<float>(p);
  } else {
    config.dropout = 0.1f;
  }
  return config;
}

std::string gpt2_config_to_json(const GPTConfig& config, DType dtype) {
  const double dropout = shortest_double(config.dropout);
  Json j = {{"activation_function", "gelu_new"},
            {"add_cross_attention", false},
            {"architectures", {"GPT2LMHeadModel"}},
            {"attn_pdrop", 0.0},
            {"bos_token_id", nullptr},
            {"dtype", dtype == DType::Float32 ? "float32" : "bfloat16"},
            {"embd_pdrop", dropout},
            {"eos_token_id", nullptr},
            {"initializer_range", 0.02},
            {"layer_norm_epsilon", 1e-5},
            {"model_type", "gpt2"},
            {"n_embd", config.width},
            {"n_head", config.n_head},
            {"n_inner", nullptr},
            {"n_layer", config.n_layer},
            {"n_positions", config.context_length},
            {"reorder_and_upcast_attn", false},
            {"resid_pdrop", dropout},
            {"scale_attn_by_inverse_layer_idx", false},
            {"scale_attn_weights", true},
            {"tie_word_embeddings", config.tie_weights},
            {"use_cache", true},
            {"vocab_size", config.vocab_size}};
  return j.dump(2) + "\n";
}

std::string describe(const GPTConfig& c) {
  return "vocab_size=" + std::to_string(c.vocab_size) +
         ", context_length=" + std::to_string(c.context_length) +
         ", n_layer=" + std::to_string(c.n_layer) + ", n_head=" + std::to_string(c.n_head) +
         ", width=" + std::to_string(c.width) + ", tie_weights=" + (c.tie_weights ? "1" : "0");
}

std::vector<HfTensorName> gpt2_tensor_map(const GPTConfig& config) {
  std::vector<HfTensorName> out;
  for (const Mapped& m : mapping(config))
    out.push_back({m.ours, (m.in_transformer ? "transformer." : "") + m.theirs, m.transposed});
  return out;
}

StateDict to_gpt2_state_dict(const GPTImpl& model) {
  return to_gpt2_state_dict(model.state_dict(), model.config());
}

StateDict to_gpt2_state_dict(const StateDict& tensors, const GPTConfig& config) {
  StateDict out;
  for (const Mapped& m : mapping(config)) {
    const Tensor* t = tensors.find(m.ours);
    if (t == nullptr || !t->defined())
      throw std::invalid_argument("to_gpt2_state_dict: no tensor " + m.ours + " for a GPT with " +
                                  describe(config));
    out.insert((m.in_transformer ? "transformer." : "") + m.theirs,
               m.transposed ? transposed(*t) : *t);
  }
  return out;
}

StateDict from_gpt2_state_dict(const StateDict& hf, const GPTConfig& config) {
  // GPT2LMHeadModel names its body "transformer."; a bare GPT2Model does not.
  bool prefixed = false;
  for (const auto& item : hf) prefixed = prefixed || item.first.starts_with("transformer.");
  const std::string prefix = prefixed ? "transformer." : "";

  StateDict out;
  std::set<std::string> expected;
  std::vector<std::string> missing, wrong_shape, unexpected;
  for (const Mapped& m : mapping(config)) {
    const std::string name = (m.in_transformer ? prefix : "") + m.theirs;
    expected.insert(name);
    const Tensor* t = hf.find(name);
    if (t == nullptr) {
      missing.push_back(name);
      continue;
    }
    if (t->shape() != m.shape) {
      wrong_shape.push_back(name + " is " + to_string(t->shape()) + ", expected " +
                            to_string(m.shape));
      continue;
    }
    out.insert(m.ours, m.transposed ? transposed(*t) : *t);
  }
  for (const auto& [name, tensor] : hf) {
    if (expected.count(name)) continue;
    if (is_legacy_mask(name)) continue;
    if (name == "lm_head.weight" && config.tie_weights) continue;  // the tied head, written out
    unexpected.push_back(name);
  }
  if (!missing.empty() || !wrong_shape.empty() || !unexpected.empty()) {
    std::string message = "GPT-2 weights do not fit a GPT with " + describe(config) + ":";
    if (!missing.empty()) message += " missing " + list_names(missing) + ";";
    if (!wrong_shape.empty()) message += " " + list_names(wrong_shape) + ";";
    if (!unexpected.empty()) message += " not part of GPT-2: " + list_names(unexpected) + ";";
    message.back() = '.';
    throw std::invalid_argument(message);
  }
  if (config.tie_weights) out.insert("lm_head.weight", out.at("wte.weight"));
  return out;
}

void save_pretrained(const GPTImpl& model, const std::string& folder, uint64_t max_shard_bytes) {
  const StateDict tensors = to_gpt2_state_dict(model);
  save_safetensors_folder(tensors, folder, max_shard_bytes);
  write_text(fs::path(folder) / "config.json",
             gpt2_config_to_json(model.config(), model.wte->weight.dtype()), "save_pretrained");
}

GPTConfig read_gpt2_config(const std::string& folder) {
  const fs::path path = config_json_path(folder, "GPT-2");
  return gpt2_config_from_json(read_text(path), path.string());
}

GPT gpt_from_pretrained(const std::string& folder, DType dtype) {
  GPT model(read_gpt2_config(folder));
  load_pretrained(*model, folder);
  if (dtype != DType::Float32) model->to(dtype);
  model->eval();  // as transformers' from_pretrained: no dropout until train() is asked for
  return model;
}

void load_pretrained(GPTImpl& model, const std::string& folder) {
  const GPTConfig theirs = read_gpt2_config(folder);
  const GPTConfig& ours = model.config();
  if (describe(theirs) != describe(ours))
    throw std::invalid_argument("load_pretrained: " + folder + " holds a GPT with " +
                                describe(theirs) + ", but the model has " + describe(ours));
  // Old checkpoints (the original GPT-2 release among them) carry each block's causal mask,
  // [1, 1, n_positions, n_positions]: those are skipped, not read.
  SafetensorsLoadOptions options;
  options.select = [](const std::string& name) { return !is_legacy_mask(name); };
  detail::naming_files("load_pretrained", folder, [&] {
    model.load_state_dict(from_gpt2_state_dict(load_safetensors_folder(folder, options), theirs));
  });
}

}  // namespace tensorplay::nn
