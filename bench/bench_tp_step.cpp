// One training step (forward, loss, backward, AdamW step) of a stack of GPT blocks of width 1024
// split by tensor parallelism over 2 processes (tp 2, each on one thread), against the same model
// in one process on one thread. Also the bytes each rank's collectives moved per step and their
// share of the step. Prints JSON lines; the last one holds the ratio (unsplit step time over the
// split one: higher is better, 2 the ideal).
//
//   ./build/bench/bench_tp_step [--layers 2] [--width 1024] [--heads 16] [--batch 4]
//                               [--time 64] [--steps 5] [--warmup 2]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "tensorplay/core/cpu_threads.h"
#include "tensorplay/distributed.h"
#include "tensorplay/nn.h"
#include "tensorplay/optim.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace dist = tensorplay::distributed;
namespace tpar = tensorplay::distributed::tensor_parallel;

namespace {

struct Settings {
  int64_t layers = 2, width = 1024, heads = 16, batch = 4, time = 64;
  int steps = 5, warmup = 2;
};

tp::nn::Sequential make_blocks(const Settings& s) {
  tp::manual_seed(0);
  tp::nn::Sequential blocks;
  for (int64_t i = 0; i < s.layers; ++i)
    blocks->push_back(tp::nn::TransformerBlock(s.width, s.heads));
  return blocks;
}

// The median step time (ms) of `blocks`, and this thread's collective figures per step.
struct Timing {
  double step_ms = 0;
  tpar::CollectiveFigures per_step;
};

Timing time_steps(tp::nn::Module& blocks, const Settings& s) {
  tp::manual_seed(1);
  const tp::Tensor x = tp::randn({s.batch, s.time, s.width});
  tp::optim::AdamW opt(blocks.parameters());
  std::vector<double> times;
  for (int i = 0; i < s.warmup + s.steps; ++i) {
    if (i == s.warmup) tpar::reset_collective_figures();
    const auto start = std::chrono::steady_clock::now();
    opt.zero_grad();
    tp::mean(tp::square(blocks(x))).backward();
    opt.step();
    times.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
  }
  std::vector<double> timed(times.begin() + s.warmup, times.end());
  std::sort(timed.begin(), timed.end());
  tpar::CollectiveFigures f = tpar::collective_figures();
  f.calls /= s.steps;
  f.bytes /= s.steps;
  f.seconds /= s.steps;
  return {timed[timed.size() / 2], f};
}

int run_rank(const Settings& s, int rank, int port) {
  tp::set_num_threads(1);
  dist::ProcessGroup world =
      dist::join_job({.backend = "ucx", .env = dist::loopback_launch_env(rank, 2, port)});
  tp::nn::Sequential blocks = make_blocks(s);
  tpar::parallelize_module(*blocks, world,
                           {{"*.attn.c_attn", tpar::ColwiseParallel({.packed = 3})},
                            {"*.attn.c_proj", tpar::RowwiseParallel()},
                            {"*.mlp.c_fc", tpar::ColwiseParallel()},
                            {"*.mlp.c_proj", tpar::RowwiseParallel()}});
  const Timing t = time_steps(*blocks, s);
  world.barrier();
  std::cout << "{\"rank\":" << rank << ",\"step_ms\":" << t.step_ms
            << ",\"collectives_per_step\":" << t.per_step.calls
            << ",\"collective_bytes_per_step\":" << t.per_step.bytes
            << ",\"collective_ms_per_step\":" << t.per_step.seconds * 1e3 << "}" << std::endl;
  return 0;
}

// Runs this program as rank `rank`; its last line.
FILE* start_rank(const std::string& self, const Settings& s, int rank, int port) {
  std::ostringstream cmd;
  cmd << self << " --rank " << rank << " --port " << port << " --layers " << s.layers << " --width "
      << s.width << " --heads " << s.heads << " --batch " << s.batch << " --time " << s.time
      << " --steps " << s.steps << " --warmup " << s.warmup;
  return popen(cmd.str().c_str(), "r");
}

std::string last_line(FILE* f) {
  std::string line, last;
  char buffer[4096];
  while (fgets(buffer, sizeof buffer, f) != nullptr) {
    line = buffer;
    if (!line.empty() && line.back() == '\n') line.pop_back();
    if (!line.empty()) last = line;
  }
  return last;
}

double field(const std::string& json, const std::string& key) {
  const auto at = json.find("\"" + key + "\":");
  return at == std::string::npos ? -1.0 : std::stod(json.substr(at + key.size() + 3));
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  int rank = -1, port = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const long long v = std::stoll(argv[i + 1]);
    if (flag == "--rank")
      rank = static_cast<int>(v);
    else if (flag == "--port")
      port = static_cast<int>(v);
    else if (flag == "--layers")
      s.layers = v;
    else if (flag == "--width")
      s.width = v;
    else if (flag == "--heads")
      s.heads = v;
    else if (flag == "--batch")
      s.batch = v;
    else if (flag == "--time")
      s.time = v;
    else if (flag == "--steps")
      s.steps = static_cast<int>(v);
    else if (flag == "--warmup")
      s.warmup = static_cast<int>(v);
    else {
      std::cerr << "unknown flag " << flag << "\n";
      return 2;
    }
  }
  if (rank >= 0) return run_rank(s, rank, port);

  tp::set_num_threads(1);
  tp::nn::Sequential blocks = make_blocks(s);
  const Timing whole = time_steps(*blocks, s);
  std::cout << "{\"run\":\"unsplit\",\"step_ms\":" << whole.step_ms << "}" << std::endl;

  const int tp_port = dist::free_loopback_port();
  const std::string self = argv[0];
  FILE* ranks[2] = {start_rank(self, s, 0, tp_port), start_rank(self, s, 1, tp_port)};
  std::string lines[2];
  for (int r = 0; r < 2; ++r) {
    lines[r] = ranks[r] ? last_line(ranks[r]) : "";
    const int status = ranks[r] ? pclose(ranks[r]) : -1;
    std::cout << lines[r] << std::endl;
    if (status != 0 || field(lines[r], "step_ms") < 0) {
      std::cout << "{\"error\":\"rank " << r << " failed\"}" << std::endl;
      return 1;
    }
  }
  const double split_ms = std::max(field(lines[0], "step_ms"), field(lines[1], "step_ms"));
  const double bytes = field(lines[0], "collective_bytes_per_step");
  const double coll_ms = field(lines[0], "collective_ms_per_step");
  std::cout << "{\"bench\":\"bench_tp_step\",\"ratio\":" << whole.step_ms / split_ms
            << ",\"unsplit_step_ms\":" << whole.step_ms << ",\"tp2_step_ms\":" << split_ms
            << ",\"collective_bytes_per_step_per_rank\":" << bytes
            << ",\"collective_ms_per_step\":" << coll_ms
            << ",\"collective_share\":" << coll_ms / split_ms << ",\"width\":" << s.width
            << ",\"layers\":" << s.layers << ",\"tokens\":" << s.batch * s.time << "}" << std::endl;
  return 0;
}
