// All-reduce backends side by side: host float32 sums of 64 KiB to 16 MiB over 2 and 4 processes
// of this host, through tensorplay's ProcessGroup::all_reduce (the ring over UCX) and through Gloo
// (the library behind PyTorch's CPU backend) over loopback tcp.
//
//   ./build/bench/bench_allreduce_backends [--iterations 20] [--warmup 3] [--procs 2,4]
//
// The benchmark starts its own workers: for each process count, that many copies of itself
// (--worker) with RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR=127.0.0.1 and MASTER_PORT (a free
// port) in their environment, and a fresh directory for Gloo's file store. Each worker joins the
// process group and a Gloo context (connectFullMesh); for each size and backend it makes warm-up
// calls (the first one's sum is checked), meets the others at a barrier, and times calls one by
// one. Rank 0 prints a JSON line per (processes, size, backend): the median and min time of one
// all-reduce and the bus bandwidth, 2(n-1)/n of the bytes over the median time (what each process
// sends in a ring). The backends: "tensorplay" (ours), "gloo" (gloo::allreduce with its default
// algorithm, as PyTorch calls it) and "gloo_ring" (its ring asked for by name). The last line
// holds "ratio", the geometric mean over the cases of Gloo's median over ours (above 1: ours is
// faster), and "ratio_vs_best_gloo", the same against the faster of the two Gloo runs per case.
// Without Gloo (find_package(Gloo) found none at configure time) only ours runs, and the last line
// says so. Every worker is reaped, and killed when it outlives its time.
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tensorplay/distributed/process_group.h"
#include "tensorplay/tensor.h"

#if TENSORPLAY_BENCH_WITH_GLOO
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#endif

namespace tp = tensorplay;
namespace dist = tensorplay::distributed;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int64_t kSizes[] = {64 << 10, 1 << 20, 4 << 20, 16 << 20};  // bytes
constexpr auto kWorkerLimit = std::chrono::seconds(300);  // one process count's whole run
constexpr auto kJoinTimeout = std::chrono::seconds(60);   // rendezvous and each collective

struct Options {
  int iterations = 20;
  int warmup = 3;
  std::vector<int> procs{2, 4};
  std::string store;  // worker: Gloo's file store directory
};

std::vector<int> parse_list(const std::string& text) {
  std::vector<int> out;
  size_t at = 0;
  while (at <= text.size()) {
    size_t comma = text.find(',', at);
    if (comma == std::string::npos) comma = text.size();
    out.push_back(std::stoi(text.substr(at, comma - at)));
    at = comma + 1;
  }
  return out;
}

Options parse(int argc, char** argv, bool& worker) {
  Options o;
  worker = false;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--worker") {
      worker = true;
      continue;
    }
    if (i + 1 >= argc) throw std::invalid_argument("flag " + flag + " needs a value");
    std::string value = argv[++i];
    if (flag == "--iterations") {
      o.iterations = std::stoi(value);
    } else if (flag == "--warmup") {
      o.warmup = std::stoi(value);
    } else if (flag == "--procs") {
      o.procs = parse_list(value);
    } else if (flag == "--store") {
      o.store = value;
    } else {
      throw std::invalid_argument("unknown flag " + flag +
                                  " (known: --iterations N, --warmup N, --procs 2,4)");
    }
  }
  if (o.iterations < 1 || o.warmup < 1)
    throw std::invalid_argument("--iterations and --warmup must be at least 1");
  for (int p : o.procs)
    if (p < 2 || p > 64)
      throw std::invalid_argument("--procs: " + std::to_string(p) + " processes");
  return o;
}

// -- worker ---------------------------------------------------------------------------------------

struct Timing {
  double median_us = 0;
  double min_us = 0;
};

