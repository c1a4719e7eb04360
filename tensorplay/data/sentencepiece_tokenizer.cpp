// SentencePiece tokenizer: training with the options that make it exact, loading, encoding and
// decoding.
#include "tensorplay/data/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <filesystem>
#include <stdexcept>
#include <unordered_map>

namespace tensorplay::data {

struct SentencePieceTokenizer::Impl {
  sentencepiece::SentencePieceProcessor processor;
};

SentencePieceTokenizer::SentencePieceTokenizer(const std::string& model_path)
    : impl_(std::make_unique<Impl>()) {
  const auto status = impl_->processor.Load(model_path);
  if (!status.ok())
    throw std::runtime_error("SentencePieceTokenizer: cannot load " + model_path + " (" +
                             status.ToString() + "); give a .model file SentencePiece wrote");
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;
SentencePieceTokenizer::SentencePieceTokenizer(SentencePieceTokenizer&&) noexcept = default;
SentencePieceTokenizer& SentencePieceTokenizer::operator=(SentencePieceTokenizer&&) noexcept =
    default;

SentencePieceTokenizer SentencePieceTokenizer::train(const std::string& corpus_path,
                                                     int64_t vocab_size,
                                                     const std::string& model_path, bool log) {
  const std::string suffix = ".model";
  if (model_path.size() <= suffix.size() ||
      model_path.compare(model_path.size() - suffix.size(), suffix.size(), suffix) != 0)
    throw std::invalid_argument("SentencePieceTokenizer::train: the model path " + model_path +
                                " must end in .model");
  if (vocab_size < 260 || vocab_size > (int64_t{1} << 31) - 1)
    throw std::invalid_argument("SentencePieceTokenizer::train: vocab_size " +
                                std::to_string(vocab_size) +
                                " must be at least 260 (256 byte pieces, <unk>, <s>, </s> and "
                                "one more)");
  if (!std::filesystem::exists(corpus_path))
    throw std::invalid_argument("SentencePieceTokenizer::train: no corpus file " + corpus_path);
  const std::unordered_map<std::string, std::string> options = {
      {"input", corpus_path},
      {"model_prefix", model_path.substr(0, model_path.size() - suffix.size())},
      {"model_type", "bpe"},
      {"vocab_size", std::to_string(vocab_size)},
      {"byte_fallback", "true"},
      {"character_coverage", "1.0"},
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"add_dummy_prefix", "false"},
      {"split_digits", "true"},
      {"allow_whitespace_only_pieces", "true"},
      {"input_sentence_size", "2000000"},
      {"shuffle_input_sentence", "true"},
      {"hard_vocab_limit", "false"},
      // SentencePiece's training log (a line per step, on stderr) only when asked for.
      {"minloglevel", log ? "0" : "1"},
  };
  const auto status = sentencepiece::SentencePieceTrainer::Train(options);
  if (!status.ok())
    throw std::runtime_error("SentencePieceTokenizer::train on " + corpus_path + ": " +
                             status.ToString());
  return SentencePieceTokenizer(model_path);
}

std::vector<int32_t> SentencePieceTokenizer::encode(std::string_view text) const {
  std::vector<int> ids;
  const auto status = impl_->processor.Encode(text, &ids);
  if (!status.ok())
    throw std::runtime_error("SentencePieceTokenizer::encode: " + status.ToString());
  return {ids.begin(), ids.end()};
}

std::string SentencePieceTokenizer::decode(const std::vector<int32_t>& ids) const {
  const int32_t size = static_cast<int32_t>(vocab_size());
  for (int32_t id : ids)
    if (id < 0 || id >= size)
      throw std::out_of_range("SentencePieceTokenizer::decode: id " + std::to_string(id) +
                              " is not in [0, " + std::to_string(size) + ")");
  std::string text;
  const auto status = impl_->processor.Decode(std::vector<int>(ids.begin(), ids.end()), &text);
  if (!status.ok())
    throw std::runtime_error("SentencePieceTokenizer::decode: " + status.ToString());
  return text;
}

int64_t SentencePieceTokenizer::vocab_size() const { return impl_->processor.GetPieceSize(); }

}  // namespace tensorplay::data
