// Pipeline stages' shares of a Llama folder: one shard per stage, an index written at the end,
// and each stage's tensors read back by name.
#include "tensors/nn/llama_pretrained_parts.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "tensors/nn/hugging_face_llama.h"
#include "tensors/safetensors.h"

namespace tensorplay::nn {
namespace {

namespace fs = std::filesystem;

std::string part_file(int part, int parts) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "model-%05d-of-%05d.safetensors", part + 1, parts);
  return buf;
}

// The folder's Llama name for each of the stage's tensor names (a tied head reads the
// embedding).
std::map<std::string, std::string> hf_names_of(const Module& stage, const LlamaConfig& config) {
  std::map<std::string, std::string> out;
  for (const std::string& name : stage.state_dict().keys()) {
    const bool head = name == "lm_head.weight";
    out[name] = head && config.tie_weights ? "model.embed_tokens.weight"
                : head                     ? name
                                           : "model." + name;
  }
  return out;
}

// " (and N more)" for a list of `count` names of which the first was shown.
std::string more(size_t count) {
  return count > 1 ? " (and " + std::to_string(count - 1) + " more)" : std::string();
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  if (!out) throw std::runtime_error("finish_pretrained_parts: cannot write " + path.string());
}

}  // namespace

void save_pretrained_part(const Module& stage, const LlamaConfig& config, const std::string& folder,
                          int part, int parts) {
  if (parts <= 0 || part < 0 || part >= parts)
    throw std::invalid_argument("save_pretrained_part: part " + std::to_string(part) +
                                " is not in [0, " + std::to_string(parts) + ")");
  // A tied embedding is held by the first stage (the lookup) and the last (the head): the
  // first writes it. A stage is the last when it runs the head, the first (too) when it holds
  // the first block or no head.
  bool runs_head = false;
  for (const auto& [name, child] : stage.named_children())
    runs_head = runs_head || name == "lm_head";
  const bool writes_embedding =
      !runs_head || stage.find_tensor("layers.0.input_layernorm.weight").defined();
  StateDict own;
  for (const auto& [name, tensor] : stage.state_dict()) {
    const bool tied_tensor =
        config.tie_weights && (name == "lm_head.weight" || name == "embed_tokens.weight");
    if (tied_tensor && (name == "lm_head.weight" || !writes_embedding)) continue;
    own.insert(name, tensor);
  }
  const StateDict hf = to_llama_state_dict(own, config, /*partial=*/true);
  if (hf.size() != own.size())
    throw std::invalid_argument("save_pretrained_part: the stage holds tensors a Llama with " +
                                describe(config) + " does not have");
  fs::create_directories(folder);
  const fs::path path = fs::path(folder) / part_file(part, parts);
  const fs::path temporary = path.string() + ".tmp." + std::to_string(::getpid());
  save_safetensors(hf, temporary.string(), {{"format", "pt"}});
  fs::rename(temporary, path);
}

void finish_pretrained_parts(const std::string& folder, const LlamaConfig& config, DType dtype,
                             int parts) {
  nlohmann::json weight_map = nlohmann::json::object();
  uint64_t total = 0;
  for (int part = 0; part < parts; ++part) {
    const std::string file = part_file(part, parts);
    const fs::path path = fs::path(folder) / file;
    if (!fs::exists(path))
      throw std::runtime_error("finish_pretrained_parts: " + path.string() + " is missing: stage " +
                               std::to_string(part) +
                               " has not written its part (call it after every part is saved)");
    for (const auto& [name, tensor] : load_safetensors(path.string())) {
      if (weight_map.contains(name))
        throw std::invalid_argument("finish_pretrained_parts: " + name + " is in both " +
                                    weight_map[name].get<std::string>() + " and " + file);
      weight_map[name] = file;
      total += tensor.nbytes();
    }
  }
  std::vector<std::string> missing;
  for (const std::string& name : llama_tensor_names(config))
    if (!weight_map.contains(name)) missing.push_back(name);
  if (!missing.empty())
    throw std::invalid_argument("finish_pretrained_parts: no part holds " + missing.front() +
                                more(missing.size()));
  nlohmann::json index = {{"metadata", {{"total_size", total}}},
                          {"weight_map", std::move(weight_map)}};
  write_text(fs::path(folder) / kSafetensorsIndexName, index.dump(2) + "\n");
  write_text(fs::path(folder) / "config.json", llama_config_to_json(config, dtype));
  std::error_code ec;
  fs::remove(fs::path(folder) / kSafetensorsSingleName, ec);  // would be read instead
}

void load_pretrained_part(Module& stage, const LlamaConfig& config, const std::string& folder) {
  const LlamaConfig theirs = read_llama_config(folder);
  if (theirs != config)
    throw std::invalid_argument("load_pretrained_part: " + folder + " holds a Llama with " +
                                describe(theirs) + ", but the stage is of one with " +
                                describe(config));
  const std::map<std::string, std::string> names = hf_names_of(stage, config);
  std::set<std::string> wanted;
  for (const auto& [ours, hf] : names) wanted.insert(hf);
  SafetensorsLoadOptions options;
  options.select = [&](const std::string& name) { return wanted.count(name) != 0; };
  const StateDict hf = load_safetensors_folder(folder, options);
  StateDict own;
  std::vector<std::string> missing;
  for (const auto& [ours, hf_name] : names) {
    const Tensor* t = hf.find(hf_name);
    if (t == nullptr)
      missing.push_back(hf_name);
    else
      own.insert(ours, *t);
  }
  if (!missing.empty())
    throw std::invalid_argument("load_pretrained_part: " + folder + " has no " + missing.front() +
                                " for this stage" + more(missing.size()));
  stage.load_state_dict(own);  // throws naming a tensor whose shape differs
}

}  // namespace tensorplay::nn
