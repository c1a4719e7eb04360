// Tests for ucx_channel.h when its progress thread never polls (TENSORPLAY_UCX_SPIN_US=0): every
// send, receive and message must wake the sleeping thread at once, not at its next timed wake-up.
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "pipeline_keys.h"
#include "tensorplay/base/knobs.h"
#include "tensorplay/transport/transport_knobs.h"
#include "tensorplay/tensor.h"
#include "tensorplay/transport/ucx_channel.h"

namespace tp = tensorplay;
namespace tr = tensorplay::transport;
using namespace tensorplay::testing;  // pkey, Direction
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

// Sets TENSORPLAY_UCX_SPIN_US for the scope's life (channels read it when they start), then
// restores it.
class ScopedSpin {
 public:
  explicit ScopedSpin(const char* value) {
    if (tp::knob_is_set(tr::kUcxSpinUsKnob))
      old_ = std::to_string(tp::knob_int(tr::kUcxSpinUsKnob));
    setenv(kName, value, 1);
  }
  ~ScopedSpin() {
    if (old_)
      setenv(kName, old_->c_str(), 1);
    else
      unsetenv(kName);
  }
  ScopedSpin(const ScopedSpin&) = delete;
  ScopedSpin& operator=(const ScopedSpin&) = delete;

 private:
  static constexpr const char* kName = "TENSORPLAY_UCX_SPIN_US";
  std::optional<std::string> old_;
};

struct ConnectedPair {
  tr::UcxChannel rank0{0, 2};
  tr::UcxChannel rank1{1, 2};
  ConnectedPair() {
    std::vector<std::vector<uint8_t>> addresses{rank0.address(), rank1.address()};
    rank0.connect(addresses);
    rank1.connect(addresses);
  }
};

// Round trips slower than this are counted: a wake-up lost by a sleeping progress thread shows
// as one of its timed wake-ups (50 ms) or more.
constexpr auto kSlowRoundTrip = 40ms;

struct RoundTrips {
  int rounds = 0;
  int slow = 0;
  Clock::duration total{};
  std::string failure;  // the first failed receive's error
  void add(Clock::duration took) {
    ++rounds;
    total += took;
    if (took > kSlowRoundTrip) ++slow;
  }
};

// rank 0 sends `floats` floats to rank 1, which sends them back; rank 1's receive is posted
// before the send (`posted_first`) or after it, so that both the expected and the unexpected
// arrival are woken for.
void round_trip(ConnectedPair& pair, uint64_t step, int floats, bool posted_first,
                RoundTrips& out) {
  const tp::Tensor t = tp::zeros({floats});
  const tr::TransferKey there = pkey(step, 1, Direction::Forward, 0);
  const tr::TransferKey back = pkey(step, 0, Direction::Backward, 0);
  const std::vector<tr::TensorDescriptor> descriptors{tr::describe(t)};
  std::mutex mutex;
  std::condition_variable cv;
  bool arrived = false;
  std::string error;
  const Clock::time_point start = Clock::now();
  auto send_there = [&] { pair.rank0.send(1, there, {t}); };
  if (!posted_first) send_there();
  pair.rank1.post_receive(0, there, descriptors, tp::cpu(), 5s,
                          [&](std::vector<tp::Tensor> got, std::string e) {
                            // On rank 1's progress thread: answer from the callback, as a
                            // pipeline's next hop does.
                            if (e.empty()) pair.rank1.send(0, back, std::move(got));
                            std::lock_guard lock(mutex);
                            arrived = true;
                            error = std::move(e);
                            cv.notify_all();
                          });
  if (posted_first) send_there();
  try {
    pair.rank0.receive(1, back, descriptors, tp::cpu(), 5s);
  } catch (const std::exception& e) {
    if (out.failure.empty()) out.failure = e.what();
  }
  std::unique_lock lock(mutex);
  if (!cv.wait_for(lock, 5s, [&] { return arrived; }) && out.failure.empty())
    out.failure = "rank 1's receive of step " + std::to_string(step) + " never completed";
  if (!error.empty() && out.failure.empty()) out.failure = error;
  out.add(Clock::now() - start);
}

}  // namespace

TEST_CASE("a ucx channel that never polls wakes for every send, receive and message",
          "[transport][ucx]") {
  ScopedSpin no_poll("0");
  ConnectedPair pair;
  RoundTrips trips;
  // Eager (64 B), rendezvous (64 KiB, a pipeline's hand-off) and large (1 MiB) transfers.
  const int sizes[] = {16, 16 << 10, 256 << 10};
  uint64_t step = 1;
  for (int round = 0; round < 20; ++round)
    for (int floats : sizes)
      for (bool posted_first : {true, false}) round_trip(pair, step++, floats, posted_first, trips);

  // Messages, each answered from the handler (the control hop of a step).
  std::mutex mutex;
  std::condition_variable cv;
  int answers = 0;
  pair.rank1.set_message_handler(
      3, [&](int peer, std::string_view) { pair.rank1.send_message(peer, 4, "pong"); });
  pair.rank0.set_message_handler(4, [&](int, std::string_view) {
    std::lock_guard lock(mutex);
    ++answers;
    cv.notify_all();
  });
  RoundTrips messages;
  for (int i = 0; i < 60; ++i) {
    const Clock::time_point start = Clock::now();
    pair.rank0.send_message(1, 3, "ping");
    std::unique_lock lock(mutex);
    if (!cv.wait_for(lock, 5s, [&] { return answers > i; })) {
      messages.failure = "no answer from rank 1 to message " + std::to_string(i) + " within 5 s";
      break;
    }
    messages.add(Clock::now() - start);
  }
  pair.rank0.set_message_handler(4, nullptr);
  pair.rank1.set_message_handler(3, nullptr);

  INFO("tensor round trips: "
       << trips.rounds << ", " << trips.slow << " over 40 ms, "
       << std::chrono::duration_cast<std::chrono::milliseconds>(trips.total).count()
       << " ms in all");
  INFO("message round trips: " << messages.rounds << ", " << messages.slow << " over 40 ms");
  CHECK(trips.failure == "");
  CHECK(messages.failure == "");
  REQUIRE(trips.rounds == 120);
  REQUIRE(messages.rounds == 60);
  // A lost wake-up costs a timed wake-up (50 ms) per hand-off; a busy machine delays a few.
  CHECK(trips.slow <= trips.rounds / 10);
  CHECK(messages.slow <= messages.rounds / 10);
  CHECK(trips.total < trips.rounds * 20ms);
}
