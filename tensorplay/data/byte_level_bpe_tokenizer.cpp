// Byte-level BPE from a tokenizer.json: added tokens split out first, NFC (nfc.h), the
// pre-tokenizer's patterns (detail/split_pattern.h), GPT-2's byte-to-character map, then BPE
// merges by rank, each pre-token's ids cached.
#include "tensorplay/data/byte_level_bpe_tokenizer.h"

#include <algorithm>
#include <array>
#include <fstream>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <queue>
#include <sstream>
#include <stdexcept>
#include <tuple>
#include <unordered_map>

#include "tensorplay/data/detail/split_pattern.h"
#include "tensorplay/data/nfc.h"

namespace tensorplay::data {
namespace {

using Json = nlohmann::json;

// GPT-2's pattern, which ByteLevel applies when use_regex is true.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// The UTF-8 encoding of code point `c`.
std::string utf8(uint32_t c) {
  std::string out;
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
  return out;
}

// The length of the UTF-8 character that starts with byte `b` (1 for a stray byte).
size_t char_length(uint8_t b) {
  if (b >= 0xF0) return 4;
  if (b >= 0xE0) return 3;
  if (b >= 0xC0) return 2;
  return 1;
}

bool is_ascii(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<uint8_t>(c) < 0x80; });
}

}  // namespace

struct ByteLevelBpeTokenizer::Impl {
  struct Step {
    std::unique_ptr<detail::SplitPattern> split;  // a Split step; else ByteLevel
    bool add_prefix_space = false;
    std::unique_ptr<detail::SplitPattern>
        byte_level_regex;  // ByteLevel's GPT-2 split when use_regex
  };
  struct Added {
    std::string content;
    int32_t id;
  };

  std::string source;
  bool nfc = false;
  std::vector<Step> steps;
  std::unordered_map<std::string, int32_t> vocab;
  std::vector<std::string> tokens;                                   // by id; empty where no token
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges;  // (a, b) -> (rank, a+b)
  bool ignore_merges = false;
  int32_t unk = -1;
  std::vector<Added> added;
  std::array<std::vector<size_t>, 256> added_by_first;  // indices into added, longest first
  std::array<std::string, 256> byte_chars;              // byte -> its character, UTF-8
  std::unordered_map<std::string, uint8_t> char_bytes;  // and back
  mutable std::mutex cache_mutex;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache;

  [[noreturn]] void fail(const std::string& what) const {
    throw std::invalid_argument("tokenizer " + source + ": " + what);
  }

  void read(const Json& j);
  void read_normalizer(const Json& n);
  void read_pre_tokenizer(const Json& p);
  void check_model(const Json& model);
  void read_vocab(const Json& model, const Json& added_json);
  void read_merges(const Json& model);
  void byte_map();
  std::vector<int32_t> bpe(const std::string& word) const;
  void encode_piece(std::string_view piece, std::vector<int32_t>& ids) const;
  void encode_plain(std::string_view text, std::vector<int32_t>& ids) const;
};

void ByteLevelBpeTokenizer::Impl::byte_map() {
  std::vector<int> bs;
  for (int b = '!'; b <= '~'; ++b) bs.push_back(b);
  for (int b = 0xA1; b <= 0xAC; ++b) bs.push_back(b);
  for (int b = 0xAE; b <= 0xFF; ++b) bs.push_back(b);
  std::array<bool, 256> direct{};
  for (int b : bs) direct[b] = true;
  int n = 0;
  for (int b = 0; b < 256; ++b) {
    const uint32_t c = direct[b] ? static_cast<uint32_t>(b) : static_cast<uint32_t>(256 + n++);
    byte_chars[b] = utf8(c);
    char_bytes[byte_chars[b]] = static_cast<uint8_t>(b);
  }
}

void ByteLevelBpeTokenizer::Impl::read_pre_tokenizer(const Json& p) {
  const std::string type = p.value("type", "");
  if (type == "Sequence") {
    if (!p.contains("pretokenizers") || !p["pretokenizers"].is_array())
      fail("pre_tokenizer Sequence has no pretokenizers list");
    for (const Json& each : p["pretokenizers"]) read_pre_tokenizer(each);
    return;
  }
  Step step;
  if (type == "Split") {
    if (p.value("behavior", "") != "Isolated")
      fail("pre_tokenizer Split has behavior " + p.value("behavior", Json()).dump() +
           "; tensorplay splits \"Isolated\" only (as GPT-2, Llama 3 and Qwen2 do)");
    if (p.value("invert", false)) fail("pre_tokenizer Split with invert true is not supported");
    const Json& pattern = p.value("pattern", Json());
    if (pattern.contains("Regex") && pattern["Regex"].is_string()) {
      step.split = std::make_unique<detail::SplitPattern>(
          pattern["Regex"].get<std::string>(), "tokenizer " + source + ": pre_tokenizer Split");
    } else if (pattern.contains("String") && pattern["String"].is_string()) {
      std::string quoted = "\\Q" + pattern["String"].get<std::string>() + "\\E";
      step.split = std::make_unique<detail::SplitPattern>(
          quoted, "tokenizer " + source + ": pre_tokenizer Split");
    } else {
      fail("pre_tokenizer Split has pattern " + pattern.dump() + ", not a Regex or a String");
    }
  } else if (type == "ByteLevel") {
    step.add_prefix_space = p.value("add_prefix_space", false);
    if (p.value("use_regex", true))
      step.byte_level_regex = std::make_unique<detail::SplitPattern>(kGpt2Pattern, "ByteLevel");
  } else {
    fail("pre_tokenizer " + Json(type).dump() +
         " is not supported; tensorplay reads ByteLevel and Split (\"Isolated\") pre-tokenizers, "
         "alone or in a Sequence");
  }
  steps.push_back(std::move(step));
}