// Times `call` `iterations` times after `warmup` calls; `check` runs after the first call, and
// `barrier` between warm-up and timing.
Timing time_calls(const Options& o, const std::function<void()>& fill,
                  const std::function<void()>& call, const std::function<void()>& check,
                  const std::function<void()>& barrier) {
  fill();
  for (int i = 0; i < o.warmup; ++i) {
    call();
    if (i == 0) check();
  }
  barrier();
  std::vector<double> us;
  for (int i = 0; i < o.iterations; ++i) {
    const auto t0 = Clock::now();
    call();
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  std::sort(us.begin(), us.end());
  return {us[us.size() / 2], us.front()};
}

int worker_main(const Options& o) {
  dist::init_process_group({.backend = "ucx", .timeout = kJoinTimeout});
  const int rank = dist::get_rank(), world = dist::get_world_size();
#if TENSORPLAY_BENCH_WITH_GLOO
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto device = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(o.store);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, world);
  context->setTimeout(kJoinTimeout);
  context->connectFullMesh(store, device);
#endif
  const float want = static_cast<float>(world * (world + 1) / 2);
  for (int64_t bytes : kSizes) {
    const int64_t n = bytes / 4;
    tp::Tensor t = tp::empty({n});
    float* data = t.data<float>();
    auto fill = [&] { std::fill(data, data + n, static_cast<float>(rank + 1)); };
    auto check = [&](const char* backend) {
      for (int64_t i = 0; i < n; ++i)
        if (data[i] != want)
          throw std::runtime_error(std::string(backend) + ": element " + std::to_string(i) +
                                   " of " + std::to_string(n) + " is " + std::to_string(data[i]) +
                                   ", not " + std::to_string(want));
    };
    std::map<std::string, Timing> got;
    got["tensorplay"] = time_calls(
        o, fill, [&] { dist::all_reduce(t); }, [&] { check("tensorplay"); },
        [] { dist::barrier(); });
#if TENSORPLAY_BENCH_WITH_GLOO
    using Algorithm = gloo::AllreduceOptions::Algorithm;
    for (auto [name, algorithm] :
         {std::pair{"gloo", Algorithm::UNSPECIFIED}, std::pair{"gloo_ring", Algorithm::RING}}) {
      auto call = [&, algorithm = algorithm] {
        gloo::AllreduceOptions opts(context);
        opts.setOutput(data, static_cast<size_t>(n));
        opts.setReduceFunction(
            static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
        opts.setAlgorithm(algorithm);
        opts.setTag(1);
        gloo::allreduce(opts);
      };
      auto barrier = [&] {
        gloo::BarrierOptions opts(context);
        opts.setTag(2);
        gloo::barrier(opts);
      };
      got[name] = time_calls(
          o, fill, call, [&, name = name] { check(name); }, barrier);
    }
#endif
    if (rank != 0) continue;
    for (const auto& [backend, timing] : got) {
      const double bus = 2.0 * (world - 1) / world * static_cast<double>(bytes);
      std::printf(
          "{\"procs\":%d,\"bytes\":%lld,\"backend\":\"%s\",\"median_us\":%.1f,\"min_us\":%.1f,"
          "\"busbw_gb_per_s\":%.3f,\"iterations\":%d}\n",
          world, static_cast<long long>(bytes), backend.c_str(), timing.median_us, timing.min_us,
          bus / timing.median_us / 1e3, o.iterations);
    }
    std::fflush(stdout);
  }
  dist::barrier();
  dist::destroy_process_group();
  return 0;
}

// -- driver ---------------------------------------------------------------------------------------

double json_number(const std::string& line, const std::string& key) {
  size_t at = line.find("\"" + key + "\":");
  if (at == std::string::npos) return NAN;
  return std::strtod(line.c_str() + at + key.size() + 3, nullptr);
}

std::string json_string(const std::string& line, const std::string& key) {
  size_t at = line.find("\"" + key + "\":\"");
  if (at == std::string::npos) return {};
  at += key.size() + 4;
  return line.substr(at, line.find('"', at) - at);
}

// Kills the workers still running and reaps them all.
void reap(std::vector<pid_t>& pids, bool kill_first) {
  for (pid_t pid : pids) {
    if (pid <= 0) continue;
    if (kill_first) kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  pids.clear();
}

// In a forked child: rank `rank`'s launcher environment, then this program as a worker.
[[noreturn]] void exec_worker(const Options& o, int rank, int procs, int port,
                              const std::string& dir, const int out[2]) {
  if (rank == 0) dup2(out[1], STDOUT_FILENO);
  close(out[0]);
  close(out[1]);
  setenv("RANK", std::to_string(rank).c_str(), 1);
  setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
  setenv("WORLD_SIZE", std::to_string(procs).c_str(), 1);
  setenv("LOCAL_WORLD_SIZE", std::to_string(procs).c_str(), 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
  // As tp-launch sets them (see tools/tp-launch/rank_environment.cpp): UCX's virtual file
  // system races with the progress thread under load, and its memory hooks outlive UCX.
  setenv("UCX_VFS_ENABLE", "n", 0);
  setenv("UCX_MEM_EVENTS", "no", 0);
  const std::string iterations = std::to_string(o.iterations);
  const std::string warmup = std::to_string(o.warmup);
  execl("/proc/self/exe", "bench_allreduce_backends", "--worker", "--store", dir.c_str(),
        "--iterations", iterations.c_str(), "--warmup", warmup.c_str(),
        static_cast<char*>(nullptr));
  std::perror("exec of the worker failed");
  std::_Exit(127);
}

// Reads what rank 0 wrote to `fd` so far, echoing and keeping each whole line (waits up to 20 ms
// for some); false once the pipe is closed.
bool read_lines(int fd, std::string& pending, std::vector<std::string>& lines) {
  pollfd pfd{fd, POLLIN, 0};
  if (poll(&pfd, 1, 20) <= 0) return true;
  char buffer[4096];
  ssize_t got = read(fd, buffer, sizeof buffer);
  if (got <= 0) return false;
  pending.append(buffer, static_cast<size_t>(got));
  for (size_t nl; (nl = pending.find('\n')) != std::string::npos;) {
    lines.push_back(pending.substr(0, nl));
    std::printf("%s\n", lines.back().c_str());
    std::fflush(stdout);
    pending.erase(0, nl + 1);
  }
  return true;
}

// Reaps the workers that have ended (their pids become 0); returns how the first that failed
// did, or "".
std::string reap_ended(std::vector<pid_t>& pids) {
  std::string failure;
  for (size_t r = 0; r < pids.size(); ++r) {
    int status = 0;
    if (pids[r] == 0 || waitpid(pids[r], &status, WNOHANG) != pids[r]) continue;
    pids[r] = 0;
    if ((!WIFEXITED(status) || WEXITSTATUS(status) != 0) && failure.empty())
      failure = "worker rank " + std::to_string(r) + " failed (" +
                (WIFEXITED(status) ? "exit status " + std::to_string(WEXITSTATUS(status))
                                   : "signal " + std::to_string(WTERMSIG(status))) +
                ")";
  }
  return failure;
}

// Follows the workers `pids` until all have ended and rank 0's output (`fd`) is closed, or one
// fails, or kWorkerLimit passes; returns rank 0's lines and sets `failure`.
std::vector<std::string> watch_workers(int fd, std::vector<pid_t>& pids, std::string& failure) {
  std::vector<std::string> lines;
  std::string pending;
  const auto deadline = Clock::now() + kWorkerLimit;
  bool open = true;
  auto running = [&] { return std::any_of(pids.begin(), pids.end(), [](pid_t p) { return p; }); };
  while ((open || running()) && failure.empty()) {
    if (Clock::now() > deadline) {
      std::string late;
      for (size_t r = 0; r < pids.size(); ++r)
        if (pids[r] != 0) late += (late.empty() ? "" : ", ") + std::to_string(r);
      failure = "worker rank(s) " + late + " of " + std::to_string(pids.size()) +
                " did not finish within " + std::to_string(kWorkerLimit.count()) + " s";
      break;
    }
    if (open)
      open = read_lines(fd, pending, lines);
    else
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    failure = reap_ended(pids);
  }
  return lines;
}

// Runs `procs` workers; returns rank 0's lines. Throws when a worker fails or outlives its time.
std::vector<std::string> run_workers(const Options& o, int procs) {
  char dir_template[] = "/tmp/bench_allreduce_XXXXXX";
  if (mkdtemp(dir_template) == nullptr) throw std::runtime_error("mkdtemp failed");
  const std::string dir = dir_template;
  const int port = dist::free_loopback_port();
  int out[2];
  if (pipe(out) != 0) throw std::runtime_error("pipe failed");
  std::fflush(stdout);
  std::vector<pid_t> pids;
  for (int rank = 0; rank < procs; ++rank) {
    pid_t pid = fork();
    if (pid < 0) {
      reap(pids, true);
      throw std::runtime_error("fork failed");
    }
    if (pid == 0) exec_worker(o, rank, procs, port, dir, out);
    pids.push_back(pid);
  }
  close(out[1]);
  std::string failure;
  std::vector<std::string> lines = watch_workers(out[0], pids, failure);
  close(out[0]);
  reap(pids, !failure.empty());
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  if (!failure.empty()) throw std::runtime_error(failure);
  return lines;
}

int driver_main(const Options& o) {
  // (procs, bytes) -> backend -> median
  std::map<std::pair<int, int64_t>, std::map<std::string, double>> medians;
  for (int procs : o.procs)
    for (const std::string& line : run_workers(o, procs))
      medians[{procs, static_cast<int64_t>(json_number(line, "bytes"))}]
             [json_string(line, "backend")] = json_number(line, "median_us");
  double log_sum = 0, log_sum_best = 0, worst = INFINITY, best = 0;
  int cases = 0;
  for (const auto& [key, by_backend] : medians) {
    auto ours = by_backend.find("tensorplay"), gloo = by_backend.find("gloo"),
         ring = by_backend.find("gloo_ring");
    if (ours == by_backend.end() || gloo == by_backend.end()) continue;
    const double ratio = gloo->second / ours->second;
    double fastest = gloo->second;
    if (ring != by_backend.end()) fastest = std::min(fastest, ring->second);
    log_sum += std::log(ratio);
    log_sum_best += std::log(fastest / ours->second);
    worst = std::min(worst, ratio);
    best = std::max(best, ratio);
    ++cases;
  }
  if (cases == 0) {
    std::printf(
        "{\"bench\":\"bench_allreduce_backends\",\"ratio\":null,\"gloo\":\"not found (Gloo was "
        "not found when the build was configured: install libgloo-dev and configure again)\"}\n");
    return 0;
  }
  std::printf(
      "{\"bench\":\"bench_allreduce_backends\",\"ratio\":%.3f,\"ratio_vs_best_gloo\":%.3f,"
      "\"worst_case_ratio\":%.3f,\"best_case_ratio\":%.3f,\"cases\":%d,\"iterations\":%d}\n",
      std::exp(log_sum / cases), std::exp(log_sum_best / cases), worst, best, cases, o.iterations);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    bool worker = false;
    Options o = parse(argc, argv, worker);
    if (worker) return worker_main(o);
#if !TENSORPLAY_BENCH_WITH_GLOO
    std::fprintf(stderr, "bench_allreduce_backends: built without Gloo; timing ours only\n");
#endif
    return driver_main(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_allreduce_backends: %s\n", e.what());
    return 1;
  }
}
