// The tensorplay side of the tokenizer.json checks against the `tokenizers` package: encodes a
// text file with a tokenizer.json, decodes the ids back, and times the encoding in one thread.
//
//   tokenizer_json_peer TOKENIZER_JSON TEXT_FILE OUT_JSON
// OUT_JSON receives {"ids": [...], "decoded": "...", "encode_seconds": best of 5}.
#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tensorplay/data/tokenizer.h"

namespace data = tensorplay::data;

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: tokenizer_json_peer TOKENIZER_JSON TEXT_FILE OUT_JSON\n";
    return 2;
  }
  try {
    const std::unique_ptr<data::Tokenizer> tokenizer = data::open_tokenizer(argv[1]);
    std::ifstream in(argv[2], std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    const std::string s = text.str();
    std::vector<int32_t> ids;
    double best = 1e30;
    for (int i = 0; i < 5; ++i) {
      // A fresh tokenizer each time but the first, so that its cache starts empty as theirs.
      const std::unique_ptr<data::Tokenizer> fresh = data::open_tokenizer(argv[1]);
      const auto start = std::chrono::steady_clock::now();
      ids = fresh->encode(s);
      best = std::min(
          best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    nlohmann::json out = {{"ids", ids},
                          {"decoded", tokenizer->decode(ids)},
                          {"encode_seconds", best},
                          {"vocab_size", tokenizer->vocab_size()}};
    std::ofstream(argv[3]) << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "tokenizer_json_peer: " << e.what() << "\n";
    return 1;
  }
}