void ByteLevelBpeTokenizer::Impl::read(const Json& j) {
  if (!j.is_object()) fail("not a JSON object");
  if (j.contains("normalizer") && !j["normalizer"].is_null()) read_normalizer(j["normalizer"]);
  if (!j.contains("pre_tokenizer") || j["pre_tokenizer"].is_null())
    fail("has no pre_tokenizer; a byte-level BPE tokenizer has a ByteLevel one");
  read_pre_tokenizer(j["pre_tokenizer"]);
  if (std::none_of(steps.begin(), steps.end(), [](const Step& s) { return !s.split; }))
    fail("pre_tokenizer has no ByteLevel step; tensorplay reads byte-level BPE tokenizers only");
  if (steps.back().split)
    fail("pre_tokenizer ends with a Split after ByteLevel; tensorplay needs ByteLevel last");
  const Json& decoder = j.value("decoder", Json());
  if (!decoder.is_object() || decoder.value("type", "") != "ByteLevel")
    fail("decoder is " +
         (decoder.is_object() ? decoder.value("type", Json()).dump() : decoder.dump()) +
         "; tensorplay decodes with ByteLevel");
  const Json& model = j.value("model", Json());
  check_model(model);
  read_vocab(model, j.value("added_tokens", Json::array()));
  read_merges(model);
  byte_map();
}

// The normalizer: none, or NFC (alone or in a Sequence).
void ByteLevelBpeTokenizer::Impl::read_normalizer(const Json& n) {
  std::vector<Json> parts;
  if (n.value("type", "") == "Sequence" && n.contains("normalizers"))
    parts.assign(n["normalizers"].begin(), n["normalizers"].end());
  else
    parts.push_back(n);
  for (const Json& part : parts) {
    if (part.value("type", "") != "NFC")
      fail("normalizer " + part.value("type", Json()).dump() +
           " is not supported; tensorplay applies none or NFC");
    nfc = true;
  }
}

// The model's options: a plain BPE, without the variants tensorplay does not implement.
void ByteLevelBpeTokenizer::Impl::check_model(const Json& model) {
  if (!model.is_object() || model.value("type", "BPE") != "BPE")
    fail("model is " + (model.is_object() ? model.value("type", Json()).dump() : model.dump()) +
         "; tensorplay reads BPE models (a SentencePiece model is a .model file)");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (model.contains(key) && !model[key].is_null() && model[key] != "")
      fail(std::string("model.") + key + " is " + model[key].dump() + "; not supported");
  if (model.contains("dropout") && !model["dropout"].is_null() && model["dropout"] != 0.0)
    fail("model.dropout is " + model["dropout"].dump() + "; BPE dropout is not supported");
  if (model.value("byte_fallback", false))
    fail("model.byte_fallback is true; byte-level BPE has no byte fallback");
  ignore_merges = model.value("ignore_merges", false);
}

// The vocabulary and the added tokens, and the id -> token table over both.
void ByteLevelBpeTokenizer::Impl::read_vocab(const Json& model, const Json& added_json) {
  if (!model.contains("vocab") || !model["vocab"].is_object()) fail("model.vocab is not an object");
  int32_t top = -1;
  for (const auto& [token, id] : model["vocab"].items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
        id.get<int64_t>() > std::numeric_limits<int32_t>::max())
      fail("model.vocab[" + Json(token).dump() + "] is " + id.dump() + ", not an id");
    vocab[token] = id.get<int32_t>();
    top = std::max(top, id.get<int32_t>());
  }
  for (const Json& a : added_json) {
    if (!a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") ||
        !a["content"].is_string() || a["content"].get<std::string>().empty())
      fail("added token " + a.dump() + " has no id or content");
    for (const char* key : {"single_word", "lstrip", "rstrip"})
      if (a.value(key, false))
        fail("added token " + a["content"].dump() + " has " + key +
             " true; tensorplay matches added tokens as written");
    added.push_back({a["content"].get<std::string>(), a["id"].get<int32_t>()});
    top = std::max(top, added.back().id);
  }
  tokens.assign(static_cast<size_t>(top + 1), std::string());
  for (const auto& [token, id] : vocab) tokens[id] = token;
  for (size_t i = 0; i < added.size(); ++i) {
    tokens[added[i].id] = added[i].content;
    added_by_first[static_cast<uint8_t>(added[i].content[0])].push_back(i);
  }
  for (auto& list : added_by_first)
    std::stable_sort(list.begin(), list.end(), [&](size_t a, size_t b) {
      return added[a].content.size() > added[b].content.size();
    });
  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    const auto it = vocab.find(model["unk_token"].get<std::string>());
    if (it != vocab.end()) unk = it->second;
  }
}

