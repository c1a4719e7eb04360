// Tokenizer: text to token ids and back, whichever file holds it: a SentencePiece `.model`, a
// Hugging Face `tokenizer.json` (byte-level BPE), or a model folder holding either.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tensorplay/data/byte_level_bpe_tokenizer.h"
#include "tensorplay/data/sentencepiece_tokenizer.h"

namespace tensorplay::data {

/// Text to token ids and back.
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  /// Token ids of `text`.
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  /// The text of `ids`; throws std::out_of_range naming an id that names no token.
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  /// The number of ids (0 .. vocab_size - 1).
  virtual int64_t vocab_size() const = 0;
  /// The file it was read from ("" when trained and not saved).
  virtual const std::string& path() const = 0;
  /// Whether it is a tokenizer.json (byte-level BPE) rather than a SentencePiece model.
  virtual bool is_tokenizer_json() const = 0;
};

/// The file `path` names as a tokenizer: `path` itself when a file; in a folder (a Hugging Face
/// model folder, say) its tokenizer.json, else its tokenizer.model. Throws std::runtime_error
/// naming the path when there is no such file or folder, or the folder holds neither.
std::string tokenizer_file(const std::string& path);

/// The tokenizer of tokenizer_file(`path`): a tokenizer.json (a file whose text opens with '{')
/// as ByteLevelBpeTokenizer, anything else as a SentencePiece model. A folder whose tokenizer.json
/// is refused (not byte-level BPE, as Llama 2's) but which holds a tokenizer.model gives that
/// model. Throws naming the file when it is neither (see ByteLevelBpeTokenizer and
/// SentencePieceTokenizer for what each refuses).
std::unique_ptr<Tokenizer> open_tokenizer(const std::string& path);

/// `tokenizer` behind the Tokenizer interface; `path` is the file it is saved in.
std::unique_ptr<Tokenizer> as_tokenizer(SentencePieceTokenizer tokenizer, std::string path);

}  // namespace tensorplay::data
