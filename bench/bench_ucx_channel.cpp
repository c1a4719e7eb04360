// bench_ucx_channel: UcxChannel between two processes against raw UCX tag messages (ucx_raw_tag,
// run from this program's folder in the same run, the same sizes and rounds): bandwidth of 1 MiB
// and 64 MiB tensors, round trip of 4 KiB. Both endpoint error modes are measured, each against
// raw UCX in the same mode: "none" (the runtime's mode between ranks of one host: shared memory
// and CMA) and "peer" (its mode between hosts; loopback TCP on one host with UCX 1.13). Prints
// JSON lines; the last holds "bench":"bench_ucx_channel", the ratios of mode "none" (ours/raw
// for bandwidth, raw/ours for the round trip, so higher is better everywhere), "ratio" (the
// smallest of them, with the round trip whose reply is sent from the receive callback, as the
// runtime's receives complete), and the same figures of mode "peer" prefixed "peer_". The round
// trip through the blocking receive is reported too. Each process runs on a core of its own, on
// both sides (two processes polling on one core would take turns at the scheduler's pace).
//
//   bench_ucx_channel [repeats]   (alternates raw and channel runs, keeps each one's best; 2)
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensorplay/tensor.h"
#include "tensorplay/transport/ucx_channel.h"
#include "two_processes.h"

namespace tp = tensorplay;
namespace tr = tensorplay::transport;

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

struct Figures {
  double bw_1mib = 0;            // GiB/s
  double bw_64mib = 0;           // GiB/s
  double rtt_4kib = 0;           // us, a caller waiting for each reply
  double rtt_4kib_callback = 0;  // us, replies sent from the receive callbacks (channel only)
};

