// The corpora train_gpt reads besides characters: a text as BPE pieces (SentencePiece, or a
// Hugging Face tokenizer.json), and token
// shards sampled through a memory map; and the choice among them.
#include "corpus.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "tensorplay/data/token_window_loader.h"
#include "tensorplay/data/tokenizer.h"
#include "text_corpus.h"

namespace train_gpt {
namespace tp = tensorplay;
namespace data = tensorplay::data;
namespace fs = std::filesystem;

std::pair<tp::Tensor, tp::Tensor> sample_windows(const std::vector<int32_t>& ids, int64_t batch,
                                                 int64_t context, tp::Generator& generator) {
  std::vector<float> x(batch * context), y(batch * context);
  const auto starts = static_cast<int64_t>(ids.size()) - context;  // offsets 0..starts-1
  for (int64_t b = 0; b < batch; ++b) {
    auto start = static_cast<int64_t>(generator.uniform() * static_cast<double>(starts));
    start = std::min(start, starts - 1);
    for (int64_t t = 0; t < context; ++t) {
      x[b * context + t] = static_cast<float>(ids[start + t]);
      y[b * context + t] = static_cast<float>(ids[start + t + 1]);
    }
  }
  return {tp::from_vector(x, {batch, context}), tp::from_vector(y, {batch, context})};
}

namespace {

std::vector<int64_t> widen(const std::vector<int32_t>& ids) { return {ids.begin(), ids.end()}; }
std::vector<int32_t> narrow_ids(const std::vector<int64_t>& ids) {
  return {ids.begin(), ids.end()};
}

// A text file as the pieces of a tokenizer, the last `held_out` of them kept for validation.
class BpeTextCorpus : public Corpus {
 public:
  BpeTextCorpus(const std::string& path, std::unique_ptr<data::Tokenizer> tokenizer,
                std::string tokenizer_source, double held_out, int64_t context)
      : path_(path),
        tokenizer_(std::move(tokenizer)),
        tokenizer_source_(std::move(tokenizer_source)) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read '" + path + "'");
    std::ostringstream text;
    text << in.rdbuf();
    const std::vector<int32_t> ids = tokenizer_->encode(text.str());
    const auto split = static_cast<size_t>(static_cast<double>(ids.size()) * (1.0 - held_out));
    train_.assign(ids.begin(), ids.begin() + split);
    val_.assign(ids.begin() + split, ids.end());
    const auto need = static_cast<size_t>(context + 1);
    if (train_.size() < need || val_.size() < need)
      throw std::runtime_error(path + " is too short: " + std::to_string(ids.size()) +
                               " tokens, each part needs more than --context " +
                               std::to_string(context));
  }
  std::string describe() const override {
    return path_ + " as BPE pieces of " + tokenizer_source_ + ": " + std::to_string(train_.size()) +
           " tokens for training, " + std::to_string(val_.size()) + " held out, vocabulary " +
           std::to_string(vocab_size());
  }
  int64_t vocab_size() const override { return tokenizer_->vocab_size(); }
  std::pair<tp::Tensor, tp::Tensor> batch(int64_t batch, int64_t context, tp::Generator& generator,
                                          bool held_out, int64_t) const override {
    return sample_windows(held_out ? val_ : train_, batch, context, generator);
  }
  double unigram_entropy() const override {
    std::vector<double> counts(static_cast<size_t>(vocab_size()), 0.0);
    for (int32_t id : train_) counts[id] += 1.0;
    double entropy = 0;
    for (double c : counts)
      if (c > 0) entropy -= c / train_.size() * std::log(c / train_.size());
    return entropy;
  }
  std::vector<int64_t> encode(const std::string& text) const override {
    return widen(tokenizer_->encode(text));
  }
  std::string decode(const std::vector<int64_t>& ids) const override {
    return tokenizer_->decode(narrow_ids(ids));
  }

