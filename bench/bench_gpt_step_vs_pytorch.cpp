// One GPT training step (forward, cross entropy, backward, AdamW step) in tensorplay against the
// same model in PyTorch (bench/gpt_step_pytorch.py), both on one CPU thread, alternating a few
// rounds and keeping the best tokens/s of each. The peer's interpreter is found as
// bench/python_peer.h says ($TENSORPLAY_TORCH_VENV or torch-venv beside this program first).
// Prints JSON lines; the last one holds the ratio.
//
//   ./build/bench/bench_gpt_step_vs_pytorch [--rounds 3] [--steps 3] [--warmup 1]
#include <cblas.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <iostream>
#include <limits>
#include <optional>
#include <sstream>
#include <string>

#include "python_peer.h"
#include "tensorplay/tensor.h"

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

// Seconds of CPU time this thread has used (robust to other jobs sharing the cores).
double thread_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct StepTime {
  double wall_s, cpu_s;  // best of the timed steps, each
};

// Best wall and thread-CPU seconds of one step over `steps` timed steps, after `warmup`.
StepTime time_ours(const Settings& s) {
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
  StepTime best{std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity()};
  for (int i = 0; i < s.steps; ++i) {
    auto start = std::chrono::steady_clock::now();
    double cpu_start = thread_cpu_seconds();
    step();
    best.cpu_s = std::min(best.cpu_s, thread_cpu_seconds() - cpu_start);
    best.wall_s =
        std::min(best.wall_s,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

// Runs the PyTorch script with `python`; returns its last output line (empty when it could not
// run).
std::string run_pytorch(const std::string& python, const Settings& s) {
  std::ostringstream cmd;
  cmd << bench::shell_quote(python) << " " << TENSORPLAY_SOURCE_DIR
      << "/bench/gpt_step_pytorch.py --layers " << s.layers << " --width " << s.width << " --heads "
      << s.heads << " --context " << s.context << " --batch " << s.batch << " --vocab " << s.vocab
      << " --steps " << s.steps << " --warmup " << s.warmup << " 2>/dev/null";
  bench::CommandOutput out = bench::run_command(cmd.str());
  return out.lines.empty() ? "" : out.lines.back();
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
  tp::set_default_num_threads(1);
  const double tokens = static_cast<double>(s.batch * s.context);
  double ours_best = 0, theirs_best = 0, ours_cpu_best = 0, theirs_cpu_best = 0;
  const bench::PythonPeer peer = bench::find_python_with_torch();
  bool have_torch = !peer.python.empty();
  if (!have_torch)
    std::cout << "{\"pytorch\":\"missing\",\"detail\":\"" << peer.problem << "\"}" << std::endl;
  for (int round = 0; round < s.rounds; ++round) {
    StepTime t = time_ours(s);
    ours_best = std::max(ours_best, tokens / t.wall_s);
    ours_cpu_best = std::max(ours_cpu_best, tokens / t.cpu_s);
    std::cout << "{\"round\":" << round
              << ",\"side\":\"ours\",\"tokens_per_s\":" << tokens / t.wall_s
              << ",\"cpu_tokens_per_s\":" << tokens / t.cpu_s << "}" << std::endl;
    if (!have_torch) continue;
    std::string line = run_pytorch(peer.python, s);
    std::optional<double> theirs = bench::json_number(line, "tokens_per_s");
    if (!theirs) {
      have_torch = false;
      std::cout << "{\"pytorch\":\"failed\",\"detail\":"
                << (line.empty() || line.front() != '{'
                        ? "\"" + peer.python + " failed to run the script\""
                        : line)
                << "}" << std::endl;
      continue;
    }
    theirs_best = std::max(theirs_best, *theirs);
    theirs_cpu_best =
        std::max(theirs_cpu_best, bench::json_number(line, "cpu_tokens_per_s").value_or(0));
    std::cout << "{\"round\":" << round << "," << line.substr(1) << std::endl;
  }
  bool compared = have_torch && theirs_best > 0;
  auto number_or_null = [](bool ok, double v) { return ok ? std::to_string(v) : "null"; };
  // "ratio" compares wall-clock best of each; "cpu_ratio" compares thread CPU time, which is
  // steadier when other jobs share the cores.
  std::cout << "{\"bench\":\"bench_gpt_step_vs_pytorch\",\"ratio\":"
            << number_or_null(compared, ours_best / theirs_best)
            << ",\"ours_tokens_per_s\":" << ours_best
            << ",\"pytorch_tokens_per_s\":" << number_or_null(compared, theirs_best)
            << ",\"cpu_ratio\":"
            << number_or_null(compared && theirs_cpu_best > 0, ours_cpu_best / theirs_cpu_best)
            << ",\"layers\":" << s.layers << ",\"width\":" << s.width << ",\"heads\":" << s.heads
            << ",\"context\":" << s.context << ",\"batch\":" << s.batch << ",\"vocab\":" << s.vocab
            << ",\"threads\":1}" << std::endl;
  return 0;
}
