// One GPT training step (forward, cross entropy, backward, AdamW step) in tensorplay against the
// same model in PyTorch (bench/gpt_step_pytorch.py), both on one CPU thread, alternating a few
// rounds and keeping the best tokens/s of each. Prints JSON lines; the last one holds the ratio.
//
//   ./build/bench/bench_gpt_step_vs_pytorch [--rounds 3] [--steps 3] [--warmup 1]
#include <cblas.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <limits>
#include <optional>
#include <sstream>
#include <string>

#include "tensors/tensors.h"

#ifndef TENSORPLAY_SOURCE_DIR
#define TENSORPLAY_SOURCE_DIR "."
#endif

namespace tp = tensorplay;
namespace nn = tensorplay::nn;

namespace {

struct Settings {
  int64_t layers = 4, width = 256, heads = 4, context = 128, batch = 16, vocab = 256;
  int rounds = 3, steps = 3, warmup = 1;
};

// Best seconds of one step over `steps` timed steps, after `warmup` untimed ones.
double time_ours(const Settings& s) {
  tp::manual_seed(0);
  nn::GPT model(nn::GPTConfig{.vocab_size = s.vocab,
                              .context_length = s.context,
                              .n_layer = s.layers,
                              .n_head = s.heads,
                              .width = s.width});
  tp::optim::AdamW opt(model->parameters(), {.lr = 3e-4f, .weight_decay = 0.0f});
  tp::Generator gen(1);
  tp::Tensor idx = tp::randint(0, s.vocab, {s.batch, s.context}, {}, &gen);
  tp::Tensor targets = tp::randint(0, s.vocab, {s.batch * s.context}, {}, &gen);
  auto step = [&] {
    tp::Tensor logits = model(idx);
    tp::Tensor loss = tp::cross_entropy(logits.reshape({-1, s.vocab}), targets);
    opt.zero_grad();
    loss.backward();
    opt.step();
    return loss.item();
  };
  for (int i = 0; i < s.warmup; ++i) step();
  double best = std::numeric_limits<double>::infinity();
  for (int i = 0; i < s.steps; ++i) {
    auto start = std::chrono::steady_clock::now();
    step();
    best = std::min(
        best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

// The number after "key": in a JSON line, if present.
std::optional<double> json_number(const std::string& line, const std::string& key) {
  size_t at = line.find("\"" + key + "\":");
  if (at == std::string::npos) return std::nullopt;
  return std::strtod(line.c_str() + at + key.size() + 3, nullptr);
}

// Runs the PyTorch script; returns its last output line (empty when it could not run).
std::string run_pytorch(const Settings& s) {
  std::ostringstream cmd;
  cmd << "python3 " << TENSORPLAY_SOURCE_DIR << "/bench/gpt_step_pytorch.py --layers " << s.layers
      << " --width " << s.width << " --heads " << s.heads << " --context " << s.context
      << " --batch " << s.batch << " --vocab " << s.vocab << " --steps " << s.steps << " --warmup "
      << s.warmup << " 2>/dev/null";
  FILE* pipe = popen(cmd.str().c_str(), "r");
  if (!pipe) return "";
  std::string last, line;
  char buffer[4096];
  while (std::fgets(buffer, sizeof(buffer), pipe)) {
    line = buffer;
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    if (!line.empty()) last = line;
  }
  pclose(pipe);
  return last;
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    int value = std::atoi(argv[i + 1]);
    if (flag == "--rounds")
      s.rounds = value;
    else if (flag == "--steps")
      s.steps = value;
    else if (flag == "--warmup")
      s.warmup = value;
    else {
      std::cerr << "unknown flag " << flag << " (known: --rounds, --steps, --warmup)\n";
      return 2;
    }
  }
  openblas_set_num_threads(1);
  const double tokens = static_cast<double>(s.batch * s.context);
  double ours_best = 0, theirs_best = 0;
  bool have_torch = true;
  for (int round = 0; round < s.rounds; ++round) {
    double ours = tokens / time_ours(s);
    ours_best = std::max(ours_best, ours);
    std::cout << "{\"round\":" << round << ",\"side\":\"ours\",\"tokens_per_s\":" << ours << "}"
              << std::endl;
    if (!have_torch) continue;
    std::string line = run_pytorch(s);
    std::optional<double> theirs = json_number(line, "tokens_per_s");
    if (!theirs) {
      have_torch = false;
      std::cout << "{\"pytorch\":\"missing\",\"detail\":"
                << (line.empty() || line.front() != '{' ? "\"python3 failed to run the script\""
                                                        : line)
                << ",\"install\":\"pip install torch --index-url "
                   "https://download.pytorch.org/whl/cpu (or: pip install torch)\"}"
                << std::endl;
      continue;
    }
    theirs_best = std::max(theirs_best, *theirs);
    std::cout << "{\"round\":" << round << ",\"side\":\"pytorch\",\"tokens_per_s\":" << *theirs
              << "}" << std::endl;
  }
  std::cout << "{\"bench\":\"bench_gpt_step_vs_pytorch\",\"ratio\":";
  if (have_torch && theirs_best > 0)
    std::cout << ours_best / theirs_best;
  else
    std::cout << "null";
  std::cout << ",\"ours_tokens_per_s\":" << ours_best << ",\"pytorch_tokens_per_s\":";
  if (have_torch && theirs_best > 0)
    std::cout << theirs_best;
  else
    std::cout << "null";
  std::cout << ",\"layers\":" << s.layers << ",\"width\":" << s.width << ",\"heads\":" << s.heads
            << ",\"context\":" << s.context << ",\"batch\":" << s.batch << ",\"vocab\":" << s.vocab
            << ",\"threads\":1}" << std::endl;
  return 0;
}
