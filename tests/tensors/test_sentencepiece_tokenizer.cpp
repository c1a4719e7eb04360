// Tests for data/sentencepiece_tokenizer.h: a BPE model trained on a small corpus round-trips
// that corpus and text it never saw (other scripts, runs of spaces, newlines), compresses it,
// loads back from its .model file to the same ids, and refuses bad arguments by name.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "temp_path.h"
#include "tensorplay/data/sentencepiece_tokenizer.h"

namespace data = tensorplay::data;
namespace fs = std::filesystem;

namespace {

std::string corpus_text() {
  const char* words[] = {"the",         "pipeline", "stage",   "sends",   "its",
                         "activations", "to",       "next",    "and",     "gradients",
                         "flow",        "back",     "through", "every",   "microbatch",
                         "schedule",    "tensor",   "model",   "weights", "loss"};
  std::string text;
  uint32_t state = 7;
  for (int line = 0; line < 400; ++line) {
    for (int w = 0; w < 12; ++w) {
      state = state * 1103515245u + 12345u;
      text += words[(state >> 16) % 20];
      text += w == 11 ? ".\n" : " ";
    }
    if (line % 50 == 0) text += "Step " + std::to_string(line * 37) + ":  loss 2.5\n";
  }
  return text;
}

}  // namespace

TEST_CASE("a BPE model trained on a corpus round-trips it and unseen text", "[tokenizer]") {
  const std::string dir = test_files::temp_path("spm");
  fs::create_directories(dir);
  const std::string corpus = (fs::path(dir) / "corpus.txt").string();
  const std::string text = corpus_text();
  std::ofstream(corpus) << text;
  const std::string model = (fs::path(dir) / "bpe.model").string();
  data::SentencePieceTokenizer tokenizer = data::SentencePieceTokenizer::train(corpus, 400, model);
  CHECK(tokenizer.vocab_size() == 400);
  CHECK(fs::exists(model));

  const std::vector<int32_t> ids = tokenizer.encode(text);
  CHECK(tokenizer.decode(ids) == text);
  INFO(ids.size() << " tokens for " << text.size() << " bytes");
  CHECK(ids.size() * 3 < text.size());  // merges learned: well under a token per byte
  for (int32_t id : ids) CHECK((id >= 0 && id < 400));
  for (const std::string unseen : {"  two leading spaces,\ttabs\tand\n\nblank lines  ",
                                   "Grüße, 東京, emoji 🙂!", "", "12345 67890"}) {
    INFO(unseen);
    CHECK(tokenizer.decode(tokenizer.encode(unseen)) == unseen);
  }

  data::SentencePieceTokenizer loaded(model);
  CHECK(loaded.encode(text) == ids);
  CHECK_THROWS_WITH(loaded.decode({5, 400}), Catch::Contains("id 400 is not in [0, 400)"));
  fs::remove_all(dir);
}

TEST_CASE("the tokenizer refuses bad arguments, naming them", "[tokenizer]") {
  const std::string dir = test_files::temp_path("spm_bad");
  fs::create_directories(dir);
  const std::string corpus = (fs::path(dir) / "corpus.txt").string();
  std::ofstream(corpus) << "a few words\n";
  CHECK_THROWS_WITH(data::SentencePieceTokenizer::train(corpus, 100, dir + "/m.model"),
                    Catch::Contains("vocab_size 100 must be at least 260"));
  CHECK_THROWS_WITH(data::SentencePieceTokenizer::train(corpus, 300, dir + "/m.bin"),
                    Catch::Contains("must end in .model"));
  CHECK_THROWS_WITH(data::SentencePieceTokenizer::train(dir + "/none.txt", 300, dir + "/m.model"),
                    Catch::Contains("no corpus file"));
  CHECK_THROWS_WITH(data::SentencePieceTokenizer(corpus), Catch::Contains("cannot load"));
  fs::remove_all(dir);
}