 private:
  std::string path_;
  std::unique_ptr<data::Tokenizer> tokenizer_;
  std::string tokenizer_source_;
  std::vector<int32_t> train_, val_;
};

// Token shards through the window loader: step k's windows are the loader's k-th step (so a
// resumed run reads the same next windows); held-out batches come from a loader of another seed
// over the same shards (shards carry no held-out part).
class ShardCorpus : public Corpus {
 public:
  ShardCorpus(const std::string& path, int64_t context, uint64_t seed) : path_(path) {
    const fs::path folder = fs::is_directory(path) ? fs::path(path) : fs::path(path).parent_path();
    const fs::path meta_path = folder / data::kTokenShardsMetaName;
    if (fs::exists(meta_path)) {
      std::ifstream in(meta_path);
      const nlohmann::json meta = nlohmann::json::parse(in);
      vocab_ = meta.value("vocab_size", int64_t{0});
      const std::string model = meta.value("tokenizer", std::string());
      if (!model.empty()) {
        const fs::path model_path =
            fs::path(model).is_absolute() ? fs::path(model) : folder / model;
        if (fs::exists(model_path)) tokenizer_ = data::open_tokenizer(model_path.string());
      }
    }
    if (vocab_ <= 0)
      throw std::runtime_error(meta_path.string() +
                               " does not give the vocabulary size (\"vocab_size\"); write the "
                               "shards with tp-tokenize");
    context_ = context;
    seed_ = seed;
  }
  std::string describe() const override {
    return path_ + " (token shards): vocabulary " + std::to_string(vocab_) +
           (tokenizer_ ? "" : ", no tokenizer to decode samples with") +
           "; nothing held out: validation reads other windows of the same shards";
  }
  int64_t vocab_size() const override { return vocab_; }
  std::pair<tp::Tensor, tp::Tensor> batch(int64_t batch, int64_t context, tp::Generator&,
                                          bool held_out, int64_t step) const override {
    auto& loader = held_out ? val_ : train_;
    if (!loader || loader->options().batch != batch || loader->options().context != context)
      loader = std::make_unique<data::TokenWindowLoader>(
          path_, data::TokenWindowOptions{
                     .context = context, .batch = batch, .seed = seed_ + (held_out ? 1000 : 0)});
    // Step k's windows (held out: the k-th batch of the other order, the same at every
    // validation).
    loader->set_position(loader->position_after(std::max<int64_t>(0, step - 1)));
    return loader->next();
  }
  double unigram_entropy() const override { return NAN; }
  std::vector<int64_t> encode(const std::string& text) const override {
    return tokenizer_ ? widen(tokenizer_->encode(text)) : std::vector<int64_t>{0};
  }
  std::string decode(const std::vector<int64_t>& ids) const override {
    return tokenizer_ ? tokenizer_->decode(narrow_ids(ids)) : std::string();
  }
  bool can_decode() const override { return tokenizer_ != nullptr; }

 private:
  std::string path_;
  int64_t vocab_ = 0, context_ = 0;
  uint64_t seed_ = 0;
  std::unique_ptr<data::Tokenizer> tokenizer_;
  mutable std::unique_ptr<data::TokenWindowLoader> train_, val_;
};

bool is_shards(const std::string& data) {
  if (data.empty()) return false;
  const fs::path p(data);
  return fs::is_directory(p) || p.extension() == ".bin";
}

}  // namespace

std::unique_ptr<Corpus> open_corpus(const std::string& data, const std::string& tokenizer,
                                    double held_out, int64_t context, uint64_t seed,
                                    const std::string& work_dir, bool resume, bool verbose) {
  if (is_shards(data)) {
    if (tokenizer != "char")
      throw std::invalid_argument("--tokenizer " + tokenizer + ": --data " + data +
                                  " holds token shards, tokenized already (leave --tokenizer)");
    return std::make_unique<ShardCorpus>(data, context, seed);
  }
  if (tokenizer == "char") return std::make_unique<TextCorpus>(data, held_out, context);
  if (data.empty())
    throw std::invalid_argument("--tokenizer " + tokenizer + " needs --data (a text file)");
  if (tokenizer.rfind("bpe:", 0) == 0) {
    const std::string digits = tokenizer.substr(4);
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos ||
        digits.size() > 9)
      throw std::invalid_argument("--tokenizer " + tokenizer +
                                  ": give bpe:VOCAB with VOCAB a number of pieces (bpe:4096)");
    fs::create_directories(work_dir);
    const std::string model = (fs::path(work_dir) / "tokenizer.model").string();
    if (resume && fs::exists(model))  // the tokenizer the interrupted run trained
      return std::make_unique<BpeTextCorpus>(data, data::open_tokenizer(model), model, held_out,
                                             context);
    return std::make_unique<BpeTextCorpus>(
        data,
        data::as_tokenizer(
            data::SentencePieceTokenizer::train(data, std::stoll(digits), model, verbose), model),
        model, held_out, context);
  }
  if (!fs::exists(tokenizer))
    throw std::invalid_argument("--tokenizer " + tokenizer +
                                ": give char, bpe:VOCAB, a SentencePiece FILE.model, a "
                                "tokenizer.json or a Hugging Face model folder holding one");
  std::unique_ptr<data::Tokenizer> opened = data::open_tokenizer(tokenizer);
  const std::string source = opened->path();
  return std::make_unique<BpeTextCorpus>(data, std::move(opened), source, held_out, context);
}

}  // namespace train_gpt
