// Pipeline stages' shares of a Hugging Face folder, for any model described by a PartsModel: one
// shard per stage, an index written at the end, and each stage's tensors read back by name.
#include "tensorplay/nn/hf/detail/pretrained_parts.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "tensorplay/core/autograd/grad_mode.h"
#include "tensorplay/core/ops/shape_ops.h"
#include "tensorplay/core/safetensors.h"
#include "tensorplay/nn/hf/detail/hugging_face_text.h"

namespace tensorplay::nn::detail {
namespace {

namespace fs = std::filesystem;

std::string part_file(int part, int parts) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "model-%05d-of-%05d.safetensors", part + 1, parts);
  return buf;
}

// " (and N more)" for a list of `count` names of which the first was shown.
std::string more(size_t count) {
  return count > 1 ? " (and " + std::to_string(count - 1) + " more)" : std::string();
}

Tensor transposed(const Tensor& t) {
  NoGradGuard no_grad;
  return transpose(t, 0, 1);
}

// The folder's entry for each of the stage's tensor names (a tied head reads the embedding's);
// throws, `caller` first, naming the stage's tensors that are not the model's.
std::map<std::string, const HfTensorName*> entries_of(const Module& stage, const PartsModel& model,
                                                      const char* caller) {
  std::map<std::string, const HfTensorName*> by_ours;
  for (const HfTensorName& t : model.tensors) by_ours[t.ours] = &t;
  const std::string head_weight = model.head + ".weight";
  std::map<std::string, const HfTensorName*> out;
  std::vector<std::string> unknown;
  for (const std::string& name : stage.state_dict().keys()) {
    const std::string& key = model.tied && name == head_weight ? model.embedding : name;
    auto it = by_ours.find(key);
    if (it == by_ours.end())
      unknown.push_back(name);
    else
      out[name] = it->second;
  }
  if (!unknown.empty())
    throw std::invalid_argument(std::string(caller) + ": the stage holds tensors a " +
                                model.family + " with " + model.description +
                                " does not have: " + unknown.front() + more(unknown.size()));
  return out;
}

// Whether `stage` writes a tied embedding. It is held by the first stage (the lookup) and the
// last (the head): the first writes it. A stage is the last when it runs the head, the first
// (too) when it holds the first block or no head.
bool writes_embedding(const Module& stage, const PartsModel& model) {
  bool runs_head = false;
  for (const auto& [name, child] : stage.named_children())
    runs_head = runs_head || name == model.head;
  return !runs_head || stage.find_tensor(model.first_block_tensor).defined();
}

}  // namespace

void save_part(const Module& stage, const PartsModel& model, const std::string& folder, int part,
               int parts) {
  if (parts <= 0 || part < 0 || part >= parts)
    throw std::invalid_argument("save_pretrained_part: part " + std::to_string(part) +
                                " is not in [0, " + std::to_string(parts) + ")");
  const auto entries = entries_of(stage, model, "save_pretrained_part");
  const bool embedding = writes_embedding(stage, model);
  const std::string head_weight = model.head + ".weight";
  StateDict hf;
  for (const auto& [name, tensor] : stage.state_dict()) {
    const bool tied_tensor = model.tied && (name == head_weight || name == model.embedding);
    if (tied_tensor && (name == head_weight || !embedding)) continue;
    const HfTensorName& entry = *entries.at(name);
    hf.insert(entry.hf, entry.transposed ? transposed(tensor) : tensor);
  }
  fs::create_directories(folder);
  const fs::path path = fs::path(folder) / part_file(part, parts);
  const fs::path temporary = path.string() + ".tmp." + std::to_string(::getpid());
  save_safetensors(hf, temporary.string(), {{"format", "pt"}});
  fs::rename(temporary, path);
}

void finish_parts(const std::string& folder, const PartsModel& model, DType dtype, int parts) {
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
  for (const HfTensorName& t : model.tensors)
    if (!weight_map.contains(t.hf)) missing.push_back(t.hf);
  if (!missing.empty())
    throw std::invalid_argument("finish_pretrained_parts: no part holds " + missing.front() +
                                more(missing.size()));
  nlohmann::json index = {{"metadata", {{"total_size", total}}},
                          {"weight_map", std::move(weight_map)}};
  write_text(fs::path(folder) / kSafetensorsIndexName, index.dump(2) + "\n",
             "finish_pretrained_parts");
  write_text(fs::path(folder) / "config.json", model.config_json(dtype), "finish_pretrained_parts");
  std::error_code ec;
  fs::remove(fs::path(folder) / kSafetensorsSingleName, ec);  // would be read instead
}

void load_part(Module& stage, const PartsModel& model, const std::string& folder) {
  if (const auto theirs = model.config_differs(folder))
    throw std::invalid_argument("load_pretrained_part: " + folder + " holds a " + model.family +
                                " with " + *theirs + ", but the stage is of one with " +
                                model.description);
  const auto entries = entries_of(stage, model, "load_pretrained_part");
  std::set<std::string> wanted;
  for (const auto& [ours, entry] : entries) wanted.insert(entry->hf);
  SafetensorsLoadOptions options;
  options.select = [&](const std::string& name) { return wanted.count(name) != 0; };
  const StateDict hf = load_safetensors_folder(folder, options);
  StateDict own;
  std::vector<std::string> missing;
  for (const auto& [ours, entry] : entries) {
    const Tensor* t = hf.find(entry->hf);
    if (t == nullptr)
      missing.push_back(entry->hf);
    else
      own.insert(ours, entry->transposed ? transposed(*t) : *t);
  }
  if (!missing.empty())
    throw std::invalid_argument("load_pretrained_part: " + folder + " has no " + missing.front() +
                                " for this stage" + more(missing.size()));
  stage.load_state_dict(own);  // throws naming a tensor whose shape differs
}

}  // namespace tensorplay::nn::detail
