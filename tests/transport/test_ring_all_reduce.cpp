// Tests for ring_all_reduce.h: 2, 3 and 4 UcxChannels in one process, one thread per member, sum
// float32 and bfloat16 tensors of many sizes exactly and alike; calls and streams stay apart; a
// missing member, mismatched tensors and bad arguments give clear errors.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "tensorplay/tensor.h"
#include "tensorplay/transport/ring_all_reduce.h"
#include "tensorplay/transport/ucx_channel.h"

namespace tp = tensorplay;
namespace tr = tensorplay::transport;
using namespace std::chrono_literals;

namespace {

// n connected UcxChannels, ranks 0 to n-1, and the groups of their members.
struct Ring {
  std::vector<std::unique_ptr<tr::UcxChannel>> channels;
  explicit Ring(int n) {
    std::vector<std::vector<uint8_t>> addresses;
    for (int r = 0; r < n; ++r) {
      channels.push_back(std::make_unique<tr::UcxChannel>(r, n));
      addresses.push_back(channels.back()->address());
    }
    for (auto& c : channels) c->connect(addresses);
  }
  int size() const { return static_cast<int>(channels.size()); }
  tr::RingGroup group(int me, uint32_t stream = 0,
                      std::chrono::milliseconds timeout = std::chrono::seconds(5)) const {
    tr::RingGroup g{channels[me].get(), {}, me, stream, timeout};
    for (int r = 0; r < size(); ++r) g.peers.push_back(r);
    return g;
  }
};

// Runs `body(member)` on one thread per member; each member's error, empty when none.
std::vector<std::string> on_every_member(int n, const std::function<void(int)>& body) {
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int m = 0; m < n; ++m)
    threads.emplace_back([&, m] {
      try {
        body(m);
      } catch (const std::exception& e) {
        errors[m] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}

// Member m's small-integer data: sums of up to four stay exact in bfloat16 too.
float value(int member, int64_t i, int seed) {
  return static_cast<float>((i * 7 + member * 3 + seed * 5) % 17) - 8.0f;
}

tp::Tensor data_of(int member, const tp::Shape& shape, tp::DType dtype, int seed) {
  const int64_t n = tp::numel(shape);
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = value(member, i, seed);
  return tp::from_vector(v, shape).to(dtype);
}

std::vector<float> expected_sum(int members, int64_t n, int seed) {
  std::vector<float> out(n, 0.0f);
  for (int m = 0; m < members; ++m)
    for (int64_t i = 0; i < n; ++i) out[i] += value(m, i, seed);
  return out;
}

// Whether every transfer of `channel` ends within a second (the last status messages and sends
// of a call may still be on their way when the call returns).
bool settles(const tr::UcxChannel& channel) {
  for (auto until = std::chrono::steady_clock::now() + 1s; channel.pending() != 0;) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

bool same_bits(const tp::Tensor& a, const tp::Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

}  // namespace

TEST_CASE("ring keys are collective keys that keep streams apart", "[transport][ring]") {
  tr::TransferKey key = tr::collective_key(0x12345678, 9, tr::RingPhase::AllGather, 5);
  CHECK(tr::is_collective_key(key.key));
  CHECK(key.stream == 0x12345678u);
  const tr::CollectiveFields f = tr::decode_collective_key(key);
  CHECK(f.call == 9);
  CHECK(f.phase == tr::RingPhase::AllGather);
  CHECK(f.ring_step == 5);
  CHECK(f.group_bits == (0x567u & 0x3ff));
  // Streams that agree in their low four bits (which the UCX tag keeps) still differ.
  uint64_t a =
      tr::UcxChannel::ucx_tag(tr::collective_key(0x10, 1, tr::RingPhase::ReduceScatter, 0), 0);
  uint64_t b =
      tr::UcxChannel::ucx_tag(tr::collective_key(0x20, 1, tr::RingPhase::ReduceScatter, 0), 0);
  CHECK(a != b);
  CHECK_NOTHROW(tr::UcxChannel::ucx_tag(
      tr::collective_key(0xffffffff, 1, tr::RingPhase::ReduceScatter, tr::kStatusRingStep), 1));
  CHECK_THROWS_WITH(tr::collective_key(0, 1, tr::RingPhase::ReduceScatter, 256),
                    Catch::Contains("ring step 256"));
}

TEST_CASE("ring all-reduce sums exactly and alike on 2, 3 and 4 members", "[transport][ring]") {
  for (int n : {2, 3, 4}) {
    Ring ring(n);
    uint64_t call = 0;
    for (tp::DType dtype : {tp::DType::Float32, tp::DType::BFloat16}) {
      for (tp::Shape shape : std::vector<tp::Shape>{{1}, {3}, {7}, {1000}, {1 << 18}, {7, 3}}) {
        ++call;
        const int seed = static_cast<int>(call);
        std::vector<tp::Tensor> results(n);
        auto errors = on_every_member(n, [&](int m) {
          tp::Tensor t = data_of(m, shape, dtype, seed);
          tr::ring_all_reduce(ring.group(m), call, t);
          results[m] = t;
        });
        INFO(n << " members, " << tp::to_string(dtype) << " " << tp::to_string(shape));
        for (int m = 0; m < n; ++m) REQUIRE(errors[m].empty());
        const std::vector<float> want = expected_sum(n, tp::numel(shape), seed);
        for (int m = 0; m < n; ++m) {
          CHECK(results[m].shape() == shape);
          CHECK(results[m].dtype() == dtype);
          CHECK(results[m].to_vector() == want);
          CHECK(same_bits(results[m], results[0]));
        }
      }
    }
    for (auto& c : ring.channels) CHECK(settles(*c));
  }
}

TEST_CASE("ring all-reduce on one member leaves the tensor as it is", "[transport][ring]") {
  Ring ring(2);
  tr::RingGroup alone{ring.channels[0].get(), {0}, 0, 0, 1s};
  tp::Tensor t = data_of(0, {5}, tp::DType::Float32, 1);
  std::vector<float> before = t.to_vector();
  tr::ring_all_reduce(alone, 1, t);
  CHECK(t.to_vector() == before);
}

TEST_CASE("consecutive calls and concurrent streams do not mix", "[transport][ring]") {
  Ring ring(3);
  const tp::Shape shape{1 << 18};
  SECTION("the caller reuses the tensor at once; a late member starts later") {
    std::vector<std::vector<float>> firsts(3), seconds(3);
    auto errors = on_every_member(3, [&](int m) {
      if (m == 2) std::this_thread::sleep_for(30ms);
      tp::Tensor t = data_of(m, shape, tp::DType::Float32, 1);
      tr::ring_all_reduce(ring.group(m), 1, t);
      firsts[m] = t.to_vector();
      // New data into the same storage right away: sends of call 1 must not read it.
      t.copy_(data_of(m, shape, tp::DType::Float32, 2));
      tr::ring_all_reduce(ring.group(m), 2, t);
      seconds[m] = t.to_vector();
    });
    for (int m = 0; m < 3; ++m) {
      REQUIRE(errors[m].empty());
      CHECK(firsts[m] == expected_sum(3, shape[0], 1));
      CHECK(seconds[m] == expected_sum(3, shape[0], 2));
    }
  }
  SECTION("two streams with the same low bits and call numbers at once") {
    std::vector<std::vector<float>> a(3), b(3);
    auto errors = on_every_member(3, [&](int m) {
      std::string other_error;
      std::thread other([&] {
        try {
          tp::Tensor t = data_of(m, shape, tp::DType::BFloat16, 4);
          tr::ring_all_reduce(ring.group(m, 0x20), 1, t);
          b[m] = t.to_vector();
        } catch (const std::exception& e) {
          other_error = e.what();
        }
      });
      tp::Tensor t = data_of(m, shape, tp::DType::Float32, 3);
      tr::ring_all_reduce(ring.group(m, 0x10), 1, t);
      a[m] = t.to_vector();
      other.join();
      if (!other_error.empty()) throw std::runtime_error(other_error);
    });
    for (int m = 0; m < 3; ++m) {
      REQUIRE(errors[m].empty());
      CHECK(a[m] == expected_sum(3, shape[0], 3));
      CHECK(b[m] == expected_sum(3, shape[0], 4));
    }
  }
}

TEST_CASE("a member that never joins fails the others in time, naming it", "[transport][ring]") {
  for (int n : {2, 3}) {
    Ring ring(n);
    const int missing = n - 1;
    std::vector<double> seconds(n, 0.0);
    auto errors = on_every_member(n, [&](int m) {
      if (m == missing) return;
      tp::Tensor t = data_of(m, {1000}, tp::DType::Float32, 1);
      auto t0 = std::chrono::steady_clock::now();
      try {
        tr::ring_all_reduce(ring.group(m, 0, 300ms), 1, t);
      } catch (...) {
        seconds[m] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        throw;
      }
    });
    INFO(n << " members");
    for (int m = 0; m < missing; ++m) {
      INFO("member " << m << ": " << errors[m]);
      CHECK_THAT(errors[m], Catch::Contains("member " + std::to_string(missing) +
                                            " (channel rank " + std::to_string(missing) + ")"));
      CHECK_THAT(errors[m], Catch::Contains("within 300 ms"));
      CHECK(seconds[m] >= 0.25);
      CHECK(seconds[m] < 1.5);
    }
    // The ring works again for the next call, the late member included.
    std::vector<std::vector<float>> results(n);
    errors = on_every_member(n, [&](int m) {
      tp::Tensor t = data_of(m, {1000}, tp::DType::Float32, 2);
      tr::ring_all_reduce(ring.group(m), 2, t);
      results[m] = t.to_vector();
    });
    for (int m = 0; m < n; ++m) {
      REQUIRE(errors[m].empty());
      CHECK(results[m] == expected_sum(n, 1000, 2));
    }
  }
}

TEST_CASE("members that pass different tensors all fail, saying how", "[transport][ring]") {
  Ring ring(3);
  uint64_t call = 0;
  auto run = [&](const std::function<tp::Tensor(int)>& input) {
    ++call;
    return on_every_member(3, [&](int m) {
      tp::Tensor t = input(m);
      tr::ring_all_reduce(ring.group(m), call, t);
    });
  };
  // Every member fails at once: the ones next to the odd one say what differs, and pass it on.
  auto check_all = [](const std::vector<std::string>& errors, const std::string& says) {
    for (size_t m = 0; m < errors.size(); ++m) {
      INFO("member " << m << ": " << errors[m]);
      CHECK_THAT(errors[m], Catch::Contains(says));
    }
  };
  // The same bytes per chunk, another dtype.
  check_all(run([](int m) {
              return m == 1 ? data_of(m, {2400}, tp::DType::BFloat16, 1)
                            : data_of(m, {1200}, tp::DType::Float32, 1);
            }),
            "bfloat16 tensor of 2400 elements");
  check_all(run([](int m) { return data_of(m, {m == 0 ? 1203 : 1200}, tp::DType::Float32, 1); }),
            "another size");
  check_all(
      run([](int m) {
        return data_of(m, m == 2 ? tp::Shape{12, 100} : tp::Shape{1200}, tp::DType::Float32, 1);
      }),
      "another shape");
  // And the ring is whole again afterwards.
  auto errors = run([](int m) { return data_of(m, {1200}, tp::DType::Float32, 1); });
  for (const std::string& e : errors) CHECK(e.empty());
}

TEST_CASE("ring all-reduce refuses bad groups and tensors clearly", "[transport][ring]") {
  Ring ring(2);
  tp::Tensor t = tp::ones({4});
  tr::RingGroup good = ring.group(0);
  tp::Tensor undefined;
  CHECK_THROWS_WITH(tr::ring_all_reduce(good, 1, undefined), Catch::Contains("undefined"));

  tr::RingGroup big = good;
  big.peers.clear();
  for (int r = 0; r < 200; ++r) big.peers.push_back(r);
  CHECK_THROWS_WITH(tr::ring_all_reduce(big, 1, t),
                    Catch::Contains("200 members") && Catch::Contains("at most 128"));

  tr::RingGroup bad = good;
  bad.channel = nullptr;
  CHECK_THROWS_WITH(tr::ring_all_reduce(bad, 1, t), Catch::Contains("no channel"));
  bad = good;
  bad.me = 2;
  CHECK_THROWS_WITH(tr::ring_all_reduce(bad, 1, t), Catch::Contains("index 2"));
  bad = good;
  bad.peers = {0, 0};
  CHECK_THROWS_WITH(tr::ring_all_reduce(bad, 1, t), Catch::Contains("rank 0 twice"));
  bad = good;
  bad.peers.clear();
  CHECK_THROWS_WITH(tr::ring_all_reduce(bad, 1, t), Catch::Contains("no members"));
  bad = good;
  bad.timeout = 0ms;
  CHECK_THROWS_WITH(tr::ring_all_reduce(bad, 1, t), Catch::Contains("timeout must be positive"));
  // Tensors here are always contiguous and float32 or bfloat16: no other layout or dtype exists
  // to refuse. Device tensors: the [cuda] case below.
  CHECK(t.to_vector() == std::vector<float>{1, 1, 1, 1});  // untouched by the refusals
  for (auto& c : ring.channels) CHECK(c->pending() == 0);
}

TEST_CASE("ring all-reduce refuses device tensors", "[transport][ring][cuda]") {
  if (!tp::cuda_available()) {  // run by name on a host without a device: nothing to refuse
    WARN("no CUDA device: skipped");
    return;
  }
  Ring ring(2);
  tp::Tensor t = tp::ones({4}).to(tp::Device(tp::DeviceType::CUDA, 0));
  CHECK_THROWS_WITH(tr::ring_all_reduce(ring.group(0), 1, t), Catch::Contains("host tensor"));
}
