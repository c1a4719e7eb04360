// The tensorplay side of the checks against transformers: loads a GPT-2 folder and writes its
// logits, or builds a GPT with random weights, saves it as a folder and writes its logits; or
// runs RMSNorm and rotary embedding. Tensors travel between the two sides as safetensors files.
//
//   gpt2_transformers_peer logits FOLDER TOKENS OUT
//   gpt2_transformers_peer export CONFIG_JSON SEED FOLDER TOKENS OUT
//   gpt2_transformers_peer grads FOLDER TOKENS OUT
//   gpt2_transformers_peer llama_parts IN OUT EPS THETA CONTEXT
// TOKENS holds "tokens", float32 [B, T]; OUT receives "logits", float32 [B, T, vocab].
// grads also reads "targets" [B, T] from TOKENS and writes "loss" (mean cross entropy, eval
// mode) and each parameter's gradient under GPT-2's name and layout.
// llama_parts (for check_llama_parts_transformers.py) reads "h" [B, T, C], "weight" [C] and
// "q" [B, heads, T, D] and writes "rms_norm" (RMSNorm(C, EPS) of h) and "rotary"
// (RotaryEmbedding(D, CONTEXT, THETA) of q) and, with "grad_h" and "grad_q" in IN, the
// gradients "d_h", "d_weight", "d_q" of sum(rms_norm * grad_h) + sum(rotary * grad_q).
#include <fstream>
#include <iostream>
#include <sstream>

#include "tensorplay/nn/hf/hugging_face.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace nn = tensorplay::nn;

namespace {

void write_logits(nn::GPT& model, const std::string& tokens_path, const std::string& out_path) {
  model->eval();
  tp::NoGradGuard no_grad;
  const tp::Tensor tokens = tp::load_safetensors(tokens_path).at("tokens");
  tp::StateDict out;
  out.insert("logits", model(tokens).to(tp::DType::Float32));
  tp::save_safetensors(out, out_path);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string command = argc > 1 ? argv[1] : "";
    if (command == "logits" && argc == 5) {
      nn::GPT model = nn::gpt_from_pretrained(argv[2]);
      write_logits(model, argv[3], argv[4]);
      return 0;
    }
    if (command == "export" && argc == 7) {
      std::ifstream in(argv[2]);
      std::stringstream text;
      text << in.rdbuf();
      const nn::GPTConfig config = nn::gpt2_config_from_json(text.str(), argv[2]);
      tp::manual_seed(std::stoull(argv[3]));
      nn::GPT model(config);
      {
        // Biases and norms away from 0 and 1, so that each one's mapping shows in the logits.
        tp::NoGradGuard no_grad;
        for (auto& [name, p] : model->named_parameters()) p.copy_(p + tp::randn(p.shape()) * 0.1f);
      }
      nn::save_pretrained(model, argv[4]);
      write_logits(model, argv[5], argv[6]);
      return 0;
    }
    if (command == "grads" && argc == 5) {
      nn::GPT model = nn::gpt_from_pretrained(argv[2]);
      model->eval();
      const tp::StateDict in = tp::load_safetensors(argv[3]);
      const tp::Tensor logits = model(in.at("tokens"));
      const tp::Tensor loss =
          tp::cross_entropy(logits.reshape({-1, logits.size(-1)}), in.at("targets").reshape({-1}));
      loss.backward();
      tp::StateDict grads;
      for (const auto& [name, p] : model->named_parameters()) grads.insert(name, p.grad());
      tp::StateDict out = nn::to_gpt2_state_dict(grads, model->config());
      out.insert("loss", loss.detach());
      tp::save_safetensors(out, argv[4]);
      return 0;
    }
    if (command == "llama_parts" && argc == 7) {
      const tp::StateDict in = tp::load_safetensors(argv[2]);
      const tp::Tensor h = in.at("h").detach().set_requires_grad(true);
      const tp::Tensor q = in.at("q").detach().set_requires_grad(true);
      nn::RMSNorm norm(h.size(-1), std::stof(argv[4]));
      {
        tp::NoGradGuard no_grad;
        norm->weight.copy_(in.at("weight"));
      }
      nn::RotaryEmbedding rope(q.size(-1), std::stoll(argv[6]), std::stof(argv[5]));
      const tp::Tensor y = norm(h), r = rope(q);
      tp::sum(y * in.at("grad_h")).backward();
      tp::sum(r * in.at("grad_q")).backward();
      tp::StateDict out;
      out.insert("rms_norm", y.detach());
      out.insert("rotary", r.detach());
      out.insert("d_h", h.grad());
      out.insert("d_weight", norm->weight.grad());
      out.insert("d_q", q.grad());
      tp::save_safetensors(out, argv[3]);
      return 0;
    }
    std::cerr << "usage: gpt2_transformers_peer logits FOLDER TOKENS OUT\n"
                 "       gpt2_transformers_peer export CONFIG_JSON SEED FOLDER TOKENS OUT\n"
                 "       gpt2_transformers_peer grads FOLDER TOKENS OUT\n"
                 "       gpt2_transformers_peer llama_parts IN OUT EPS THETA CONTEXT\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "gpt2_transformers_peer: " << e.what() << "\n";
    return 1;
  }
}
