// Corpus: what train_gpt learns from, whatever its tokens are (characters of a text, SentencePiece
// BPE pieces of a text, or token shards): its vocabulary, random training and held-out windows,
// and the conversion between text and ids for the prompt and the samples.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tensorplay/core/random.h"
#include "tensorplay/core/tensor.h"

namespace train_gpt {

/// The training text as token ids.
class Corpus {
 public:
  virtual ~Corpus() = default;
  /// What was read, for the header line ("book.txt: 1000000 characters for training, ...").
  virtual std::string describe() const = 0;
  virtual int64_t vocab_size() const = 0;
  /// The training windows of step `step` (1-based), or held-out batch `step` (a batch of `batch`
  /// windows of `context` ids, inputs and targets one on, float32 [batch, context]) or held-out
  /// windows. A corpus sampling with `generator` draws from it; one that samples by step ignores
  /// it.
  virtual std::pair<tensorplay::Tensor, tensorplay::Tensor> batch(int64_t batch, int64_t context,
                                                                  tensorplay::Generator& generator,
                                                                  bool held_out = false,
                                                                  int64_t step = 0) const = 0;
  /// The loss of the best model that ignores context (nats per token), when known, else NaN.
  virtual double unigram_entropy() const = 0;
  /// Text to ids and back; can_decode() is false when there is no tokenizer to decode with.
  virtual std::vector<int64_t> encode(const std::string& text) const = 0;
  virtual std::string decode(const std::vector<int64_t>& ids) const = 0;
  virtual bool can_decode() const { return true; }
  /// "character" or "token".
  virtual const char* unit() const { return "token"; }
};

/// `batch` windows of `context` ids of `ids` at offsets drawn from `generator`: inputs and the
/// same windows one id on (targets), float32 [batch, context].
std::pair<tensorplay::Tensor, tensorplay::Tensor> sample_windows(const std::vector<int32_t>& ids,
                                                                 int64_t batch, int64_t context,
                                                                 tensorplay::Generator& generator);

/// The corpus --data and --tokenizer name: a text file (empty: the license texts) as characters
/// ("char"), or as BPE pieces of a model trained on it ("bpe:VOCAB", written to
/// `work_dir`/tokenizer.model; a resumed run reads the one written there) or loaded (a
/// SentencePiece "FILE.model", a Hugging Face tokenizer.json, or a model folder holding one); or
/// a folder (or file) of token shards (tp-tokenize's), sampled through a memory
/// map, whose tokens.json names the tokenizer. Throws std::invalid_argument naming a --tokenizer
/// that is none of these. SentencePiece's training logs only when `verbose`.
std::unique_ptr<Corpus> open_corpus(const std::string& data, const std::string& tokenizer,
                                    double held_out, int64_t context, uint64_t seed,
                                    const std::string& work_dir, bool resume, bool verbose = false);

}  // namespace train_gpt
