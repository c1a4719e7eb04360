// One training step of a stack of GPT blocks of width 1024 split by tensor parallelism over 2
// processes (tp 2, one thread each): tensorplay's (bench_tp_step's ranks) against PyTorch's
// parallelize_module with ColwiseParallel and RowwiseParallel over gloo on the CPU
// (bench/tp_step_pytorch.py, the same model and step). The PyTorch side runs under the
// interpreter python_peer.h finds (TENSORPLAY_PYTHON, a torch-venv beside this executable,
// python3). Prints JSON lines; the last one holds the ratio (PyTorch's step time over ours, the
// best of the rounds each: higher is better).
//
//   ./build/bench/bench_tp_vs_pytorch [--rounds 3] [--layers 2] [--width 1024] [--heads 16]
//                                     [--batch 4] [--time 64] [--steps 5] [--warmup 2]
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "command_output.h"
#include "python_peer.h"
#include "tensorplay/distributed/launch_env.h"

namespace {

// One side's step time in ms (the slower rank's median), or an error.
struct Side {
  double step_ms = 0;
  std::string line, error;
};

Side run_side(const std::string& command, const std::string& key, const std::string& what) {
  bench::CommandOutput out = bench::run_command(command + " 2>&1");
  Side side;
  for (const std::string& line : out.lines)
    if (line.rfind("{\"", 0) == 0)
      if (auto v = bench::json_number(line, key)) {
        side.step_ms = *v;
        side.line = line;
      }
  if (out.exit_code != 0 || side.step_ms <= 0)
    side.error = what + " failed (exit code " + std::to_string(out.exit_code) +
                 "); its last lines:\n" + bench::tail_of(out);
  return side;
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 3;
  std::string flags;  // the model's and the step's, passed to both sides
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--rounds") {
      rounds = std::stoi(value);
    } else if (flag == "--layers" || flag == "--width" || flag == "--heads" || flag == "--batch" ||
               flag == "--time" || flag == "--steps" || flag == "--warmup") {
      flags += " " + flag + " " + bench::shell_quote(value);
    } else {
      std::cerr << "unknown flag " << flag
                << " (known: --rounds, --layers, --width, --heads, --batch, --time, --steps, "
                   "--warmup)\n";
      return 2;
    }
  }
  bench::PythonPeer peer = bench::find_python_with_torch();
  if (peer.python.empty()) {
    std::cout << "{\"bench\":\"bench_tp_vs_pytorch\",\"pytorch\":\"missing\",\"detail\":"
              << bench::json_quote(peer.problem) << ",\"ratio\":null}" << std::endl;
    std::cerr << "PyTorch is not available, so there is nothing to compare against: "
              << peer.problem << "\n";
    return 1;
  }
  const std::string ours_exe =
      (std::filesystem::path(bench::self_executable()).parent_path() / "bench_tp_step").string();
  const std::string script = std::string(TENSORPLAY_SOURCE_DIR) + "/bench/tp_step_pytorch.py";
  std::cout << "{\"pytorch\":" << bench::json_quote(peer.torch_version)
            << ",\"python\":" << bench::json_quote(peer.python) << "}" << std::endl;
  double ours = 1e300, theirs = 1e300;
  for (int round = 0; round < rounds; ++round) {
    const Side mine =
        run_side(bench::shell_quote(ours_exe) + flags, "tp2_step_ms", "bench_tp_step");
    const Side peers =
        run_side(bench::shell_quote(peer.python) + " " + bench::shell_quote(script) + flags +
                     " --port " + std::to_string(tensorplay::distributed::free_loopback_port()),
                 "step_ms", "PyTorch's tp 2 run");
    if (!mine.error.empty() || !peers.error.empty()) {
      std::cerr << mine.error << peers.error;
      return 1;
    }
    ours = std::min(ours, mine.step_ms);
    theirs = std::min(theirs, peers.step_ms);
    std::cout << "{\"round\":" << round << ",\"ours_tp2_step_ms\":" << mine.step_ms
              << ",\"pytorch_tp2_step_ms\":" << peers.step_ms << "}" << std::endl;
  }
  std::cout << "{\"bench\":\"bench_tp_vs_pytorch\",\"ratio\":" << theirs / ours
            << ",\"ours_tp2_step_ms\":" << ours << ",\"pytorch_tp2_step_ms\":" << theirs
            << ",\"pytorch\":" << bench::json_quote(peer.torch_version)
            << ",\"processes\":2,\"threads_per_process\":1,\"rounds\":" << rounds << "}"
            << std::endl;
  return 0;
}
