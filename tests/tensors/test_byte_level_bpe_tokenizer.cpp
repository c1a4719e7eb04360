// Tests for data/byte_level_bpe_tokenizer.h and data/tokenizer.h on hand-made tokenizer.json
// files: merges by rank, GPT-2's byte map both ways, added tokens split out first, Llama 3's
// pattern and ignore_merges, NFC, what is refused (named), and tokenizers opened by path. The
// comparison with the `tokenizers` package itself is check_tokenizer_json_transformers.py (CTest:
// tensors_tokenizer_json_matches_transformers_tokenizers).
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "temp_path.h"
#include "tensorplay/data/tokenizer.h"

namespace data = tensorplay::data;
namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {

// GPT-2's byte -> character map, UTF-8.
std::string byte_char(int b) {
  const bool direct = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
  int c = b;
  if (!direct) {
    int n = 0;
    for (int x = 0; x < b; ++x)
      if (!((x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE))) ++n;
    c = 256 + n;
  }
  std::string out;
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
  return out;
}

// A byte-level BPE tokenizer.json: the 256 byte characters (ids 0-255), then `merges` in rank
// order (each result given the next id), `extra` tokens, and <|end|> as a special added token.
Json tokenizer_json(const std::vector<std::pair<std::string, std::string>>& merges,
                    const std::vector<std::string>& extra = {}) {
  Json vocab = Json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_char(b)] = b;
  Json merge_list = Json::array();
  for (const auto& [a, b] : merges) {
    if (!vocab.contains(a + b)) vocab[a + b] = static_cast<int>(vocab.size());
    merge_list.push_back(a + " " + b);
  }
  for (const auto& t : extra) vocab[t] = static_cast<int>(vocab.size());
  return {{"version", "1.0"},
          {"added_tokens",
           {{{"id", 400},
             {"content", "<|end|>"},
             {"single_word", false},
             {"lstrip", false},
             {"rstrip", false},
             {"normalized", false},
             {"special", true}}}},
          {"normalizer", nullptr},
          {"pre_tokenizer",
           {{"type", "ByteLevel"},
            {"add_prefix_space", false},
            {"trim_offsets", true},
            {"use_regex", true}}},
          {"post_processor", nullptr},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", nullptr},
            {"continuing_subword_prefix", nullptr},
            {"end_of_word_suffix", nullptr},
            {"fuse_unk", false},
            {"byte_fallback", false},
            {"ignore_merges", false},
            {"vocab", vocab},
            {"merges", merge_list}}}};
}

data::ByteLevelBpeTokenizer make(const Json& j) {
  return data::ByteLevelBpeTokenizer::from_json(j.dump(), "t/tokenizer.json");
}

int32_t id_of(const Json& j, const std::string& token) {
  return j["model"]["vocab"][token].get<int32_t>();
}

const std::string kSpace = byte_char(' ');  // "Ġ"

}  // namespace

TEST_CASE("byte-level BPE merges by rank and decodes back", "[tokenizer_json]") {
  const Json j = tokenizer_json({{"h", "e"},
                                 {"l", "l"},
                                 {"he", "ll"},
                                 {"hell", "o"},
                                 {kSpace, "w"},
                                 {"o", "r"},
                                 {kSpace + "w", "or"},
                                 {kSpace + "wor", "l"},
                                 {kSpace + "worl", "d"}});
  const data::ByteLevelBpeTokenizer t = make(j);
  CHECK(t.vocab_size() == 401);
  CHECK(t.encode("hello world") ==
        std::vector<int32_t>{id_of(j, "hello"), id_of(j, kSpace + "world")});
  // Added tokens come out whole, wherever they are.
  const std::vector<int32_t> ids = t.encode("hello<|end|>world");
  CHECK(ids == std::vector<int32_t>{id_of(j, "hello"), 400, 'w', id_of(j, "or"), 'l', 'd'});
  CHECK(t.decode(ids) == "hello<|end|>world");
  // Every byte has a token: accents, CJK, emoji with joiners, control bytes, lone bytes.
  for (const std::string& text : std::vector<std::string>{
           "caf\xC3\xA9 \xE6\x9D\xB1\xE4\xBA\xAC", "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9",
           std::string("\t\r\n\0\x01\x7F  end", 11), std::string("\xFF\xFE")}) {
    INFO(text);
    CHECK(t.decode(t.encode(text)) == text);
  }
  CHECK(t.encode("\xC3\xA9") == std::vector<int32_t>{0xC3, 0xA9});
  CHECK_THROWS_WITH(t.decode({1000}), Catch::Contains("no token has id 1000"));
}

