// ByteLevelBpeTokenizer: the byte-level BPE tokenizers of Hugging Face's `tokenizer.json` files
// (GPT-2, Llama 3, Qwen2 and the like), encoded and decoded as the `tokenizers` library does.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tensorplay::data {

/// A `tokenizer.json` of the `tokenizers` library whose model is BPE over byte-level pieces:
/// - normalizer: none or NFC (Qwen2's);
/// - pre_tokenizer: ByteLevel (with its GPT-2 pattern when use_regex), or a Sequence of Split
///   (a regex or a string, behaviour "Isolated", as Llama 3 and Qwen2 split) and ByteLevel; the
///   patterns run through PCRE2 with Unicode properties;
/// - model: BPE with its vocab and merges ("a b" strings or [a, b] pairs), ignore_merges (a
///   pre-token found whole in the vocabulary is one token, as Llama 3's), no subword prefix or
///   suffix, no dropout;
/// - added_tokens, special or not, each matched whole in the raw text before anything else
///   (leftmost, longest first);
/// - decoder: ByteLevel.
///
/// encode gives the ids of `tokenizers`' encode(text, add_special_tokens=False): the
/// post-processor's template (a BOS token, say) is not applied. decode gives the text of
/// decode(ids, skip_special_tokens=False), as bytes (an id sequence that cuts a UTF-8 character
/// gives its bytes, not a replacement character).
class ByteLevelBpeTokenizer {
 public:
  /// Reads `path`, a tokenizer.json. Throws std::runtime_error naming the path when it cannot be
  /// read or is not JSON, and std::invalid_argument naming the path and the field for a
  /// normalizer, pre-tokenizer, model, decoder or added-token option this does not compute.
  explicit ByteLevelBpeTokenizer(const std::string& path);
  /// The same from the text of a tokenizer.json; `source` names it in messages.
  static ByteLevelBpeTokenizer from_json(const std::string& json_text, const std::string& source);
  ~ByteLevelBpeTokenizer();
  ByteLevelBpeTokenizer(ByteLevelBpeTokenizer&&) noexcept;
  ByteLevelBpeTokenizer& operator=(ByteLevelBpeTokenizer&&) noexcept;

  /// Token ids of `text` (UTF-8).
  std::vector<int32_t> encode(std::string_view text) const;
  /// The text of `ids`; throws std::out_of_range naming an id that names no token.
  std::string decode(const std::vector<int32_t>& ids) const;
  /// One more than the largest id of the vocabulary and the added tokens.
  int64_t vocab_size() const;

 private:
  ByteLevelBpeTokenizer() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tensorplay::data
