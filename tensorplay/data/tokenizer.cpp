// Opening a tokenizer by path: folders searched for tokenizer.json or tokenizer.model, files told
// apart by their first byte, both kinds behind one interface.
#include "tensorplay/data/tokenizer.h"

#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace tensorplay::data {
namespace {

namespace fs = std::filesystem;

template <typename T>
class Held : public Tokenizer {
 public:
  Held(T tokenizer, std::string path, bool json)
      : tokenizer_(std::move(tokenizer)), path_(std::move(path)), json_(json) {}
  std::vector<int32_t> encode(std::string_view text) const override {
    return tokenizer_.encode(text);
  }
  std::string decode(const std::vector<int32_t>& ids) const override {
    return tokenizer_.decode(ids);
  }
  int64_t vocab_size() const override { return tokenizer_.vocab_size(); }
  const std::string& path() const override { return path_; }
  bool is_tokenizer_json() const override { return json_; }

 private:
  T tokenizer_;
  std::string path_;
  bool json_;
};

// Whether the file's first non-blank byte opens a JSON object.
bool looks_like_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("tokenizer " + path + ": cannot read the file");
  char c = 0;
  while (in.get(c))
    if (c != ' ' && c != '\n' && c != '\r' && c != '\t') return c == '{';
  return false;
}

}  // namespace

std::string tokenizer_file(const std::string& path) {
  const fs::path p(path);
  std::error_code error;
  if (!fs::exists(p, error))
    throw std::runtime_error("tokenizer " + path +
                             ": no such file or folder (give a tokenizer.json, a SentencePiece "
                             ".model file, or a model folder holding one)");
  if (!fs::is_directory(p)) return path;
  for (const char* name : {"tokenizer.json", "tokenizer.model"})
    if (fs::is_regular_file(p / name)) return (p / name).string();
  throw std::runtime_error("tokenizer folder " + path +
                           " holds neither tokenizer.json nor tokenizer.model");
}

std::unique_ptr<Tokenizer> open_tokenizer(const std::string& path) {
  const std::string file = tokenizer_file(path);
  if (!looks_like_json(file))
    return std::make_unique<Held<SentencePieceTokenizer>>(SentencePieceTokenizer(file), file,
                                                          false);
  try {
    return std::make_unique<Held<ByteLevelBpeTokenizer>>(ByteLevelBpeTokenizer(file), file, true);
  } catch (const std::invalid_argument&) {
    // A folder whose tokenizer.json is not byte-level BPE (Llama 2's, say) may hold the
    // SentencePiece model it was converted from.
    const fs::path model = fs::path(path) / "tokenizer.model";
    if (!fs::is_directory(path) || !fs::is_regular_file(model)) throw;
    return std::make_unique<Held<SentencePieceTokenizer>>(SentencePieceTokenizer(model.string()),
                                                          model.string(), false);
  }
}

std::unique_ptr<Tokenizer> as_tokenizer(SentencePieceTokenizer tokenizer, std::string path) {
  return std::make_unique<Held<SentencePieceTokenizer>>(std::move(tokenizer), std::move(path),
                                                        false);
}

}  // namespace tensorplay::data
