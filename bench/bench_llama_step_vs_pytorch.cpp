// One Llama training step (forward, cross entropy, backward, AdamW step) in tensorplay against
// transformers' LlamaForCausalLM of the same sizes (bench/llama_step_pytorch.py: eager attention
// and SDPA, the faster one), both on one CPU thread, alternating a few rounds and keeping the best
// tokens/s of each. The PyTorch peer runs in the virtual environment scripts/make_torch_venv.sh
// makes ($TENSORPLAY_TORCH_VENV, else torch-venv beside this program); without it the benchmark
// times only tensorplay and says so ("ratio": null). Prints JSON lines; the last holds the ratio.
//
//   ./build/bench/bench_llama_step_vs_pytorch [--rounds 3] [--steps 3] [--warmup 1]
#include <chrono>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <limits>
#include <sstream>
#include <string>

#include "command_output.h"
#include "python_peer.h"
#include "tensorplay/tensor.h"

#ifndef TENSORPLAY_SOURCE_DIR
#define TENSORPLAY_SOURCE_DIR "."
#endif

namespace tp = tensorplay;
namespace nn = tensorplay::nn;

namespace {

struct Settings {
  int64_t layers = 4, width = 256, heads = 4, kv_heads = 2, mlp_width = 688, context = 128,
          batch = 16, vocab = 256;
  int rounds = 3, steps = 3, warmup = 1;
};

double thread_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct StepTime {
  double wall_s, cpu_s;  // best of the timed steps, each
};

StepTime time_ours(const Settings& s) {
  tp::manual_seed(0);
  nn::Llama model(nn::LlamaConfig{.vocab_size = s.vocab,
                                  .context_length = s.context,
                                  .n_layer = s.layers,
                                  .n_head = s.heads,
                                  .n_kv_head = s.kv_heads,
                                  .width = s.width,
                                  .mlp_width = s.mlp_width});
  tp::optim::AdamW opt(model->parameters(), {.lr = 3e-4f, .weight_decay = 0.0f});
  tp::Generator gen(1);
  tp::Tensor idx = tp::randint(0, s.vocab, {s.batch, s.context}, {}, &gen);
  tp::Tensor targets = tp::randint(0, s.vocab, {s.batch * s.context}, {}, &gen);
  auto step = [&] {
    tp::Tensor loss = tp::cross_entropy(model(idx).reshape({-1, s.vocab}), targets);
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

// The venv's interpreter when it imports torch and transformers, else empty with the reason.
std::string venv_python(std::string& problem) {
  const std::filesystem::path venv = bench::torch_venv_dir();
  const std::string python = (venv / "bin" / "python").string();
  if (!std::filesystem::exists(python)) {
    problem = "no virtual environment at " + venv.string() +
              " (make one with scripts/make_torch_venv.sh, or set TENSORPLAY_TORCH_VENV)";
    return "";
  }
  bench::CommandOutput out = bench::run_command(bench::shell_quote(python) +
                                                " -c 'import torch, transformers' 2>/dev/null");
  if (out.exit_code != 0) {
    problem = python + " cannot import torch and transformers (run scripts/make_torch_venv.sh)";
    return "";
  }
  return python;
}

std::string run_pytorch(const std::string& python, const Settings& s) {
  std::ostringstream cmd;
  cmd << bench::shell_quote(python) << " " << TENSORPLAY_SOURCE_DIR
      << "/bench/llama_step_pytorch.py --layers " << s.layers << " --width " << s.width
      << " --heads " << s.heads << " --kv-heads " << s.kv_heads << " --mlp-width " << s.mlp_width
      << " --context " << s.context << " --batch " << s.batch << " --vocab " << s.vocab
      << " --steps " << s.steps << " --warmup " << s.warmup << " 2>/dev/null";
  bench::CommandOutput out = bench::run_command(cmd.str());
  return out.lines.empty() ? "" : out.lines.back();
}

bool parse_flags(int argc, char** argv, Settings& s) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int value = std::atoi(argv[i + 1]);
    if (flag == "--rounds")
      s.rounds = value;
    else if (flag == "--steps")
      s.steps = value;
    else if (flag == "--warmup")
      s.warmup = value;
    else
      return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  if (!parse_flags(argc, argv, s)) {
    std::cerr << "usage: bench_llama_step_vs_pytorch [--rounds N] [--steps N] [--warmup N]\n";
    return 2;
  }
  tp::set_default_num_threads(1);
  std::string problem;
  const std::string python = venv_python(problem);
  if (python.empty()) std::cout << "{\"pytorch\":\"skipped\",\"why\":\"" << problem << "\"}\n";
  const double tokens = static_cast<double>(s.batch * s.context);
  double ours = 0, theirs = 0, ours_cpu = 0, theirs_cpu = 0;
  for (int round = 0; round < s.rounds; ++round) {
    const StepTime t = time_ours(s);
    ours = std::max(ours, tokens / t.wall_s);
    ours_cpu = std::max(ours_cpu, tokens / t.cpu_s);
    std::cout << "{\"round\":" << round
              << ",\"side\":\"ours\",\"tokens_per_s\":" << tokens / t.wall_s
              << ",\"cpu_tokens_per_s\":" << tokens / t.cpu_s << "}" << std::endl;
    if (python.empty()) continue;
    const std::string line = run_pytorch(python, s);
    const auto figure = bench::json_number(line, "tokens_per_s");
    if (!figure) {
      std::cout << "{\"pytorch\":\"failed\",\"output\":\"" << (line.empty() ? "none" : "see below")
                << "\"}\n"
                << line << std::endl;
      continue;
    }
    theirs = std::max(theirs, *figure);
    theirs_cpu = std::max(theirs_cpu, bench::json_number(line, "cpu_tokens_per_s").value_or(0));
    std::cout << "{\"round\":" << round << "," << line.substr(1) << std::endl;
  }
  const bool compared = theirs > 0;
  auto number_or_null = [](bool ok, double v) { return ok ? std::to_string(v) : "null"; };
  std::cout << "{\"bench\":\"bench_llama_step_vs_pytorch\",\"ratio\":"
            << number_or_null(compared, ours / theirs) << ",\"ours_tokens_per_s\":" << ours
            << ",\"pytorch_tokens_per_s\":" << number_or_null(compared, theirs) << ",\"cpu_ratio\":"
            << number_or_null(compared && theirs_cpu > 0, ours_cpu / theirs_cpu)
            << ",\"layers\":" << s.layers << ",\"width\":" << s.width << ",\"heads\":" << s.heads
            << ",\"kv_heads\":" << s.kv_heads << ",\"mlp_width\":" << s.mlp_width
            << ",\"context\":" << s.context << ",\"batch\":" << s.batch << ",\"vocab\":" << s.vocab
            << ",\"threads\":1}" << std::endl;
  return 0;
}
