// SentencePieceTokenizer: a byte-level BPE tokenizer (SentencePiece, Debian's
// libsentencepiece-dev) trained on a corpus or loaded from a `.model` file, that turns text into
// token ids and back exactly.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tensorplay::data {

/// A SentencePiece model. Trained here it is BPE with byte fallback and no normalisation (no
/// Unicode folding, whitespace kept as written, no dummy prefix), so decode(encode(text)) is
/// `text` for any bytes: what the model lacks goes through the 256 byte pieces.
class SentencePieceTokenizer {
 public:
  /// Loads a `.model` file (any SentencePiece model: BPE or unigram, trained here or elsewhere).
  /// Throws std::runtime_error naming the file when it cannot be read as one.
  explicit SentencePieceTokenizer(const std::string& model_path);
  ~SentencePieceTokenizer();
  SentencePieceTokenizer(SentencePieceTokenizer&&) noexcept;
  SentencePieceTokenizer& operator=(SentencePieceTokenizer&&) noexcept;

  /// Trains a BPE model of `vocab_size` pieces on the lines of the text file `corpus_path`,
  /// writes it to `model_path` (which must end in ".model"; a `.vocab` listing is written
  /// beside it) and returns it. vocab_size counts the 256 byte pieces and `<unk>`, `<s>`, `</s>`,
  /// so it must exceed 259 plus the corpus's distinct characters outside them. Throws
  /// std::invalid_argument for a bad name or size, std::runtime_error with SentencePiece's
  /// message when training fails. SentencePiece's training log goes to stderr only with `log`.
  static SentencePieceTokenizer train(const std::string& corpus_path, int64_t vocab_size,
                                      const std::string& model_path, bool log = false);

  /// Token ids of `text`.
  std::vector<int32_t> encode(std::string_view text) const;
  /// The text of `ids`; throws std::out_of_range naming an id >= vocab_size.
  std::string decode(const std::vector<int32_t>& ids) const;
  /// The number of pieces (ids are 0 .. vocab_size - 1).
  int64_t vocab_size() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tensorplay::data