TEST_CASE("Llama 3's pattern splits digits by three, ignore_merges keeps whole words",
          "[tokenizer_json]") {
  Json j = tokenizer_json({{"3", "4"}, {"1", "2"}, {"12", "3"}}, {"abc"});
  // GPT-2's pattern: "1234" is one piece, "3 4" merges first.
  CHECK(make(j).encode("1234") == std::vector<int32_t>{id_of(j, "12"), id_of(j, "34")});
  CHECK(make(j).encode("abc") == std::vector<int32_t>{'a', 'b', 'c'});
  j["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"},
         {"pattern",
          {{"Regex",
            "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
            "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}}},
         {"behavior", "Isolated"},
         {"invert", false}},
        {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
  j["model"]["ignore_merges"] = true;
  const data::ByteLevelBpeTokenizer llama3 = make(j);
  CHECK(llama3.encode("1234") == std::vector<int32_t>{id_of(j, "123"), '4'});
  CHECK(llama3.encode("abc") == std::vector<int32_t>{id_of(j, "abc")});
  const std::string text = "x\n\n\n  y 12345678 I'LL \xC3\xA9t\xC3\xA9";
  CHECK(llama3.decode(llama3.encode(text)) == text);
}

TEST_CASE("an NFC normalizer composes accents before the bytes", "[tokenizer_json]") {
  Json j = tokenizer_json({{byte_char(0xC3), byte_char(0xA9)}});
  j["normalizer"] = {{"type", "NFC"}};
  const data::ByteLevelBpeTokenizer t = make(j);
  const std::vector<int32_t> composed = t.encode("\xC3\xA9");
  CHECK(composed.size() == 1);
  CHECK(t.encode("e\xCC\x81") == composed);  // e + combining acute
}

TEST_CASE("tokenizer.json options that are not computed are refused, named", "[tokenizer_json]") {
  auto refused = [](Json j, const std::string& what) {
    INFO(j.dump().substr(0, 200));
    CHECK_THROWS_WITH(make(j), Catch::Contains("t/tokenizer.json") && Catch::Contains(what));
  };
  Json j = tokenizer_json({});
  refused(
      [&] {
        Json k = j;
        k["normalizer"] = {{"type", "Lowercase"}};
        return k;
      }(),
      "normalizer \"Lowercase\" is not supported");
  refused(
      [&] {
        Json k = j;
        k["pre_tokenizer"] = {{"type", "Whitespace"}};
        return k;
      }(),
      "pre_tokenizer \"Whitespace\" is not supported");
  refused(
      [&] {
        Json k = j;
        k["pre_tokenizer"] = {
            {"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "Removed"}};
        return k;
      }(),
      "Split has behavior \"Removed\"");
  refused(
      [&] {
        Json k = j;
        k["model"]["type"] = "WordPiece";
        return k;
      }(),
      "model is \"WordPiece\"");
  refused(
      [&] {
        Json k = j;
        k["decoder"] = nullptr;
        return k;
      }(),
      "decoder is null");
  refused(
      [&] {
        Json k = j;
        k["added_tokens"][0]["lstrip"] = true;
        return k;
      }(),
      "has lstrip true");
  refused(
      [&] {
        Json k = j;
        k["model"]["merges"] = {"a zz"};
        return k;
      }(),
      "names a token that is not in model.vocab");
  CHECK_THROWS_WITH(data::ByteLevelBpeTokenizer::from_json("{", "t/tokenizer.json"),
                    Catch::Contains("t/tokenizer.json: not a tokenizer.json"));
}

TEST_CASE("open_tokenizer reads a tokenizer.json, or a folder holding one, naming paths",
          "[tokenizer_json]") {
  test_files::TempDir dir;
  const fs::path folder(dir.path);
  CHECK_THROWS_WITH(data::open_tokenizer(dir.path),
                    Catch::Contains("tokenizer folder " + dir.path) &&
                        Catch::Contains("holds neither tokenizer.json nor tokenizer.model"));
  CHECK_THROWS_WITH(data::open_tokenizer((folder / "absent").string()),
                    Catch::Contains((folder / "absent").string() + ": no such file or folder"));
  const Json j = tokenizer_json({{"h", "i"}});
  std::ofstream(folder / "tokenizer.json") << j.dump(2);
  const auto t = data::open_tokenizer(dir.path);
  CHECK(t->is_tokenizer_json());
  CHECK(t->path() == (folder / "tokenizer.json").string());
  CHECK(t->encode("hi") == std::vector<int32_t>{id_of(j, "hi")});
  // A file that is neither names itself in SentencePiece's refusal.
  std::ofstream(folder / "junk.model") << "not a model";
  CHECK_THROWS_WITH(data::open_tokenizer((folder / "junk.model").string()),
                    Catch::Contains((folder / "junk.model").string()));
}

TEST_CASE("a long word merges in n log n, leftmost pairs first", "[tokenizer_json]") {
  const Json j = tokenizer_json({{"a", "a"}, {"aa", "aa"}});
  const data::ByteLevelBpeTokenizer t = make(j);
  const std::vector<int32_t> ids = t.encode(std::string(200001, 'a'));
  REQUIRE(ids.size() == 50001);
  CHECK(std::count(ids.begin(), ids.end(), id_of(j, "aaaa")) == 50000);
  CHECK(ids.back() == 'a');
  CHECK(t.encode("aaa") == std::vector<int32_t>{id_of(j, "aa"), 'a'});
}

TEST_CASE("a folder whose tokenizer.json is not byte-level BPE opens its tokenizer.model",
          "[tokenizer_json]") {
  test_files::TempDir dir;
  const fs::path folder(dir.path);
  {
    std::ofstream corpus(folder / "corpus.txt");
    for (int i = 0; i < 200; ++i) corpus << "the quick brown fox " << i << " jumps\n";
  }
  data::SentencePieceTokenizer::train((folder / "corpus.txt").string(), 300,
                                      (folder / "sp.model").string());
  Json j = tokenizer_json({});
  j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}};  // Llama 2's
  std::ofstream(folder / "tokenizer.json") << j.dump();
  const fs::path only_json = folder / "only_json";
  fs::create_directories(only_json);
  std::ofstream(only_json / "tokenizer.json") << j.dump();
  CHECK_THROWS_WITH(data::open_tokenizer(only_json.string()),
                    Catch::Contains("pre_tokenizer \"Metaspace\" is not supported"));
  fs::copy_file(folder / "sp.model", folder / "tokenizer.model");
  const auto t = data::open_tokenizer(dir.path);
  CHECK_FALSE(t->is_tokenizer_json());
  CHECK(t->path() == (folder / "tokenizer.model").string());
  CHECK(t->decode(t->encode("the fox")) == "the fox");
}

TEST_CASE("long whitespace runs and long lines split as short ones do", "[tokenizer_json]") {
  const data::ByteLevelBpeTokenizer t = make(tokenizer_json({{kSpace, kSpace}}));
  // GPT-2's \s+(?!\S): a run of spaces before a word leaves its last space to the word.
  const std::string text = std::string(300000, ' ') + "x" + std::string(200000, '\n') + "y";
  const std::vector<int32_t> ids = t.encode(text);
  CHECK(t.decode(ids) == text);
  CHECK(ids[ids.size() - 1] == 'y');
  CHECK(ids[ids.size() - 2] == '\n');  // the last newline, a piece of its own
}
