// bench_reshard: loading a layout-free checkpoint
// (tensorplay/pipelining/checkpoints/named_checkpoint.h) of train_gpt's GPT, written by pp 4 (four
// writers), into pp 2 x dp 2 against loading it into pp 4, the layout that wrote it; also a
// checkpoint written by pp 2 into pp 2 x dp 2, and reading the same files with `cat > /dev/null`.
// Each load runs as a job would: its ranks (4 here) join one job in this process
// (distributed::join_job on loopback, one thread each, each its own actor system and UCX worker),
// then load at once, the replicas of a stage splitting the reading and exchanging their shares
// (tensorplay/pipelining/runtime/group_replica_exchange.h); a load's time is the wall time from the first
// rank's start to the last rank's end (joining and connecting before it not counted). Prints one
// JSON line per measurement, the last with "bench" and "ratio" (resharded load time over
// same-layout load time). Cold (the default): before each load and the cat the files are written
// back and dropped from the page cache (posix_fadvise DONTNEED; a line says how many pages stayed
// resident), so they are read from storage; then the same warm (files read once before), as
// "ratio_warm" and the fields ending in "_warm". `--warm`: warm only. Two more jobs only fill the
// state their ranks hold (no files): a floor for any load of each layout.
//
//   bench_reshard            # a small GPT (about 0.8 M parameters): seconds
//   bench_reshard --warm     # only with the files in the page cache
//   bench_reshard --large    # about 100 M parameters (width 768, 14 blocks): ~6 GB
//   bench_reshard --width 256 --layers 8   # another size (heads: 4, or 12 with --large)
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "page_cache.h"
#include "tensorplay/pipelining/runtime/group_replica_exchange.h"
#include "tensorplay/distributed/launch_env.h"
#include "tensorplay/distributed/process_group.h"
#include "tensorplay/pipelining/build_stage.h"
#include "tensorplay/pipelining/checkpoints/checkpoint_io.h"
#include "tensorplay/pipelining/checkpoints/named_checkpoint.h"
#include "tensorplay/pipelining/pipeline.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;
namespace dist = tensorplay::distributed;
namespace fs = std::filesystem;

namespace {

using Stages = std::vector<std::shared_ptr<pp::PipelineStage>>;
using Clock = std::chrono::steady_clock;
constexpr int64_t kVocab = 96, kContext = 64;

tp::nn::GPTConfig config(int64_t width, int64_t layers, int64_t heads) {
  return {.vocab_size = kVocab,
          .context_length = kContext,
          .n_layer = layers,
          .n_head = heads,
          .width = width};
}

// The stages of a fresh GPT (seed 1) split into `stages` at blocks; they hold its tensors.
Stages split(const tp::nn::GPTConfig& cfg, int stages) {
  tp::manual_seed(1);
  auto model = tp::nn::GPT(cfg);
  pp::PipelineOptions options;
  for (int s = 1; s < stages; ++s)
    options.split_spec["blocks." + std::to_string(s * cfg.n_layer / stages)] =
        pp::SplitPoint::Beginning;
  return pp::build_stages(pp::pipeline(model, {tp::zeros({1, kContext})}, options), {tp::cpu()});
}

// Writes step 1 of `stages` under `dir`, one writer per stage, with AdamW state.
void write(const std::string& dir, const Stages& stages, const std::string& layout) {
  for (const auto& stage : stages) {
    tp::optim::AdamW opt(pp::parameters({stage}));
    for (tp::Tensor p : opt.parameters()) p.set_grad(tp::zeros_like(p));
    opt.step();
    pp::save_named_checkpoint(dir, {stage}, opt, 1, {.layout = layout});
  }
}

// What a job's load took: wall seconds from the first rank's start to the last one's end, and
// the bytes all ranks read from the files.
struct Timed {
  double seconds = 0;
  uint64_t bytes_read = 0;
};

// What any load must do at least, files aside: fill fresh memory with the state a rank holds
// (its parameters' values and two AdamW moments each) and copy the values into the parameters.
void fill_state(const std::shared_ptr<pp::PipelineStage>& stage) {
  tp::NoGradGuard no_grad;
  std::vector<tp::Tensor> state;
  for (tp::Tensor p : pp::parameters({stage})) {
    for (int k = 0; k < 3; ++k) state.push_back(tp::zeros_like(p));
    p.copy_(state[state.size() - 3]);
  }
}

// One rank of a {pp, dp} job: joins, waits for the others, loads its stage (its replicas
// splitting the reading; with no `dir`, only fills its state: fill_state), and leaves once all
// are done.
void run_rank(const std::string& dir, int rank, int pp_size, int dp, int port,
              const std::shared_ptr<pp::PipelineStage>& stage, Clock::time_point& start,
              Clock::time_point& end, uint64_t& bytes) {
  const dist::ProcessGroup world =
      dist::join_job({.backend = "ucx",
                      .timeout = std::chrono::minutes(5),
                      .env = dist::loopback_launch_env(rank, pp_size * dp, port)});
  const dist::DeviceMesh job = world;
  stage->set_mesh(dist::DeviceMesh("cpu", {pp_size, dp}, {"pp", "dp"}, rank).with_job(job.job()));
  tp::optim::AdamW opt(pp::parameters({stage}));
  // Connections are part of joining, not of loading: the dp group's (its id, UCX wireup) first.
  const dist::ProcessGroup replicas(stage->get_mesh()["dp"]);
  replicas.all_gather_tensors({tp::zeros({1})});
  world.barrier();
  start = Clock::now();
  if (dir.empty()) {
    fill_state(stage);
    end = Clock::now();
    world.barrier();
    return;
  }
  bytes = pp::load_named_checkpoint(dir, {stage}, opt, std::nullopt,
                                    {.replicas = pp::replica_exchange(Stages{stage})})
              .bytes_read;
  end = Clock::now();
  world.barrier();
}

// Loads `dir` into a pp x dp job of this process's threads (no `dir`: fills the state only).
Timed load_job(const std::string& dir, const tp::nn::GPTConfig& cfg, int pp_size, int dp) {
  const int world = pp_size * dp;
  std::vector<Stages> replicas;
  for (int d = 0; d < dp; ++d) replicas.push_back(split(cfg, pp_size));
  std::vector<Clock::time_point> starts(world), ends(world);
  std::vector<uint64_t> bytes(world, 0);
  std::vector<std::string> errors(world);
  const int port = dist::free_loopback_port();
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        run_rank(dir, r, pp_size, dp, port, replicas[r % dp][r / dp], starts[r], ends[r], bytes[r]);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r)
    if (!errors[r].empty())
      throw std::runtime_error("rank " + std::to_string(r) + ": " + errors[r]);
  Timed out;
  out.seconds = std::chrono::duration<double>(*std::max_element(ends.begin(), ends.end()) -
                                              *std::min_element(starts.begin(), starts.end()))
                    .count();
  for (uint64_t b : bytes) out.bytes_read += b;
  return out;
}

