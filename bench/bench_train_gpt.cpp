// train_gpt's default pipelined GPT against the same GPT unsplit on one thread in one process
// (`train_gpt --unsplit`), and against the same GPT split the same way under PyTorch's
// torch.distributed.pipelining on CPU (gpt_pipeline_pytorch.py: gloo, one process per rank, one
// thread each), side by side in each round.
//
//   ./build/bench/bench_train_gpt [--rounds 3] [--steps 30] [--train-gpt PATH] [-- FLAGS...]
//
// FLAGS go to train_gpt on both of our sides (a configuration other than the default). The
// PyTorch side gets the model and pipeline shape train_gpt reports. Prints a JSON line per run;
// the last line holds "bench", "ratio" (median over rounds of pipelined over unsplit tokens/s),
// "ratio_pytorch" (median of pipelined over PyTorch's) and each ratio's spread. Without PyTorch
// the PyTorch figures are null and the exit status is still 0.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "command_output.h"
#include "python_peer.h"

#ifndef TENSORPLAY_SOURCE_DIR
#define TENSORPLAY_SOURCE_DIR "."
#endif
#ifndef TRAIN_GPT_PATH
#define TRAIN_GPT_PATH ""
#endif

namespace {

/// One run's summary line and its tokens/s (0 when it failed).
struct Run {
  std::string line;
  double tokens_per_s = 0;
  std::string error;
};

Run run_train_gpt(const std::string& train_gpt, const std::string& flags) {
  bench::CommandOutput out = bench::run_command(
      bench::shell_quote(train_gpt) +
      " --quiet --json --sample-chars 0 --checkpoint-dir '' --trace-step 0 --val-interval 0 " +
      flags + " 2>&1");
  Run run;
  for (const std::string& line : out.lines)
    if (line.rfind("{\"", 0) == 0 && line.find("\"tokens_per_second\"") != std::string::npos) {
      run.line = line;
      run.tokens_per_s = bench::json_number(line, "tokens_per_second").value_or(0);
    }
  if (out.exit_code != 0 || run.tokens_per_s <= 0)
    run.error = "train_gpt " + flags + " failed (exit code " + std::to_string(out.exit_code) +
                "); its last lines:\n" + bench::tail_of(out);
  return run;
}

// The integer after "key": in a JSON line (train_gpt's summary).
std::string json_int(const std::string& line, const std::string& key) {
  return std::to_string(static_cast<long long>(bench::json_number(line, key).value_or(0)));
}
std::string json_string(const std::string& line, const std::string& key) {
  size_t at = line.find("\"" + key + "\":\"");
  if (at == std::string::npos) return "";
  size_t start = at + key.size() + 4;
  return line.substr(start, line.find('"', start) - start);
}

Run run_pytorch(const std::string& python, const std::string& ours, int steps) {
  std::string flags = " --schedule " + json_string(ours, "schedule");
  for (const char* key :
       {"stages", "layers", "width", "heads", "context", "vocab", "batch", "microbatches"})
    flags += std::string(" --") + key + " " + json_int(ours, key);
  flags += " --steps " + std::to_string(steps);
  bench::CommandOutput out = bench::run_command(
      bench::shell_quote(python) + " " +
      bench::shell_quote(std::string(TENSORPLAY_SOURCE_DIR) + "/bench/gpt_pipeline_pytorch.py") +
      flags + " 2>&1");
  Run run;
  for (const std::string& line : out.lines)
    if (line.rfind("{\"", 0) == 0 && line.find("\"side\":\"pytorch\"") != std::string::npos) {
      run.line = line;
      run.tokens_per_s = bench::json_number(line, "tokens_per_s").value_or(0);
    }
  if (out.exit_code != 0 || run.tokens_per_s <= 0)
    run.error = "PyTorch's pipeline" + flags + " failed (exit code " +
                std::to_string(out.exit_code) + "); its last lines:\n" + bench::tail_of(out);
  return run;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

std::string spread(const std::vector<double>& v, const std::string& key) {
  if (v.empty()) return ",\"" + key + "\":null";
  std::ostringstream out;
  out << ",\"" << key << "\":" << median(v) << ",\"" << key
      << "_min\":" << *std::min_element(v.begin(), v.end()) << ",\"" << key
      << "_max\":" << *std::max_element(v.begin(), v.end());
  return out.str();
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 3, steps = 30;
  std::string train_gpt = TRAIN_GPT_PATH, extra;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--") {
      for (++i; i < argc; ++i) extra += " " + bench::shell_quote(argv[i]);
      break;
    }
    if (i + 1 >= argc) {
      std::cerr << flag << " needs a value\n";
      return 2;
    }
    std::string value = argv[++i];
    if (flag == "--rounds") {
      rounds = std::stoi(value);
    } else if (flag == "--steps") {
      steps = std::stoi(value);
    } else if (flag == "--train-gpt") {
      train_gpt = value;
    } else {
      std::cerr << "unknown flag " << flag
                << " (known: --rounds, --steps, --train-gpt, -- FLAGS)\n";
      return 2;
    }
  }
  if (train_gpt.empty() || !std::filesystem::exists(train_gpt)) {
    std::cerr << "train_gpt not found at '" << train_gpt
              << "': build it (cmake --build build --target train_gpt) or pass --train-gpt PATH\n";
    return 1;
  }
  bench::PythonPeer peer = bench::find_python_with_torch();
  if (peer.python.empty())
    std::cerr << "PyTorch is not available; comparing with the unsplit model only: " << peer.problem
              << "\n";

  const std::string flags = "--steps " + std::to_string(steps) + extra;
  std::vector<double> over_unsplit, over_pytorch;
  std::string config;
  for (int round = 0; round < rounds; ++round) {
    Run pipelined = run_train_gpt(train_gpt, flags);
    Run unsplit = pipelined.error.empty() ? run_train_gpt(train_gpt, flags + " --unsplit") : Run{};
    if (!pipelined.error.empty() || !unsplit.error.empty()) {
      std::cerr << pipelined.error << unsplit.error;
      return 1;
    }
    config = pipelined.line;
    Run theirs;
    if (!peer.python.empty()) {
      theirs = run_pytorch(peer.python, pipelined.line, steps);
      if (!theirs.error.empty()) {
        std::cerr << theirs.error;
        return 1;
      }
    }
    over_unsplit.push_back(pipelined.tokens_per_s / unsplit.tokens_per_s);
    if (theirs.tokens_per_s > 0)
      over_pytorch.push_back(pipelined.tokens_per_s / theirs.tokens_per_s);
    std::cout << "{\"round\":" << round << ",\"pipelined_tokens_per_s\":" << pipelined.tokens_per_s
              << ",\"unsplit_tokens_per_s\":" << unsplit.tokens_per_s
              << ",\"pytorch_tokens_per_s\":" << theirs.tokens_per_s << "}" << std::endl;
  }
  std::cout << "{\"config\":" << config << "}" << std::endl;
  std::cout << "{\"bench\":\"bench_train_gpt\"" << spread(over_unsplit, "ratio")
            << spread(over_pytorch, "ratio_pytorch") << ",\"goal\":1.6,\"goal_pytorch\":1.3"
            << ",\"pytorch\":" << bench::json_quote(peer.torch_version) << ",\"rounds\":" << rounds
            << ",\"steps\":" << steps << "}" << std::endl;
  return 0;
}