// Counts completed receives; wait() is bounded and rethrows the first error. The waiter is woken
// once, when its count is reached, not for every receive.
class Completions {
 public:
  tr::ReceiveDone callback() {
    return [this](std::vector<tp::Tensor>, std::string error) {
      std::lock_guard lock(mutex_);
      if (!error.empty() && error_.empty()) error_ = error;
      if (++count_ >= waiting_for_ || !error_.empty()) cv_.notify_all();
    };
  }
  void wait(int count) {
    std::unique_lock lock(mutex_);
    waiting_for_ = count;
    if (!cv_.wait_for(lock, 60s, [&] { return count_ >= count || !error_.empty(); }))
      throw std::runtime_error("receives did not complete within 60 s");
    if (!error_.empty()) throw std::runtime_error(error_);
    count_ -= count;
    waiting_for_ = 1;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  int count_ = 0;
  int waiting_for_ = 1;
  std::string error_;
};

tp::Shape floats(size_t bytes) { return {static_cast<int64_t>(bytes / 4)}; }

// Rounds of `messages` tensors of `size` bytes from rank 0 to rank 1; each round starts when the
// receiver, its receives posted, says go. Returns GiB/s at rank 1 (0 at rank 0).
double bandwidth(tr::UcxChannel& channel, int rank, size_t size, int messages, int warmup,
                 int rounds, uint64_t first_step) {
  const tp::Tensor go = tp::ones({1});
  auto go_tag = [&](int round) { return tr::TransferKey{0, (first_step + round) << 21}; };
  auto data_tag = [&](int round, int i) {
    return tr::TransferKey{0, (first_step + round) << 21 | static_cast<uint64_t>(i) << 1 | 1};
  };
  if (rank == 0) {
    const tp::Tensor data = tp::full(floats(size), 1.0f);
    for (int round = 0; round < warmup + rounds; ++round) {
      channel.receive(1, go_tag(round), {tr::describe(go)}, tp::cpu(), 30s);
      for (int i = 0; i < messages; ++i) channel.send(1, data_tag(round, i), {data});
    }
    return 0;
  }
  const std::vector<tr::TensorDescriptor> descriptors{{floats(size), tp::DType::Float32, size}};
  Completions completions;
  Clock::duration measured{};
  for (int round = 0; round < warmup + rounds; ++round) {
    for (int i = 0; i < messages; ++i)
      channel.post_receive(0, data_tag(round, i), descriptors, tp::cpu(), 30s,
                           completions.callback());
    const Clock::time_point start = Clock::now();
    channel.send(0, go_tag(round), {go});
    completions.wait(messages);
    if (round >= warmup) measured += Clock::now() - start;
  }
  const double bytes = double(size) * messages * rounds;
  return bytes / std::chrono::duration<double>(measured).count() / double(1 << 30);
}

// Ping-pong of `size` bytes with the caller waiting for each reply, as raw UCX does it: rank 0
// posts the receive of the reply, sends, and waits. Returns microseconds per round trip at rank 0.
double round_trip(tr::UcxChannel& channel, int rank, size_t size, int warmup, int iterations,
                  uint64_t first_step) {
  const tp::Tensor out = tp::full(floats(size), 2.0f);
  const std::vector<tr::TensorDescriptor> descriptors{tr::describe(out)};
  Completions completions;
  Clock::time_point start;
  for (int i = 0; i < warmup + iterations; ++i) {
    if (i == warmup) start = Clock::now();
    const tr::TransferKey ping{0, (first_step + i) << 1};
    const tr::TransferKey pong{0, (first_step + i) << 1 | 1};
    if (rank == 0) {
      channel.post_receive(1, pong, descriptors, tp::cpu(), 10s, completions.callback());
      channel.send(1, ping, {out});
      completions.wait(1);
    } else {
      channel.send(0, pong, channel.receive(0, ping, descriptors, tp::cpu(), 10s));
    }
  }
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count() / iterations;
}

// The same ping-pong driven from the receive callbacks on the progress thread: what the channel
// itself costs, without waking a waiting caller for each message.
double round_trip_in_callbacks(tr::UcxChannel& channel, int rank, size_t size, int warmup,
                               int iterations, uint64_t first_step) {
  const tp::Tensor out = tp::full(floats(size), 2.0f);
  const std::vector<tr::TensorDescriptor> descriptors{tr::describe(out)};
  const int total = warmup + iterations;
  auto ping = [&](int i) { return tr::TransferKey{0, (first_step + i) << 1}; };
  auto pong = [&](int i) { return tr::TransferKey{0, (first_step + i) << 1 | 1}; };
  Completions finished;
  tr::ReceiveDone all_done = finished.callback();
  Clock::time_point start;
  std::function<void(int)> post = [&](int i) {
    if (rank == 0) {
      channel.post_receive(1, pong(i), descriptors, tp::cpu(), 10s,
                           [&, i](std::vector<tp::Tensor>, std::string error) {
                             if (!error.empty() || i + 1 == total) return all_done({}, error);
                             if (i + 1 == warmup) start = Clock::now();
                             post(i + 1);
                             channel.send(1, ping(i + 1), {out});
                           });
    } else {
      channel.post_receive(0, ping(i), descriptors, tp::cpu(), 10s,
                           [&, i](std::vector<tp::Tensor> tensors, std::string error) {
                             if (!error.empty()) return all_done({}, error);
                             channel.send(0, pong(i), std::move(tensors));
                             if (i + 1 == total) return all_done({}, {});
                             post(i + 1);
                           });
    }
  };
  post(0);
  if (rank == 0) channel.send(1, ping(0), {out});
  finished.wait(1);
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count() / iterations;
}

// Both processes' side of the channel measurement; rank 0 gets the figures.
int channel_side(int rank, int fd, Figures* figures) {
  tr::UcxChannel channel(rank, 2);
  bench::write_blob(fd, channel.address());
  std::vector<std::vector<uint8_t>> addresses(2);
  addresses[rank] = channel.address();
  addresses[1 - rank] = bench::read_blob(fd);
  channel.connect(addresses);

  Figures f;
  // The sizes, messages per round and rounds of ucx_raw_tag.
  f.bw_1mib = bandwidth(channel, rank, 1 << 20, 64, 2, 8, 0);
  f.bw_64mib = bandwidth(channel, rank, 64 << 20, 2, 2, 8, 100);
  f.rtt_4kib = round_trip(channel, rank, 4096, 500, 5000, 1000);
  f.rtt_4kib_callback = round_trip_in_callbacks(channel, rank, 4096, 500, 5000, 10000);
  if (rank == 1) {  // the receiver measured the bandwidth: hand it to rank 0
    bench::write_all(fd, &f, sizeof f);
    return 0;
  }
  Figures receiver;
  bench::read_all(fd, &receiver, sizeof receiver);
  f.bw_1mib = receiver.bw_1mib;
  f.bw_64mib = receiver.bw_64mib;
  *figures = f;
  return 0;
}

Figures run_channel(const std::string& mode) {
  setenv("TENSORPLAY_UCX_ERROR_MODE", mode.c_str(), 1);
  Figures figures;
  if (bench::run_two_processes([&](int rank, int fd) { return channel_side(rank, fd, &figures); },
                               std::chrono::seconds(120), /*pin=*/true))
    throw std::runtime_error("the channel measurement failed");
  std::printf(
      "{\"channel\":\"ucx\",\"error_mode\":\"%s\",\"bw_1mib_gib_per_s\":%.3f,"
      "\"bw_64mib_gib_per_s\":%.3f,\"rtt_4kib_us\":%.2f,\"rtt_4kib_callback_us\":%.2f}\n",
      mode.c_str(), figures.bw_1mib, figures.bw_64mib, figures.rtt_4kib, figures.rtt_4kib_callback);
  return figures;
}

double json_number(const std::string& line, const std::string& key) {
  const size_t at = line.find("\"" + key + "\":");
  if (at == std::string::npos) throw std::runtime_error("ucx_raw_tag printed no " + key);
  return std::strtod(line.c_str() + at + key.size() + 3, nullptr);
}

// Runs ucx_raw_tag (next to this executable), echoes its lines, reads its last one.
Figures run_raw(const std::string& mode) {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) throw std::runtime_error("cannot find this executable's folder");
  std::string path(self, static_cast<size_t>(n));
  path = path.substr(0, path.rfind('/') + 1) + "ucx_raw_tag";
  std::fflush(stdout);
  FILE* pipe = popen(("'" + path + "' " + mode).c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("cannot run " + path);
  std::string last;
  char line[4096];
  while (std::fgets(line, sizeof line, pipe) != nullptr) {
    std::fputs(line, stdout);
    last = line;
  }
  if (pclose(pipe) != 0 || last.empty())
    throw std::runtime_error(path + " failed (build the ucx_raw_tag target next to this one)");
  return {json_number(last, "bw_1mib_gib_per_s"), json_number(last, "bw_64mib_gib_per_s"),
          json_number(last, "rtt_4kib_us"), 0};
}

Figures best(const Figures& a, const Figures& b) {
  auto faster = [](double x, double y) { return x == 0 ? y : y == 0 ? x : std::min(x, y); };
  return {std::max(a.bw_1mib, b.bw_1mib), std::max(a.bw_64mib, b.bw_64mib),
          faster(a.rtt_4kib, b.rtt_4kib), faster(a.rtt_4kib_callback, b.rtt_4kib_callback)};
}

std::string cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

}  // namespace

