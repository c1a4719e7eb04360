// Encoding speed of a Hugging Face tokenizer.json in tensorplay (data::ByteLevelBpeTokenizer)
// against the `tokenizers` package, both in one thread, each round with a fresh tokenizer (its
// word cache empty), keeping each side's best. Without --tokenizer and --text the peer script
// (bench/tokenizer_tokenizers.py) trains a Llama-3-style tokenizer on about 1 MB of mixed text.
// The peer runs in the virtual environment scripts/make_torch_venv.sh makes
// ($TENSORPLAY_TORCH_VENV, else torch-venv beside this program); without it, given files, the
// benchmark times only tensorplay and says so ("ratio": null). Prints JSON lines; the last holds
// the ratio (theirs over ours: above 1, tensorplay is faster) and whether the ids agree.
//
//   ./build/bench/bench_tokenizer [--tokenizer FILE|DIR] [--text FILE] [--rounds 5]
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "command_output.h"
#include "python_peer.h"
#include "tensorplay/data/tokenizer.h"

#ifndef TENSORPLAY_SOURCE_DIR
#define TENSORPLAY_SOURCE_DIR "."
#endif

namespace data = tensorplay::data;
namespace fs = std::filesystem;

namespace {

struct Settings {
  std::string tokenizer, text;
  int rounds = 5;
};

// The venv's interpreter when it imports tokenizers, else empty with the reason.
std::string venv_python(std::string& problem) {
  const std::string python = (bench::torch_venv_dir() / "bin" / "python").string();
  if (!fs::exists(python)) {
    problem = "no virtual environment at " + bench::torch_venv_dir().string() +
              " (make one with scripts/make_torch_venv.sh, or set TENSORPLAY_TORCH_VENV)";
    return "";
  }
  if (bench::run_command(bench::shell_quote(python) + " -c 'import tokenizers' 2>/dev/null")
          .exit_code != 0) {
    problem = python + " cannot import tokenizers (run scripts/make_torch_venv.sh)";
    return "";
  }
  return python;
}

uint64_t checksum(const std::vector<int32_t>& ids) {
  const unsigned __int128 mod = (uint64_t{1} << 61) - 1;
  unsigned __int128 sum = 0;
  for (size_t i = 0; i < ids.size(); ++i)
    sum = (sum + static_cast<unsigned __int128>(i + 1) * static_cast<uint64_t>(ids[i])) % mod;
  return static_cast<uint64_t>(sum);
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--tokenizer") {
      s.tokenizer = argv[i + 1];
    } else if (flag == "--text") {
      s.text = argv[i + 1];
    } else if (flag == "--rounds") {
      s.rounds = std::max(1, std::atoi(argv[i + 1]));
    } else {
      std::cerr << "usage: bench_tokenizer [--tokenizer FILE|DIR] [--text FILE] [--rounds 5]\n";
      return 2;
    }
  }
  try {
    std::string problem;
    const std::string python = venv_python(problem);
    const std::string peer = std::string(TENSORPLAY_SOURCE_DIR) + "/bench/tokenizer_tokenizers.py";
    if (s.tokenizer.empty() || s.text.empty()) {
      if (python.empty()) {
        std::cerr << "bench_tokenizer: without --tokenizer and --text the peer makes them, but "
                  << problem << "\n";
        return 1;
      }
      const std::string dir = (fs::temp_directory_path() / "tensorplay_bench_tokenizer").string();
      if (bench::run_command(bench::shell_quote(python) + " " + bench::shell_quote(peer) +
                             " make " + bench::shell_quote(dir))
              .exit_code != 0)
        throw std::runtime_error("the peer could not make the tokenizer and text in " + dir);
      if (s.tokenizer.empty()) s.tokenizer = dir + "/tokenizer.json";
      if (s.text.empty()) s.text = dir + "/text.txt";
    }
    std::ifstream in(s.text, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read --text " + s.text);
    std::ostringstream buffer;
    buffer << in.rdbuf();
    const std::string text = buffer.str();

    double ours = 1e30;
    std::vector<int32_t> ids;
    for (int r = 0; r < s.rounds; ++r) {
      const auto tokenizer = data::open_tokenizer(s.tokenizer);  // fresh: its cache empty
      const auto start = std::chrono::steady_clock::now();
      ids = tokenizer->encode(text);
      ours = std::min(
          ours, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    const double mb = static_cast<double>(text.size()) / 1e6;
    nlohmann::json result = {{"bench", "tokenizer"},
                             {"tokenizer", data::tokenizer_file(s.tokenizer)},
                             {"bytes", text.size()},
                             {"ids", ids.size()},
                             {"rounds", s.rounds},
                             {"tensorplay_seconds", ours},
                             {"tensorplay_mb_per_s", mb / ours}};
    if (python.empty()) {
      result["ratio"] = nullptr;
      result["note"] = "tensorplay only: " + problem;
    } else {
      const bench::CommandOutput out =
          bench::run_command(bench::shell_quote(python) + " " + bench::shell_quote(peer) +
                             " time " + bench::shell_quote(data::tokenizer_file(s.tokenizer)) +
                             " " + bench::shell_quote(s.text) + " " + std::to_string(s.rounds));
      if (out.exit_code != 0 || out.lines.empty())
        throw std::runtime_error("the tokenizers peer failed (" + peer + ")");
      const nlohmann::json theirs = nlohmann::json::parse(out.lines.back());
      const double seconds = theirs["seconds"].get<double>();
      result["tokenizers_seconds"] = seconds;
      result["tokenizers_mb_per_s"] = mb / seconds;
      result["same_ids"] = theirs["ids"].get<size_t>() == ids.size() &&
                           theirs["checksum"].get<uint64_t>() == checksum(ids);
      result["ratio"] = seconds / ours;
    }
    std::cout << result.dump() << std::endl;
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "bench_tokenizer: " << e.what() << "\n";
    return 1;
  }
}