uint64_t folder_bytes(const std::string& folder) {
  uint64_t bytes = 0;
  for (const auto& entry : fs::directory_iterator(folder)) bytes += entry.file_size();
  return bytes;
}

double cat_seconds(const std::string& step) {
  const auto t0 = Clock::now();
  const std::string cat = "cat " + step + "/* > /dev/null";
  if (std::system(cat.c_str()) != 0)
    std::fprintf(stderr, "bench_reshard: '%s' failed\n", cat.c_str());
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Cold: drops `dir`'s files from the page cache and prints how many of their pages stayed
// resident (mincore); false when more than a tenth did (the drop did not take). Warm: reads
// them once, untimed, so they are resident.
bool prepare(const std::string& dir, bool cold) {
  if (!cold) {
    const std::string read = "find " + dir + " -type f -exec cat {} + > /dev/null";
    if (std::system(read.c_str()) != 0)
      std::fprintf(stderr, "bench_reshard: '%s' failed\n", read.c_str());
    return true;
  }
  const bench::Residency before = bench::residency(dir);
  bench::drop_from_page_cache(dir);
  const bench::Residency after = bench::residency(dir);
  const bool dropped = after.fraction() <= 0.1;
  std::printf(
      "{\"phase\":\"page cache dropped\",\"dir\":\"%s\",\"pages\":%llu,\"resident_before\":%llu,"
      "\"resident_after\":%llu,\"took_effect\":%s}\n",
      fs::path(dir).filename().c_str(), static_cast<unsigned long long>(after.pages),
      static_cast<unsigned long long>(before.resident),
      static_cast<unsigned long long>(after.resident), dropped ? "true" : "false");
  std::fflush(stdout);
  return dropped;
}

void print_phase(const char* phase, const char* mode, const Timed& t) {
  std::printf("{\"phase\":\"%s\",\"mode\":\"%s\",\"seconds\":%.4f,\"bytes_read\":%llu}\n", phase,
              mode, t.seconds, static_cast<unsigned long long>(t.bytes_read));
  std::fflush(stdout);
}

// One mode's loads and cat, each after prepare(): cold (files dropped) or warm.
struct Figures {
  Timed same, resharded, same_target;
  double cat = 0;
  bool dropped = true;
  double ratio() const { return resharded.seconds / same.seconds; }
};

Figures measure(const std::string& root, const tp::nn::GPTConfig& cfg, bool cold) {
  const char* mode = cold ? "cold" : "warm";
  const std::string pp4 = root + "/pp4", pp2 = root + "/pp2";
  Figures f;
  f.dropped &= prepare(pp4, cold);
  print_phase("pp4 -> pp4", mode, f.same = load_job(pp4, cfg, 4, 1));
  f.dropped &= prepare(pp4, cold);
  print_phase("pp4 -> pp2 x dp2", mode, f.resharded = load_job(pp4, cfg, 2, 2));
  f.dropped &= prepare(pp2, cold);
  print_phase("pp2 -> pp2 x dp2", mode, f.same_target = load_job(pp2, cfg, 2, 2));
  f.dropped &= prepare(pp4, cold);
  f.cat = cat_seconds(pp::checkpoint_io::step_folder(pp4, 1));
  std::printf("{\"phase\":\"cat > /dev/null\",\"mode\":\"%s\",\"seconds\":%.4f}\n", mode, f.cat);
  return f;
}

// ",\"<name><suffix>\":<value>" for each of a mode's figures.
std::string figure_fields(const Figures& f, const std::string& suffix) {
  char text[512];
  std::snprintf(text, sizeof text,
                ",\"same_layout_seconds%s\":%.4f,\"resharded_seconds%s\":%.4f,"
                "\"same_target_seconds%s\":%.4f,\"cat_seconds%s\":%.4f,\"ratio_same_target%s\":"
                "%.3f,\"ratio_cat%s\":%.3f",
                suffix.c_str(), f.same.seconds, suffix.c_str(), f.resharded.seconds, suffix.c_str(),
                f.same_target.seconds, suffix.c_str(), f.cat, suffix.c_str(),
                f.resharded.seconds / f.same_target.seconds, suffix.c_str(),
                f.resharded.seconds / f.cat);
  return text;
}

// Writes step 1 of a GPT of `cfg` under root/pp4 (by pp 4) and root/pp2 (by pp 2); returns its
// parameter count (a tied weight once).
int64_t write_both(const std::string& root, const tp::nn::GPTConfig& cfg) {
  int64_t parameters = 0;
  const Stages pp4 = split(cfg, 4);
  std::set<std::string> seen;
  for (const auto& stage : pp4)
    for (const auto& [name, p] : stage->module().named_parameters())
      if (seen.insert(name).second) parameters += p.numel();
  write(root + "/pp4", pp4, "pp 4 x dp 1");
  write(root + "/pp2", split(cfg, 2), "pp 2 x dp 1");
  return parameters;
}

// Both modes (only warm with `warm_only`), the floors, and the last line.
void run_all(const std::string& root, const tp::nn::GPTConfig& cfg, int64_t parameters,
             uint64_t bytes, bool warm_only) {
  std::optional<Figures> cold;
  if (!warm_only) cold = measure(root, cfg, true);
  const Figures warm = measure(root, cfg, false);
  const Timed floor_same = load_job("", cfg, 4, 1);
  const Timed floor_resharded = load_job("", cfg, 2, 2);
  print_phase("pp4 state filled, no files", "none", floor_same);
  print_phase("pp2 x dp2 state filled, no files", "none", floor_resharded);
  const Figures& main_mode = cold ? *cold : warm;
  std::printf(
      "{\"bench\":\"bench_reshard\",\"parameters\":%lld,\"bytes\":%llu,\"mode\":\"%s\","
      "\"cold_drop_took_effect\":%s,\"ratio\":%.3f,\"ratio_warm\":%.3f,\"ratio_floor\":%.3f%s%s}\n",
      static_cast<long long>(parameters), static_cast<unsigned long long>(bytes),
      cold ? "cold" : "warm", cold ? (cold->dropped ? "true" : "false") : "null", main_mode.ratio(),
      warm.ratio(), floor_resharded.seconds / floor_same.seconds,
      figure_fields(main_mode, "").c_str(), cold ? figure_fields(warm, "_warm").c_str() : "");
}

}  // namespace

