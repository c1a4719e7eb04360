// The tensorplay side of the Llama checks against transformers: loads a Llama folder and writes
// its logits, or builds a Llama with random weights, saves it as a folder and writes its logits,
// or writes one step's gradients. Tensors travel between the two sides as safetensors files.
//
//   llama_transformers_peer logits FOLDER TOKENS OUT
//   llama_transformers_peer export CONFIG_JSON SEED FOLDER TOKENS OUT
//   llama_transformers_peer grads FOLDER TOKENS OUT
// TOKENS holds "tokens", float32 [B, T]; OUT receives "logits", float32 [B, T, vocab].
// grads also reads "targets" [B, T] from TOKENS and writes "loss" (mean cross entropy) and each
// parameter's gradient under LlamaForCausalLM's name.
#include <fstream>
#include <iostream>
#include <sstream>

#include "tensorplay/nn/hf/hugging_face_llama.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace nn = tensorplay::nn;

namespace {

void write_logits(nn::Llama& model, const std::string& tokens_path, const std::string& out_path) {
  tp::NoGradGuard no_grad;
  const tp::Tensor tokens = tp::load_safetensors(tokens_path).at("tokens");
  tp::StateDict out;
  out.insert("logits", model(tokens).to(tp::DType::Float32));
  tp::save_safetensors(out, out_path);
}

void export_random(const std::string& config_path, uint64_t seed, const std::string& folder,
                   const std::string& tokens, const std::string& out) {
  std::ifstream in(config_path);
  std::stringstream text;
  text << in.rdbuf();
  tp::manual_seed(seed);
  nn::Llama model(nn::llama_config_from_json(text.str(), config_path));
  {
    // Norms away from 1, so that each one's mapping shows in the logits.
    tp::NoGradGuard no_grad;
    for (auto& [name, p] : model->named_parameters()) p.copy_(p + tp::randn(p.shape()) * 0.1f);
  }
  nn::save_pretrained(model, folder);
  write_logits(model, tokens, out);
}

void write_grads(const std::string& folder, const std::string& tokens, const std::string& out) {
  nn::Llama model = nn::llama_from_pretrained(folder);
  const tp::StateDict in = tp::load_safetensors(tokens);
  const tp::Tensor logits = model(in.at("tokens"));
  const tp::Tensor loss =
      tp::cross_entropy(logits.reshape({-1, logits.size(-1)}), in.at("targets").reshape({-1}));
  loss.backward();
  tp::StateDict grads;
  for (const auto& [name, p] : model->named_parameters()) grads.insert(name, p.grad());
  tp::StateDict result = nn::to_llama_state_dict(grads, model->config());
  result.insert("loss", loss.detach());
  tp::save_safetensors(result, out);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string command = argc > 1 ? argv[1] : "";
    if (command == "logits" && argc == 5) {
      nn::Llama model = nn::llama_from_pretrained(argv[2]);
      write_logits(model, argv[3], argv[4]);
      return 0;
    }
    if (command == "export" && argc == 7) {
      export_random(argv[2], std::stoull(argv[3]), argv[4], argv[5], argv[6]);
      return 0;
    }
    if (command == "grads" && argc == 5) {
      write_grads(argv[2], argv[3], argv[4]);
      return 0;
    }
    std::cerr << "usage: llama_transformers_peer logits FOLDER TOKENS OUT\n"
                 "       llama_transformers_peer export CONFIG_JSON SEED FOLDER TOKENS OUT\n"
                 "       llama_transformers_peer grads FOLDER TOKENS OUT\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "llama_transformers_peer: " << e.what() << "\n";
    return 1;
  }
}
