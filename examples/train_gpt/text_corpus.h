// The text train_gpt learns: a UTF-8 file (or the license texts every Debian system ships) as
// character ids, split into training and held-out text, with random batches of windows.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "corpus.h"
#include "tensorplay/core/random.h"
#include "tensorplay/core/tensor.h"

namespace train_gpt {

/// Characters (Unicode code points) of a text as ids into a sorted vocabulary.
class TextCorpus : public Corpus {
 public:
  /// Reads `path` (UTF-8); empty: the default text (default_text_files()). Holds out the last
  /// `held_out` fraction for validation. Throws std::runtime_error naming the file when it
  /// cannot be read, is not UTF-8, or is too short for `context` characters in both parts.
  TextCorpus(const std::string& path, double held_out, int64_t context);

  /// What was read: the file, or "the license texts of /usr/share/common-licenses (N files)".
  const std::string& source() const { return source_; }
  std::string describe() const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(alphabet_.size()); }
  int64_t train_size() const { return static_cast<int64_t>(train_.size()); }
  int64_t val_size() const { return static_cast<int64_t>(val_.size()); }

  /// `batch` windows of `context` ids from the training (or held-out) text at offsets drawn from
  /// `generator`: inputs and the same windows shifted by one character (targets), as float32
  /// ids of shape [batch, context].
  std::pair<tensorplay::Tensor, tensorplay::Tensor> batch(int64_t batch, int64_t context,
                                                          tensorplay::Generator& generator,
                                                          bool held_out = false,
                                                          int64_t step = 0) const override;

  /// Entropy in nats of the training text's character frequencies: the loss of the best model
  /// that ignores context, the bar a language model must get well below.
  double unigram_entropy() const override;

  /// Ids to UTF-8 text and back (characters outside the vocabulary become id 0).
  std::string decode(const std::vector<int64_t>& ids) const override;
  std::vector<int64_t> encode(const std::string& text) const override;
  const char* unit() const override { return "character"; }

  /// The default text: every regular file (not the links) of /usr/share/common-licenses, in
  /// name order, each followed by a blank line. Debian 12 installs them with base-files.
  static std::vector<std::string> default_text_files();

 private:
  std::string source_;
  std::vector<char32_t> alphabet_;  // sorted code points; id = index
  std::vector<int32_t> train_, val_;
};

}  // namespace train_gpt