int main(int argc, char** argv) {
  int64_t width = 128, layers = 4, heads = 4;
  bool warm_only = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--large") {
      width = 768, layers = 14, heads = 12;
    } else if (arg == "--warm") {
      warm_only = true;
    } else if ((arg == "--width" || arg == "--layers") && i + 1 < argc) {
      (arg == "--width" ? width : layers) = std::atoll(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: bench_reshard [--large] [--warm] [--width W] [--layers L]\n");
      return 2;
    }
  }
  const std::string root =
      (fs::temp_directory_path() / ("bench_reshard_" + std::to_string(::getpid()))).string();
  fs::remove_all(root);
  const tp::nn::GPTConfig cfg = config(width, layers, heads);
  const int64_t parameters = write_both(root, cfg);
  const uint64_t bytes = folder_bytes(pp::checkpoint_io::step_folder(root + "/pp4", 1));
  std::printf("{\"phase\":\"written\",\"parameters\":%lld,\"bytes\":%llu}\n",
              static_cast<long long>(parameters), static_cast<unsigned long long>(bytes));
  std::fflush(stdout);
  try {
    run_all(root, cfg, parameters, bytes, warm_only);
  } catch (const std::exception& e) {
    fs::remove_all(root);
    std::fprintf(stderr, "bench_reshard: %s\n", e.what());
    return 1;
  }
  fs::remove_all(root);
  return 0;
}
