// One tensor of a model's mapping to a Hugging Face folder: tensorplay's name, transformers' name
// and whether transformers stores it transposed; the GPT-2 and Llama mappings list these.
#pragma once

#include <string>

namespace tensorplay::nn {

/// A tensor of the model under both libraries' names. `transposed`: transformers stores the
/// 2-d tensor as the transpose of tensorplay's (GPT-2's Conv1D weights, [in, out]).
struct HfTensorName {
  std::string ours;  ///< tensorplay's state_dict name, e.g. `blocks.0.attn.c_attn.weight`
  std::string hf;    ///< transformers' name, e.g. `transformer.h.0.attn.c_attn.weight`
  bool transposed = false;
};

}  // namespace tensorplay::nn