// The merges, as "a b" strings or [a, b] pairs, ranked in their order.
void ByteLevelBpeTokenizer::Impl::read_merges(const Json& model) {
  if (!model.contains("merges") || !model["merges"].is_array()) fail("model.merges is not a list");
  int32_t rank = 0;
  for (const Json& m : model["merges"]) {
    std::string a, b;
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t space = s.find(' ');
      if (space == std::string::npos) fail("merge " + m.dump() + " is not \"a b\"");
      a = s.substr(0, space);
      b = s.substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      a = m[0].get<std::string>();
      b = m[1].get<std::string>();
    } else {
      fail("merge " + m.dump() + " is neither \"a b\" nor [a, b]");
    }
    const auto ia = vocab.find(a), ib = vocab.find(b), iab = vocab.find(a + b);
    if (ia == vocab.end() || ib == vocab.end() || iab == vocab.end())
      fail("merge " + m.dump() + " names a token that is not in model.vocab");
    const uint64_t key =
        (static_cast<uint64_t>(ia->second) << 32) | static_cast<uint32_t>(ib->second);
    merges.emplace(key, std::make_pair(rank++, iab->second));
  }
}

std::vector<int32_t> ByteLevelBpeTokenizer::Impl::bpe(const std::string& word) const {
  if (ignore_merges) {
    const auto it = vocab.find(word);
    if (it != vocab.end()) return {it->second};
  }
  std::vector<int32_t> symbols;
  for (size_t i = 0; i < word.size();) {
    const size_t n = std::min(char_length(static_cast<uint8_t>(word[i])), word.size() - i);
    const auto it = vocab.find(word.substr(i, n));
    if (it != vocab.end())
      symbols.push_back(it->second);
    else if (unk >= 0)
      symbols.push_back(unk);
    i += n;
  }
  // Merges by rank, leftmost first among equals, as the tokenizers library's heap does: a linked
  // list of symbols and a heap of candidate pairs, stale ones skipped (n log n for long words).
  const auto n = static_cast<int>(symbols.size());
  if (n < 2) return symbols;
  std::vector<int> next(static_cast<size_t>(n)), prev(static_cast<size_t>(n));
  std::vector<bool> alive(static_cast<size_t>(n), true);
  for (int i = 0; i < n; ++i) {
    next[i] = i + 1 < n ? i + 1 : -1;
    prev[i] = i - 1;
  }
  using Candidate = std::tuple<int32_t, int, int32_t>;  // rank, left position, merged id
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto merge_of = [&](int left) -> const std::pair<int32_t, int32_t>* {
    if (left < 0 || next[left] < 0) return nullptr;
    const uint64_t key =
        (static_cast<uint64_t>(symbols[left]) << 32) | static_cast<uint32_t>(symbols[next[left]]);
    const auto it = merges.find(key);
    return it == merges.end() ? nullptr : &it->second;
  };
  auto push = [&](int left) {
    if (const auto* m = merge_of(left)) heap.emplace(m->first, left, m->second);
  };
  for (int i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    const auto [rank, left, merged] = heap.top();
    heap.pop();
    const auto* m = alive[left] ? merge_of(left) : nullptr;
    if (m == nullptr || m->first != rank || m->second != merged) continue;  // stale
    const int right = next[left];
    symbols[left] = merged;
    alive[right] = false;
    next[left] = next[right];
    if (next[right] >= 0) prev[next[right]] = left;
    push(prev[left]);
    push(left);
  }
  std::vector<int32_t> out;
  for (int i = 0; i >= 0; i = next[i]) out.push_back(symbols[i]);
  return out;
}

