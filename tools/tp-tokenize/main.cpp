// tp-tokenize: tokenizes text files with a SentencePiece BPE model (trained on them, or loaded)
// or a Hugging Face tokenizer.json (byte-level BPE, a file or a model folder) into token shards in
// nanoGPT's format (header-free uint16, uint32 when the vocabulary needs it) or llm.c's, plus
// tokens.json naming their type, vocabulary and tokenizer; the training loader
// (tensorplay/data/token_window_loader.h) and train_gpt --data read the folder.
//
//   tp-tokenize book.txt --out shards --tokenizer bpe:4096
//   tp-tokenize a.txt b.txt --out shards --tokenizer shards/tokenizer.model --shard-tokens 1000000
//   tp-tokenize book.txt --out shards --tokenizer bpe:4096 --verify   # decode and compare
//   tp-tokenize book.txt --out shards --tokenizer some-hf-model-folder  # its tokenizer.json
#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tensorplay/data/token_shards.h"
#include "tensorplay/data/tokenizer.h"
#include "tools/cli_checks.h"

namespace data = tensorplay::data;
namespace fs = std::filesystem;

namespace {

struct Options {
  std::vector<std::string> inputs;
  std::string out;
  std::string tokenizer = "bpe:4096";
  int64_t shard_tokens = 100'000'000;
  std::string format = "nanogpt";
  bool verify = false;
  bool verbose = false;  // SentencePiece's training log
};

std::string read_file(const std::string& path) {
  if (fs::is_directory(path)) throw std::runtime_error(path + " is a folder, not a text file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The tokenizer --tokenizer names: bpe:VOCAB trains one on the inputs (saved in the output
// folder), anything else is a .model file, a tokenizer.json or a folder holding one.
std::unique_ptr<data::Tokenizer> make_tokenizer(const Options& o) {
  if (o.tokenizer.rfind("bpe:", 0) != 0) return data::open_tokenizer(o.tokenizer);
  const double vocab = tensorplay::tools::parse_number(o.tokenizer.substr(4), "--tokenizer bpe:");
  std::string corpus = o.inputs.front();
  if (o.inputs.size() > 1) {  // SentencePiece trains on one file: the inputs joined
    corpus = (fs::path(o.out) / "corpus.txt.tmp").string();
    std::ofstream joined(corpus, std::ios::binary | std::ios::trunc);
    for (const auto& input : o.inputs) joined << read_file(input) << "\n";
  }
  const std::string model = (fs::path(o.out) / "tokenizer.model").string();
  auto tokenizer =
      data::SentencePieceTokenizer::train(corpus, static_cast<int64_t>(vocab), model, o.verbose);
  if (o.inputs.size() > 1) fs::remove(corpus);
  return data::as_tokenizer(std::move(tokenizer), model);
}

// Encodes `text` a line at a time (newlines kept), appending to `tokens`. A tokenizer.json's
// patterns see across lines (runs of newlines are one piece), so it takes pieces of about a
// megabyte that end at a newline followed by a character that is not blank, where no pattern
// reaches across.
void encode_lines(const data::Tokenizer& tokenizer, const std::string& text,
                  std::vector<int32_t>& tokens) {
  const size_t least = tokenizer.is_tokenizer_json() ? size_t{1} << 20 : 0;
  auto blank = [](char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; };
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start + least);
    while (end != std::string::npos && least > 0 && end + 1 < text.size() &&
           (blank(text[end + 1]) || static_cast<unsigned char>(text[end + 1]) >= 0x80))
      end = text.find('\n', end + 1);
    end = end == std::string::npos ? text.size() : end + 1;
    const std::vector<int32_t> ids =
        tokenizer.encode(std::string_view(text).substr(start, end - start));
    tokens.insert(tokens.end(), ids.begin(), ids.end());
    start = end;
  }
}

int run(const Options& o) {
  if (o.shard_tokens <= 0) throw std::invalid_argument("--shard-tokens must be positive");
  if (o.format != "nanogpt" && o.format != "llmc")
    throw std::invalid_argument("--format is '" + o.format + "'; give nanogpt or llmc");
  fs::create_directories(o.out);
  const std::unique_ptr<data::Tokenizer> made = make_tokenizer(o);
  const data::Tokenizer& tokenizer = *made;
  const data::TokenType type = data::token_type_for(tokenizer.vocab_size());
  const auto format = o.format == "llmc" ? data::ShardFormat::LlmC : data::ShardFormat::NanoGPT;
  std::vector<int32_t> tokens;
  std::string all_text;
  for (const auto& input : o.inputs) {
    const std::string text = read_file(input);
    encode_lines(tokenizer, text, tokens);
    if (o.verify) all_text += text;
  }
  int64_t shards = 0;
  for (size_t start = 0; start < tokens.size(); start += static_cast<size_t>(o.shard_tokens)) {
    const size_t end = std::min(tokens.size(), start + static_cast<size_t>(o.shard_tokens));
    char name[32];
    std::snprintf(name, sizeof(name), "shard_%05lld.bin", static_cast<long long>(shards++));
    data::write_token_shard((fs::path(o.out) / name).string(),
                            std::vector<int32_t>(tokens.begin() + start, tokens.begin() + end),
                            type, format);
  }
  const std::string tokenizer_path = o.tokenizer.rfind("bpe:", 0) == 0
                                         ? "tokenizer.model"
                                         : fs::absolute(tokenizer.path()).string();
  nlohmann::json meta = {{"dtype", data::token_type_name(type)},
                         {"vocab_size", tokenizer.vocab_size()},
                         {"tokenizer", tokenizer_path},
                         {"format", o.format},
                         {"tokens", tokens.size()},
                         {"shards", shards}};
  const fs::path meta_path = fs::path(o.out) / data::kTokenShardsMetaName;
  std::ofstream(meta_path) << meta.dump(2) << "\n";  // the shards' reader needs it
  if (o.verify) {
    std::vector<int32_t> read;
    for (const auto& shard : data::open_token_shards(o.out))
      for (int64_t i = 0; i < shard.size(); ++i) read.push_back(static_cast<int32_t>(shard.at(i)));
    if (tokenizer.decode(read) != all_text) {
      std::cerr << "tp-tokenize: --verify: the shards do not decode to the input\n";
      return 1;
    }
    meta["verified"] = true;
    std::ofstream(meta_path) << meta.dump(2) << "\n";
  }
  std::cout << meta.dump() << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "tp-tokenize: text files to token shards (nanoGPT's uint16/uint32 .bin, or llm.c's)"};
  Options o;
  app.add_option("inputs", o.inputs, "text files")->required()->check(CLI::ExistingFile);
  app.add_option("--out", o.out, "output folder (shards, tokens.json, tokenizer.model)")
      ->required();
  app.add_option("--tokenizer", o.tokenizer,
                 "bpe:VOCAB to train a BPE model of VOCAB pieces on the inputs, a "
                 "SentencePiece .model file, a Hugging Face tokenizer.json, or a model folder "
                 "holding one")
      ->capture_default_str();
  app.add_option("--shard-tokens", o.shard_tokens, "tokens per shard")->capture_default_str();
  app.add_option("--format", o.format, "nanogpt (header-free) or llmc (256-int32 header)")
      ->capture_default_str();
  app.add_flag("--verify", o.verify, "decode the written shards and compare with the input");
  app.add_flag("--verbose", o.verbose, "also SentencePiece's training log (hundreds of lines)");
  try {
    tensorplay::tools::reject_unknown_flags(app, argc, argv);
    app.parse(argc, argv);
    return run(o);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::cerr << "tp-tokenize: " << e.what() << "\n";
    return 1;
  }
}
