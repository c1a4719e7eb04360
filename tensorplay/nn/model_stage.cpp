// ModelStage: a GPT's or a Llama's stage built from the model's own modules.
#include "tensorplay/nn/model_stage.h"

#include <stdexcept>

#include "tensorplay/core/ops/elementwise.h"

namespace tensorplay::nn {
namespace {

// The stage's blocks under their indices in the model ("2", "3"): a container, never called. It
// reads as the model's ModuleList (its type name), so recomputation policies find its blocks.
class StageBlocksImpl : public Module {
 public:
  StageBlocksImpl(const ModuleList& blocks, int64_t first, int64_t end) {
    for (int64_t i = first; i < end; ++i)
      register_module(std::to_string(i), (*blocks)[static_cast<size_t>(i)]);
  }
  Tensor forward(const Tensor&) override {
    throw std::logic_error("ModelStage: a container of a stage's blocks; call the stage");
  }
  std::string type_name() const override { return "ModuleList"; }
};

}  // namespace

void ModelStageImpl::check_range(const char* model, int64_t n_layer) {
  if (first_block_ < 0 || first_block_ >= end_block_ || end_block_ > n_layer)
    throw std::invalid_argument(
        std::string("ModelStage: blocks [") + std::to_string(first_block_) + ", " +
        std::to_string(end_block_) + ") are not a non-empty range of the " + model + "'s " +
        std::to_string(n_layer) + " blocks; give 0 <= first < end <= " + std::to_string(n_layer));
  last_ = end_block_ == n_layer;
}

ModelStageImpl::ModelStageImpl(const GPT& model, int64_t first_block, int64_t end_block)
    : first_block_(first_block), end_block_(end_block) {
  check_range("GPT", model->config().n_layer);
  const bool tied = model->config().tie_weights;
  if (is_first()) {
    embedding_ = register_module("wte", model->wte).ptr();
    positions_ = register_module("wpe", model->wpe).ptr();
    dropout_ = register_module("drop", model->drop).ptr();
    pos_ = model->pos;
  }
  auto blocks = std::make_shared<StageBlocksImpl>(model->blocks, first_block, end_block);
  register_module("blocks", blocks);
  for (int64_t i = first_block; i < end_block; ++i)
    blocks_.push_back((*model->blocks)[static_cast<size_t>(i)]);
  if (last_) {
    if (tied && !is_first()) register_module("wte", model->wte);
    norm_ = register_module("ln_f", model->ln_f).ptr();
    head_ = register_module("lm_head", model->lm_head).ptr();
  }
}

ModelStageImpl::ModelStageImpl(const Llama& model, int64_t first_block, int64_t end_block)
    : first_block_(first_block), end_block_(end_block) {
  check_range("Llama", model->config().n_layer);
  if (is_first()) embedding_ = register_module("embed_tokens", model->embed_tokens).ptr();
  auto blocks = std::make_shared<StageBlocksImpl>(model->layers, first_block, end_block);
  register_module("layers", blocks);
  for (int64_t i = first_block; i < end_block; ++i)
    blocks_.push_back((*model->layers)[static_cast<size_t>(i)]);
  if (last_) {
    if (model->config().tie_weights && !is_first())
      register_module("embed_tokens", model->embed_tokens);
    norm_ = register_module("norm", model->norm).ptr();
    head_ = register_module("lm_head", model->lm_head).ptr();
  }
}

Tensor ModelStageImpl::embed(const Tensor& idx) {
  if (idx.dim() != 2)
    throw std::invalid_argument("ModelStage: the first stage takes token ids [B, T], got shape " +
                                to_string(idx.shape()));
  if (!positions_) return (*embedding_)(idx);
  if (idx.size(1) > pos_.size(0))
    throw std::invalid_argument("ModelStage: sequence length " + std::to_string(idx.size(1)) +
                                " exceeds context_length " + std::to_string(pos_.size(0)));
  return (*dropout_)((*embedding_)(idx) + (*positions_)(pos_.slice0(0, idx.size(1))));
}

Tensor ModelStageImpl::forward(const Tensor& x) {
  Tensor h = is_first() ? embed(x) : x;
  for (const auto& block : blocks_) h = (*block)(h);
  if (!last_) return h;
  return (*head_)((*norm_)(h));
}

std::string ModelStageImpl::extra_repr() const {
  return "blocks=[" + std::to_string(first_block_) + ", " + std::to_string(end_block_) + ")" +
         (is_first() ? ", first" : "") + (last_ ? ", last" : "");
}

std::vector<std::pair<int64_t, int64_t>> even_block_ranges(int64_t n_layer, int num_stages) {
  if (num_stages < 1 || num_stages > n_layer)
    throw std::invalid_argument("even_block_ranges: " + std::to_string(num_stages) +
                                " stages for " + std::to_string(n_layer) +
                                " blocks; give between 1 and " + std::to_string(n_layer) +
                                " stages (each holds at least one block)");
  std::vector<std::pair<int64_t, int64_t>> ranges;
  int64_t begin = 0;
  for (int s = 0; s < num_stages; ++s) {
    const int64_t n = n_layer / num_stages + (s < n_layer % num_stages ? 1 : 0);
    ranges.emplace_back(begin, begin + n);
    begin += n;
  }
  return ranges;
}

}  // namespace tensorplay::nn