// One pre-token: its bytes as byte-level characters, then BPE (cached).
void ByteLevelBpeTokenizer::Impl::encode_piece(std::string_view piece,
                                               std::vector<int32_t>& ids) const {
  std::string word;
  word.reserve(piece.size() * 2);
  for (char c : piece) word += byte_chars[static_cast<uint8_t>(c)];
  {
    std::lock_guard<std::mutex> lock(cache_mutex);
    const auto it = cache.find(word);
    if (it != cache.end()) {
      ids.insert(ids.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> out = bpe(word);
  ids.insert(ids.end(), out.begin(), out.end());
  std::lock_guard<std::mutex> lock(cache_mutex);
  if (cache.size() > 200000) cache.clear();
  cache.emplace(std::move(word), std::move(out));
}

// Text free of added tokens: normalized, pre-tokenized, each piece byte-level BPE.
void ByteLevelBpeTokenizer::Impl::encode_plain(std::string_view text,
                                               std::vector<int32_t>& ids) const {
  if (text.empty()) return;
  std::string normalized;
  if (nfc && !is_ascii(text)) {
    try {
      normalized = nfc_normalize(text);
    } catch (const std::runtime_error& e) {
      throw std::runtime_error("tokenizer " + source + ": " + e.what());
    }
    text = normalized;
  }
  std::vector<std::string_view> pieces{text}, next;
  std::vector<std::string> prefixed;  // pieces given a leading space (their storage)
  prefixed.reserve(text.size() + 1);
  for (const Step& step : steps) {
    next.clear();
    for (std::string_view piece : pieces) {
      if (step.split) {
        step.split->split(piece, next);
        continue;
      }
      if (step.add_prefix_space && !piece.starts_with(' ')) {
        prefixed.push_back(" " + std::string(piece));
        piece = prefixed.back();
      }
      if (step.byte_level_regex)
        step.byte_level_regex->split(piece, next);
      else
        next.push_back(piece);
    }
    std::swap(pieces, next);
  }
  for (std::string_view piece : pieces) encode_piece(piece, ids);
}

ByteLevelBpeTokenizer::ByteLevelBpeTokenizer(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("tokenizer " + path + ": cannot read the file");
  std::ostringstream text;
  text << in.rdbuf();
  *this = from_json(text.str(), path);
}

ByteLevelBpeTokenizer ByteLevelBpeTokenizer::from_json(const std::string& json_text,
                                                       const std::string& source) {
  ByteLevelBpeTokenizer t;
  t.impl_ = std::make_unique<Impl>();
  t.impl_->source = source;
  Json j;
  try {
    j = Json::parse(json_text);
  } catch (const Json::exception& e) {
    throw std::runtime_error("tokenizer " + source + ": not a tokenizer.json (" + e.what() + ")");
  }
  t.impl_->read(j);
  return t;
}

ByteLevelBpeTokenizer::~ByteLevelBpeTokenizer() = default;
ByteLevelBpeTokenizer::ByteLevelBpeTokenizer(ByteLevelBpeTokenizer&&) noexcept = default;
ByteLevelBpeTokenizer& ByteLevelBpeTokenizer::operator=(ByteLevelBpeTokenizer&&) noexcept = default;

std::vector<int32_t> ByteLevelBpeTokenizer::encode(std::string_view text) const {
  const Impl& m = *impl_;
  std::vector<int32_t> ids;
  size_t start = 0;
  for (size_t i = 0; i < text.size();) {
    const auto& candidates = m.added_by_first[static_cast<uint8_t>(text[i])];
    const Impl::Added* match = nullptr;
    for (size_t k : candidates)
      if (text.compare(i, m.added[k].content.size(), m.added[k].content) == 0) {
        match = &m.added[k];
        break;
      }
    if (match == nullptr) {
      ++i;
      continue;
    }
    m.encode_plain(text.substr(start, i - start), ids);
    ids.push_back(match->id);
    i += match->content.size();
    start = i;
  }
  m.encode_plain(text.substr(start), ids);
  return ids;
}

std::string ByteLevelBpeTokenizer::decode(const std::vector<int32_t>& ids) const {
  const Impl& m = *impl_;
  std::string out;
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= m.tokens.size() || m.tokens[id].empty())
      throw std::out_of_range("tokenizer " + m.source + ": no token has id " + std::to_string(id));
    const std::string& token = m.tokens[id];
    // As the ByteLevel decoder: each character back to its byte, or the token as written when
    // one character is not a byte's.
    std::string bytes;
    bool mapped = true;
    for (size_t i = 0; i < token.size() && mapped;) {
      const size_t n = std::min(char_length(static_cast<uint8_t>(token[i])), token.size() - i);
      const auto it = m.char_bytes.find(token.substr(i, n));
      if (it == m.char_bytes.end())
        mapped = false;
      else
        bytes += static_cast<char>(it->second);
      i += n;
    }
    out += mapped ? bytes : token;
  }
  return out;
}

int64_t ByteLevelBpeTokenizer::vocab_size() const {
  return static_cast<int64_t>(impl_->tokens.size());
}

}  // namespace tensorplay::data