// The figures of one error mode, ours against raw, as JSON fields named with `prefix`.
std::string comparison(const std::string& prefix, const Figures& raw, const Figures& ours,
                       double* ratio) {
  const double bw_1mib_ratio = ours.bw_1mib / raw.bw_1mib;
  const double bw_64mib_ratio = ours.bw_64mib / raw.bw_64mib;
  const double rtt_ratio = raw.rtt_4kib / ours.rtt_4kib;
  const double rtt_callback_ratio = raw.rtt_4kib / ours.rtt_4kib_callback;
  // The runtime's receives complete through callbacks: that round trip is the one held to goal.
  *ratio = std::min({bw_1mib_ratio, bw_64mib_ratio, rtt_callback_ratio});
  char text[1024];
  const char* p = prefix.c_str();
  std::snprintf(text, sizeof text,
                "\"%sraw_bw_1mib_gib_per_s\":%.3f,\"%sbw_1mib_gib_per_s\":%.3f,"
                "\"%sbw_1mib_ratio\":%.3f,\"%sraw_bw_64mib_gib_per_s\":%.3f,"
                "\"%sbw_64mib_gib_per_s\":%.3f,\"%sbw_64mib_ratio\":%.3f,"
                "\"%sraw_rtt_4kib_us\":%.2f,\"%srtt_4kib_us\":%.2f,\"%srtt_4kib_ratio\":%.3f,"
                "\"%srtt_4kib_callback_us\":%.2f,\"%srtt_4kib_callback_ratio\":%.3f",
                p, raw.bw_1mib, p, ours.bw_1mib, p, bw_1mib_ratio, p, raw.bw_64mib, p,
                ours.bw_64mib, p, bw_64mib_ratio, p, raw.rtt_4kib, p, ours.rtt_4kib, p, rtt_ratio,
                p, ours.rtt_4kib_callback, p, rtt_callback_ratio);
  return text;
}

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::max(1, std::atoi(argv[1])) : 2;
  try {
    // "none" is the runtime's mode between ranks of one host (shared memory), "peer" between
    // hosts (UCX 1.13: loopback TCP when measured on one host).
    const std::string modes[2] = {"none", "peer"};
    Figures raw[2], ours[2];
    for (int r = 0; r < repeats; ++r) {
      for (int m = 0; m < 2; ++m) {
        raw[m] = best(raw[m], run_raw(modes[m]));
        ours[m] = best(ours[m], run_channel(modes[m]));
      }
    }
    double ratio = 0, peer_ratio = 0;
    const std::string none_fields = comparison("", raw[0], ours[0], &ratio);
    const std::string peer_fields = comparison("peer_", raw[1], ours[1], &peer_ratio);
    std::printf(
        "{\"bench\":\"bench_ucx_channel\",\"cpu\":\"%s\",\"repeats\":%d,\"error_mode\":\"none\","
        "%s,\"ratio\":%.3f,%s,\"peer_ratio\":%.3f}\n",
        cpu_model().c_str(), repeats, none_fields.c_str(), ratio, peer_fields.c_str(), peer_ratio);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_ucx_channel: %s\n", e.what());
    return 1;
  }
}
