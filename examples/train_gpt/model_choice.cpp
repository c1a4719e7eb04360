// Building train_gpt's model (fresh or from a Hugging Face folder) and exporting it as one.
#include "model_choice.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "tensorplay/distributed/process_group.h"
#include "tensorplay/nn/gpt.h"
#include "tensorplay/nn/hf/gpt2_pretrained_parts.h"
#include "tensorplay/nn/hf/hugging_face.h"
#include "tensorplay/nn/hf/hugging_face_llama.h"
#include "tensorplay/nn/hf/llama_pretrained_parts.h"
#include "tensorplay/nn/llama.h"

namespace train_gpt {
namespace tp = tensorplay;
namespace nn = tensorplay::nn;
namespace fs = std::filesystem;

namespace {

// "gpt2" or "llama", from a folder's config.json.
std::string folder_model_type(const std::string& folder) {
  const fs::path path = fs::path(folder) / "config.json";
  std::ifstream in(path);
  if (!in)
    throw std::invalid_argument("--init-from " + folder +
                                ": no config.json (give a Hugging Face model folder)");
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  const std::string type = j.is_object() ? j.value("model_type", std::string()) : "";
  if (type != "gpt2" && type != "llama" && type != "qwen2" && type != "qwen3" && type != "mistral")
    throw std::invalid_argument("--init-from " + folder + ": model_type \"" + type +
                                "\"; train_gpt reads gpt2, llama, qwen2, qwen3 and mistral "
                                "folders");
  return type;
}

void check_fit(const std::string& folder, int64_t vocab, int64_t model_vocab, int64_t context,
               int64_t model_context) {
  if (model_vocab != vocab)
    throw std::invalid_argument("--init-from " + folder + ": its vocabulary has " +
                                std::to_string(model_vocab) + " tokens, the data's " +
                                std::to_string(vocab) + " (use the tokenizer it was trained with)");
  if (model_context < context)
    throw std::invalid_argument("--init-from " + folder + ": its context is " +
                                std::to_string(model_context) + " tokens, less than --context " +
                                std::to_string(context));
}

ModelChoice gpt_choice(nn::GPT model) {
  const auto& c = model->config();
  return {model.ptr(), "gpt2", "blocks", c.n_layer,
          "GPT, " + std::to_string(c.n_layer) + " blocks, width " + std::to_string(c.width) + ", " +
              std::to_string(c.n_head) + " heads, context " + std::to_string(c.context_length)};
}

ModelChoice llama_choice(nn::Llama model) {
  const auto& c = model->config();
  return {model.ptr(), "llama", "layers", c.n_layer,
          "Llama, " + std::to_string(c.n_layer) + " blocks, width " + std::to_string(c.width) +
              ", " + std::to_string(c.n_head) + " heads (" + std::to_string(c.n_kv_head) +
              " key-value), MLP " + std::to_string(c.mlp_width) + ", context " +
              std::to_string(c.context_length)};
}

nn::LlamaConfig llama_config(const Options& o, int64_t vocab) {
  // Llama's MLP: 8/3 of the width (the parameters of a 4x GELU MLP), rounded up to 8.
  const int64_t mlp = o.mlp_width > 0 ? o.mlp_width : (8 * o.width / 3 + 7) / 8 * 8;
  return {.vocab_size = vocab,
          .context_length = o.context,
          .n_layer = o.layers,
          .n_head = o.heads,
          .n_kv_head = o.kv_heads > 0 ? o.kv_heads : o.heads,
          .width = o.width,
          .mlp_width = mlp,
          .rope_theta = o.rope_theta,
          .tie_weights = o.tie};
}

// Calls f(config, weights' dtype) with the model's GPTConfig or LlamaConfig.
template <typename F>
void with_config(const ModelChoice& model, F&& f) {
  if (model.kind == "gpt2") {
    const auto& gpt = *std::static_pointer_cast<nn::GPTImpl>(model.module);
    f(gpt.config(), gpt.wte->weight.dtype());
  } else {
    const auto& llama = *std::static_pointer_cast<nn::LlamaImpl>(model.module);
    f(llama.config(), llama.embed_tokens->weight.dtype());
  }
}

// The model-size flags given that --init-from's folder overrides, with the folder's values.
std::string overridden_flags(const Options& o, const ModelChoice& choice) {
  std::string out;
  const auto note = [&](const std::string& flag, const std::string& given,
                        const std::string& folder) {
    if (given != folder)
      out += (out.empty() ? "" : ", ") + flag + " " + given + " (the folder's: " + folder + ")";
  };
  int64_t width = 0, heads = 0;
  with_config(choice, [&](const auto& config, tp::DType) {
    width = config.width;
    heads = config.n_head;
  });
  for (const std::string& flag : o.given_model_flags) {
    if (flag == "--model") note(flag, o.model, choice.kind);
    if (flag == "--layers") note(flag, std::to_string(o.layers), std::to_string(choice.layers));
    if (flag == "--width") note(flag, std::to_string(o.width), std::to_string(width));
    if (flag == "--heads") note(flag, std::to_string(o.heads), std::to_string(heads));
    if (flag != "--model" && flag != "--layers" && flag != "--width" && flag != "--heads")
      out += (out.empty() ? "" : ", ") + flag + " (the folder's config.json decides)";
  }
  return out;
}

// --init-from's model: loaded whole, or by_stage built of its config (its weights are read by
// load_stage_parts), so that the initialisation draws the same random numbers either way.
ModelChoice from_folder(const Options& o, int64_t vocab, tp::DType dtype, bool by_stage) {
  ModelChoice choice;
  if (folder_model_type(o.init_from) == "gpt2") {
    nn::GPT model = by_stage ? nn::GPT(nn::read_gpt2_config(o.init_from))
                             : nn::gpt_from_pretrained(o.init_from, dtype);
    model->train();  // from_pretrained returns eval mode; training keeps the config's dropout
    check_fit(o.init_from, vocab, model->config().vocab_size, o.context,
              model->config().context_length);
    choice = gpt_choice(model);
  } else {
    nn::Llama model = by_stage ? nn::Llama(nn::read_llama_config(o.init_from))
                               : nn::llama_from_pretrained(o.init_from, dtype);
    model->train();
    check_fit(o.init_from, vocab, model->config().vocab_size, o.context,
              model->config().context_length);
    choice = llama_choice(model);
  }
  if (by_stage && dtype != tp::DType::Float32) choice.module->to(dtype);
  choice.overridden = overridden_flags(o, choice);
  choice.description += ", from " + o.init_from + (by_stage ? " (each stage its own tensors)" : "");
  return choice;
}

}  // namespace

ModelChoice make_model(const Options& o, int64_t vocab, bool by_stage) {
  const tp::DType dtype = o.dtype == "bfloat16" ? tp::DType::BFloat16 : tp::DType::Float32;
  if (!o.init_from.empty()) return from_folder(o, vocab, dtype, by_stage);
  ModelChoice choice;
  if (o.model == "llama") {
    choice = llama_choice(nn::Llama(llama_config(o, vocab)));
  } else {
    choice = gpt_choice(nn::GPT(nn::GPTConfig{.vocab_size = vocab,
                                              .context_length = o.context,
                                              .n_layer = o.layers,
                                              .n_head = o.heads,
                                              .width = o.width,
                                              .dropout = o.dropout,
                                              .tie_weights = o.tie}));
  }
  if (dtype != tp::DType::Float32) choice.module->to(dtype);
  return choice;
}

void export_model(const Options& o, const ModelChoice& model,
                  const std::vector<std::shared_ptr<tp::pipelining::PipelineStage>>& stages,
                  bool distributed, int dp_rank) {
  if (!distributed) {
    if (model.kind == "gpt2")
      nn::save_pretrained(*std::static_pointer_cast<nn::GPTImpl>(model.module), o.export_dir);
    else
      nn::save_pretrained(*std::static_pointer_cast<nn::LlamaImpl>(model.module), o.export_dir);
    return;
  }
  with_config(model, [&](const auto& config, tp::DType dtype) {
    if (dp_rank == 0)
      for (const auto& stage : stages)
        nn::save_pretrained_part(stage->module(), config, o.export_dir, stage->stage_index(),
                                 stage->num_stages());
    tp::distributed::barrier();
    if (tp::distributed::get_rank() == 0)
      nn::finish_pretrained_parts(o.export_dir, config, dtype, stages.front()->num_stages());
  });
}

void load_stage_parts(const Options& o, const ModelChoice& model,
                      const std::vector<std::shared_ptr<tp::pipelining::PipelineStage>>& stages) {
  with_config(model, [&](const auto& config, tp::DType) {
    for (const auto& stage : stages) nn::load_pretrained_part(stage->module(), config, o.init_from);
  });
}

}  // namespace train_gpt
