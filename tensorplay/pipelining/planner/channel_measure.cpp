// The UCX channels' ping-pong (channel_measure.h).
#include "tensorplay/pipelining/planner/channel_measure.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <future>
#include <memory>
#include <stdexcept>
#include <thread>

#include "tensorplay/tensor.h"
#include "tensorplay/transport/tensor_descriptor.h"
#include "tensorplay/transport/transfer_key.h"
#include "tensorplay/transport/ucx_channel.h"

namespace tensorplay::pipelining {
namespace {

using Clock = std::chrono::steady_clock;
using transport::UcxChannel;

// Ranks 0 and 1 of a world of two in this process, connected over loopback.
struct ChannelPair {
  UcxChannel rank0, rank1;
  explicit ChannelPair(const UcxChannelSpec& spec)
      : rank0(0, 2, {.transports = spec.transports}), rank1(1, 2, {.transports = spec.transports}) {
    const std::vector<std::vector<uint8_t>> addresses{rank0.address(), rank1.address()};
    const std::vector<bool> same_host(2, spec.same_host);
    rank0.connect(addresses, same_host);
    rank1.connect(addresses, same_host);
  }
};

// What a round trip ends with: empty, or the error of either leg (the first one told).
struct RoundTrip {
  std::promise<std::string> done;
  std::atomic<bool> told{false};
  void finish(std::string error) {
    if (!told.exchange(true)) done.set_value(std::move(error));
  }
};

// Seconds of one round trip of `t`: rank 0 sends it under `key`, rank 1 echoes what it receives
// under `key + 1`. Both receives are posted first, as the runtime posts on a notification.
double round_trip(ChannelPair& pair, const Tensor& t, uint64_t key,
                  const PingPongOptions& options) {
  const transport::TransferKey there{.stream = 1, .key = key}, back{.stream = 1, .key = key + 1};
  const std::vector<transport::TensorDescriptor> descriptors{transport::describe(t)};
  auto trip = std::make_shared<RoundTrip>();
  std::future<std::string> finished = trip->done.get_future();
  pair.rank0.post_receive(
      1, back, descriptors, cpu(), options.timeout,
      [trip](std::vector<Tensor>, std::string error) { trip->finish(std::move(error)); });
  UcxChannel& echo = pair.rank1;
  pair.rank1.post_receive(0, there, descriptors, cpu(), options.timeout,
                          [trip, &echo, back](std::vector<Tensor> got, std::string error) {
                            if (!error.empty()) return trip->finish("the echo failed: " + error);
                            try {
                              echo.send(0, back, std::move(got));  // on its progress thread
                            } catch (const std::exception& e) {
                              trip->finish(std::string("the echo failed: ") + e.what());
                            }
                          });
  const auto start = Clock::now();
  pair.rank0.send(1, there, {t});
  if (finished.wait_for(options.timeout) != std::future_status::ready)
    throw std::runtime_error("no answer within " + std::to_string(options.timeout.count()) + " ms");
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const std::string error = finished.get();
  if (!error.empty()) throw std::runtime_error(error);
  return seconds;
}

// One-way seconds for `bytes`: half the median of options.rounds round trips after a warm-up.
double one_way(ChannelPair& pair, size_t bytes, uint64_t& key, const PingPongOptions& options) {
  const Tensor t = zeros({static_cast<int64_t>(std::max<size_t>(1, bytes / sizeof(float)))});
  std::vector<double> trips;
  for (int r = 0; r <= std::max(1, options.rounds); ++r) {
    std::this_thread::sleep_for(options.pause);
    const double seconds = round_trip(pair, t, key, options);
    key += 2;
    if (r > 0) trips.push_back(seconds);  // the first wires the endpoints up
  }
  std::nth_element(trips.begin(), trips.begin() + trips.size() / 2, trips.end());
  return trips[trips.size() / 2] / 2;
}

}  // namespace

std::vector<UcxChannelSpec> default_ucx_channels() {
  return {{.kind = "ucx_shm", .transports = "shm", .same_host = true},
          {.kind = "ucx_tcp", .transports = "tcp", .same_host = false}};
}

ChannelProfile measure_ucx_channel(const UcxChannelSpec& spec, const PingPongOptions& options) {
  if (options.large_bytes <= options.small_bytes)
    throw std::invalid_argument(
        "measure_ucx_channel: the large size (" + std::to_string(options.large_bytes) +
        " bytes) must exceed the small one (" + std::to_string(options.small_bytes) + ")");
  ChannelPair pair(spec);
  uint64_t key = 0;
  const double small = one_way(pair, options.small_bytes, key, options);
  const double large = one_way(pair, options.large_bytes, key, options);
  const double extra = static_cast<double>(options.large_bytes - options.small_bytes);
  // A large transfer no slower than a small one (noise): its bytes over its whole time.
  const double bandwidth =
      large > small ? extra / (large - small) : static_cast<double>(options.large_bytes) / large;
  const double latency =
      std::max(small - static_cast<double>(options.small_bytes) / bandwidth, small / 2);
  return {spec.kind, latency, bandwidth};
}

std::vector<ChannelProfile> measure_ucx_channels(const std::vector<UcxChannelSpec>& specs,
                                                 const PingPongOptions& options,
                                                 const ChannelNote& note) {
  std::vector<ChannelProfile> measured;
  for (const UcxChannelSpec& spec : specs) {
    try {
      measured.push_back(measure_ucx_channel(spec, options));
    } catch (const std::exception& e) {
      const std::string line = "profile: channel " + spec.kind + " (UCX transports '" +
                               spec.transports + "') left out: " + e.what();
      if (note)
        note(line);
      else
        std::fprintf(stderr, "%s\n", line.c_str());
    }
  }
  return measured;
}

}  // namespace tensorplay::pipelining
