// Tests for ucx_channel.h: two ranks in one process (and one test across a fork) exchange tensors
// of every kind; timeouts, cancellation, closing and mismatched descriptors end receives cleanly.
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "pipeline_keys.h"
#include "tensorplay/base/knobs.h"
#include "tensorplay/tensor.h"
#include "tensorplay/transport/local_channel.h"
#include "tensorplay/transport/transport_knobs.h"
#include "tensorplay/transport/ucx_channel.h"

namespace tp = tensorplay;
namespace tr = tensorplay::transport;
using namespace tensorplay::testing;  // pkey, Direction
using namespace std::chrono_literals;

namespace {

// Rank 0 and rank 1 of a world of two, connected to each other.
struct ConnectedPair {
  tr::UcxChannel rank0{0, 2};
  tr::UcxChannel rank1{1, 2};
  ConnectedPair() {
    std::vector<std::vector<uint8_t>> addresses{rank0.address(), rank1.address()};
    rank0.connect(addresses);
    rank1.connect(addresses);
  }
};

// A tensor whose bytes follow a pattern set by `seed`, cheap to fill even at 64 MiB.
tp::Tensor patterned(const tp::Shape& shape, tp::DType dtype, uint8_t seed) {
  tp::Tensor t = tp::empty(shape, {.dtype = dtype, .device = tp::cpu()});
  auto* bytes = static_cast<uint8_t*>(t.raw_data());
  for (size_t i = 0; i < t.nbytes(); ++i) bytes[i] = static_cast<uint8_t>(i * 131 + seed);
  return t;
}

bool same_bytes(const tp::Tensor& a, const tp::Tensor& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

// Collects the outcome of posted receives; wait() is bounded.
struct Outcomes {
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<std::pair<std::vector<tp::Tensor>, std::string>> results;
  std::atomic<int> calls{0};

  tr::ReceiveDone callback(size_t slot) {
    {
      std::lock_guard lock(mutex);
      if (results.size() <= slot) results.resize(slot + 1);
    }
    return [this, slot](std::vector<tp::Tensor> tensors, std::string error) {
      // Notified under the lock: once wait() returns, no callback touches this object any more.
      std::lock_guard lock(mutex);
      results[slot] = {std::move(tensors), std::move(error)};
      ++calls;
      cv.notify_all();
    };
  }
  bool wait(int count, std::chrono::milliseconds limit = 5s) {
    std::unique_lock lock(mutex);
    return cv.wait_for(lock, limit, [&] { return calls.load() >= count; });
  }
};

}  // namespace

TEST_CASE("ucx channel moves float32 and bfloat16 tensors of every size between ranks",
          "[transport][ucx]") {
  ConnectedPair pair;
  CHECK(pair.rank0.name() == "ucx");
  CHECK(pair.rank1.rank() == 1);
  CHECK(pair.rank1.world_size() == 2);
  std::vector<tp::Tensor> sent{
      patterned({1}, tp::DType::Float32, 1),
      patterned({0}, tp::DType::Float32, 2),
      tp::Tensor(),  // an absent gradient
      patterned({17, 33}, tp::DType::BFloat16, 3),
      patterned({3, 0, 5}, tp::DType::BFloat16, 4),
      patterned({1}, tp::DType::BFloat16, 5),
      patterned({4096, 4096}, tp::DType::Float32, 6),  // 64 MiB
      patterned({1000, 257}, tp::DType::Float32, 7),
  };
  tr::TransferKey forward = pkey(1, 1, Direction::Forward, 0);
  auto descriptors = pair.rank0.send(1, forward, sent);
  REQUIRE(descriptors.size() == sent.size());
  CHECK_FALSE(descriptors[2].defined);
  CHECK(descriptors[6].bytes == 64u << 20);

  auto got = pair.rank1.receive(0, forward, descriptors, tp::cpu(), 10s);
  REQUIRE(got.size() == sent.size());
  for (size_t i = 0; i < sent.size(); ++i) {
    INFO("tensor " << i);
    CHECK(same_bytes(got[i], sent[i]));
  }
  CHECK(got[1].shape() == tp::Shape{0});
  CHECK(got[4].shape() == tp::Shape{3, 0, 5});
  CHECK(got[4].dtype() == tp::DType::BFloat16);

  // And back the other way, as a gradient would go.
  tr::TransferKey backward = pkey(1, 0, Direction::Backward, 0);
  std::vector<tp::Tensor> gradients{patterned({2, 3}, tp::DType::BFloat16, 8), tp::Tensor()};
  auto back =
      pair.rank0.receive(1, backward, pair.rank1.send(0, backward, gradients), tp::cpu(), 5s);
  REQUIRE(back.size() == 2);
  CHECK(same_bytes(back[0], gradients[0]));
  CHECK_FALSE(back[1].defined());

  // Sends finish once their bytes have left; nothing stays pending.
  for (auto deadline = std::chrono::steady_clock::now() + 2s;
       pair.rank0.pending() + pair.rank1.pending() > 0 &&
       std::chrono::steady_clock::now() < deadline;)
    std::this_thread::sleep_for(1ms);
  CHECK(pair.rank0.pending() == 0);
  CHECK(pair.rank1.pending() == 0);
}

TEST_CASE("ucx receives match their sends by tag whatever the order of posting",
          "[transport][ucx]") {
  Outcomes outcomes;  // declared first: it outlives the channels that call it
  ConnectedPair pair;
  constexpr int kTransfers = 24;
  auto tag_of = [](int i) {
    return pkey(static_cast<uint64_t>(i / 8), 1 + i % 2,
                i % 3 == 0 ? Direction::Backward : Direction::Forward, i);
  };
  auto tensor_of = [](int i) {
    return patterned({static_cast<int64_t>(1 + i * 97)}, tp::DType::Float32,
                     static_cast<uint8_t>(i));
  };
  auto descriptors_of = [&](int i) {
    return std::vector<tr::TensorDescriptor>{tr::describe(tensor_of(i))};
  };
  // Half the receives are posted before any send, in reverse order.
  for (int i = kTransfers - 1; i >= 0; i -= 2)
    pair.rank1.post_receive(0, tag_of(i), descriptors_of(i), tp::cpu(), 5s, outcomes.callback(i));
  // Sends go out in a shuffled order; some (rendezvous-sized) arrive before their receive.
  std::vector<int> order(kTransfers);
  for (int i = 0; i < kTransfers; ++i) order[i] = (i * 7) % kTransfers;
  for (int i : order) pair.rank0.send(1, tag_of(i), {tensor_of(i)});
  std::this_thread::sleep_for(5ms);
  for (int i = 0; i < kTransfers; i += 2)
    pair.rank1.post_receive(0, tag_of(i), descriptors_of(i), tp::cpu(), 5s, outcomes.callback(i));
  REQUIRE(outcomes.wait(kTransfers));
  std::this_thread::sleep_for(20ms);
  CHECK(outcomes.calls == kTransfers);  // each exactly once
  for (int i = 0; i < kTransfers; ++i) {
    INFO("transfer " << i);
    REQUIRE(outcomes.results[i].second.empty());
    REQUIRE(outcomes.results[i].first.size() == 1);
    CHECK(same_bytes(outcomes.results[i].first[0], tensor_of(i)));
  }
}

TEST_CASE("a ucx receive that times out names the tag and the peer, and completes once",
          "[transport][ucx]") {
  Outcomes outcomes;
  ConnectedPair pair;
  tr::TransferKey tag = pkey(3, 1, Direction::Forward, 2);
  std::vector<tr::TensorDescriptor> descriptors{tr::describe(tp::ones({4}))};
  auto start = std::chrono::steady_clock::now();
  pair.rank1.post_receive(0, tag, descriptors, tp::cpu(), 30ms, outcomes.callback(0));
  REQUIRE(outcomes.wait(1));
  CHECK(std::chrono::steady_clock::now() - start >= 30ms);
  CHECK_THAT(outcomes.results[0].second,
             Catch::Contains("nothing arrived for step 3 stage 1 forward microbatch 2 from rank "
                             "0 within 30 ms"));
  pair.rank1.cancel_receive(0, tag);  // already completed: nothing happens
  std::this_thread::sleep_for(20ms);
  CHECK(outcomes.calls == 1);
  CHECK(pair.rank1.pending() == 0);

  // The blocking receive says the same.
  CHECK_THROWS_WITH(
      pair.rank1.receive(0, pkey(4, 1, Direction::Backward, 0), descriptors, tp::cpu(), 20ms),
      Catch::Contains("nothing arrived for step 4 stage 1 backward microbatch 0 "
                      "from rank 0 within 20 ms"));
}

TEST_CASE("cancel_all fails pending ucx receives and drops unreceived messages",
          "[transport][ucx]") {
  Outcomes outcomes;
  ConnectedPair pair;
  std::vector<tr::TensorDescriptor> descriptors{tr::describe(tp::ones({8}))};
  for (int mb = 0; mb < 3; ++mb)
    pair.rank1.post_receive(0, pkey(0, 1, Direction::Forward, mb), descriptors, tp::cpu(), 10s,
                            outcomes.callback(mb));
  CHECK(pair.rank1.pending() == 3);
  pair.rank1.cancel_all();
  CHECK(outcomes.calls == 3);  // called before cancel_all returns
  for (auto& [tensors, error] : outcomes.results) {
    CHECK(tensors.empty());
    CHECK_THAT(error, Catch::Contains("was cancelled") && Catch::Contains("from rank 0"));
  }
  CHECK(pair.rank1.pending() == 0);

  // A large message nobody receives holds its sender until the receiver discards it.
  pair.rank0.send(1, pkey(1, 1, Direction::Forward, 0),
                  {patterned({1 << 20}, tp::DType::Float32, 1)});
  auto deadline = std::chrono::steady_clock::now() + 3s;
  while (pair.rank0.pending() > 0 && std::chrono::steady_clock::now() < deadline) {
    pair.rank1.cancel_all();
    std::this_thread::sleep_for(2ms);
  }
  CHECK(pair.rank0.pending() == 0);

  // The channel still works afterwards.
  tr::TransferKey tag = pkey(2, 1, Direction::Forward, 0);
  tp::Tensor t = patterned({5}, tp::DType::Float32, 9);
  auto got = pair.rank1.receive(0, tag, pair.rank0.send(1, tag, {t}), tp::cpu(), 5s);
  CHECK(same_bytes(got[0], t));
}

TEST_CASE("destroying a ucx channel with pending receives fails them without hanging",
          "[transport][ucx]") {
  Outcomes outcomes;
  auto start = std::chrono::steady_clock::now();
  {
    ConnectedPair pair;
    std::vector<tr::TensorDescriptor> descriptors{tr::describe(tp::ones({1 << 20}))};
    for (int mb = 0; mb < 2; ++mb)
      pair.rank1.post_receive(0, pkey(0, 1, Direction::Forward, mb), descriptors, tp::cpu(), 60s,
                              outcomes.callback(mb));
    // One receive is mid-way: its message is on the way while the channel closes.
    pair.rank0.send(1, pkey(0, 1, Direction::Forward, 5), {tp::ones({1 << 20})});
    pair.rank1.post_receive(0, pkey(0, 1, Direction::Forward, 5), descriptors, tp::cpu(), 60s,
                            outcomes.callback(2));
  }
  CHECK(std::chrono::steady_clock::now() - start < 4s);
  CHECK(outcomes.calls == 3);
  for (size_t i = 0; i < 2; ++i)
    CHECK_THAT(outcomes.results[i].second, Catch::Contains("closed while receiving"));
}

TEST_CASE("a ucx descriptor that does not match what was sent is a clear error",
          "[transport][ucx]") {
  ConnectedPair pair;
  tr::TransferKey tag = pkey(0, 1, Direction::Forward, 0);
  auto sent = pair.rank0.send(1, tag, {tp::ones({4})});  // 16 bytes
  auto wrong = sent;
  wrong[0] = tr::describe(tp::ones({8}));
  CHECK_THROWS_WITH(
      pair.rank1.receive(0, tag, wrong, tp::cpu(), 5s),
      Catch::Contains("tensor 0 of step 0 stage 1 forward microbatch 0 from rank 0") &&
          Catch::Contains("16 bytes arrived, its descriptor says 32"));

  tr::TransferKey tag2 = pkey(0, 1, Direction::Forward, 1);
  sent = pair.rank0.send(1, tag2, {tp::ones({4})});
  wrong[0] = tr::describe(tp::ones({2}));
  CHECK_THROWS_WITH(pair.rank1.receive(0, tag2, wrong, tp::cpu(), 5s),
                    Catch::Contains("more bytes arrived than the 8 its descriptor says"));

  // A descriptor whose byte count disagrees with its own shape is refused when posted.
  wrong[0].bytes = 5;
  CHECK_THROWS_WITH(pair.rank1.post_receive(0, tag2, wrong, tp::cpu(), 5s, {}),
                    Catch::Contains("says 5 bytes, but its shape and dtype hold 8"));
}

TEST_CASE("a ucx receive reusing a finished one's operation carries nothing over",
          "[transport][ucx]") {
  // Finished receives are recycled: a failed, a timed-out and a three-tensor receive come
  // before receives of other shapes, dtypes and tensor counts, each of which must see only its own.
  ConnectedPair pair;
  const std::vector<tp::Tensor> three{patterned({5}, tp::DType::Float32, 1), tp::Tensor(),
                                      patterned({2, 3}, tp::DType::BFloat16, 2)};
  int64_t mb = 0;
  for (int round = 0; round < 3; ++round) {
    tr::TransferKey bad = pkey(0, 1, Direction::Forward, mb++);
    auto sent = pair.rank0.send(1, bad, {tp::ones({4})});
    sent[0] = tr::describe(tp::ones({8}));
    CHECK_THROWS_WITH(pair.rank1.receive(0, bad, sent, tp::cpu(), 5s),
                      Catch::Contains("its descriptor says 32"));
    tr::TransferKey silent = pkey(0, 1, Direction::Forward, mb++);
    CHECK_THROWS_WITH(pair.rank1.receive(0, silent, {tr::describe(tp::ones({4}))}, tp::cpu(), 20ms),
                      Catch::Contains("nothing arrived"));
    tr::TransferKey many = pkey(0, 1, Direction::Forward, mb++);
    auto descriptors = pair.rank0.send(1, many, three);
    auto got = pair.rank1.receive(0, many, descriptors, tp::cpu(), 5s);
    REQUIRE(got.size() == 3);
    for (size_t i = 0; i < 3; ++i) CHECK(same_bytes(got[i], three[i]));
    tr::TransferKey one = pkey(0, 1, Direction::Forward, mb++);
    const tp::Tensor single = patterned({7}, tp::DType::Float32, static_cast<uint8_t>(round));
    descriptors = pair.rank0.send(1, one, {single});
    got = pair.rank1.receive(0, one, descriptors, tp::cpu(), 5s);
    REQUIRE(got.size() == 1);
    CHECK(same_bytes(got[0], single));
  }
  // A send is done once UCX says its bytes left, which the sender's progress thread may learn a
  // little after the receiver got them (when it sleeps, on its next wake-up).
  for (auto deadline = std::chrono::steady_clock::now() + 2s;
       pair.rank0.pending() + pair.rank1.pending() > 0 &&
       std::chrono::steady_clock::now() < deadline;)
    std::this_thread::sleep_for(100us);
  CHECK(pair.rank0.pending() == 0);
  CHECK(pair.rank1.pending() == 0);
}

TEST_CASE("ucx messages reach the handler of their stream", "[transport][ucx]") {
  ConnectedPair pair;
  REQUIRE(pair.rank1.carries_messages());
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<std::pair<int, std::string>> got;
  pair.rank1.set_message_handler(7, [&](int peer, std::string_view bytes) {
    std::lock_guard lock(mutex);
    got.emplace_back(peer, std::string(bytes));
    cv.notify_all();
  });
  pair.rank0.send_message(1, 8, "no handler: dropped");
  for (int i = 0; i < 50; ++i) pair.rank0.send_message(1, 7, "message " + std::to_string(i));
  {
    std::unique_lock lock(mutex);
    REQUIRE(cv.wait_for(lock, 5s, [&] { return got.size() >= 50; }));
    std::set<std::string> texts;
    for (const auto& [peer, text] : got) {
      CHECK(peer == 0);
      texts.insert(text);
    }
    CHECK(texts.size() == 50);
    CHECK(texts.count("message 49") == 1);
  }
  pair.rank1.set_message_handler(7, nullptr);  // from now on dropped
  pair.rank0.send_message(1, 7, "late");
  std::this_thread::sleep_for(50ms);
  std::lock_guard lock(mutex);
  CHECK(got.size() == 50);
  CHECK_THROWS_WITH(pair.rank0.send_message(5, 7, "x"), Catch::Contains("rank 5"));
}

TEST_CASE("the local channel carries no messages", "[transport]") {
  tr::LocalChannel local;
  CHECK_FALSE(local.carries_messages());
  CHECK_THROWS_WITH(local.send_message(0, 0, "x"), Catch::Contains("does not carry messages"));
}

TEST_CASE("ucx channel misuse is a clear error", "[transport][ucx]") {
  ConnectedPair pair;
  tr::TransferKey tag = pkey(0, 1, Direction::Forward, 0);
  CHECK_THROWS_WITH(pair.rank0.send(2, tag, {tp::ones({1})}),
                    Catch::Contains("rank 2") && Catch::Contains("ranks are 0 to 1"));
  CHECK_THROWS_WITH(pair.rank0.send(0, tag, {tp::ones({1})}), Catch::Contains("itself"));
  CHECK_THROWS_WITH(pair.rank0.send(1, pkey(0, 5000, Direction::Forward, 0), {tp::ones({1})}),
                    Catch::Contains("stage 5000"));
  CHECK_THROWS_WITH(pair.rank0.connect({pair.rank0.address(), pair.rank1.address()}),
                    Catch::Contains("already called"));
  std::vector<tr::TensorDescriptor> one{tr::describe(tp::ones({1}))};
  pair.rank1.post_receive(0, tag, one, tp::cpu(), 5s, [](auto, auto) {});
  CHECK_THROWS_WITH(pair.rank1.post_receive(0, tag, one, tp::cpu(), 5s, [](auto, auto) {}),
                    Catch::Contains("already posted"));

  tr::UcxChannel lonely(0, 2);
  CHECK_THROWS_WITH(lonely.send(1, tag, {tp::ones({1})}), Catch::Contains("not connected"));
  CHECK_THROWS_WITH(lonely.connect({lonely.address()}), Catch::Contains("1 addresses for 2"));
  CHECK_THROWS_AS(tr::UcxChannel(2, 2), tr::TransferError);
}

// -- across processes -----------------------------------------------------------------------------

namespace {

// Length-prefixed byte strings over a socket, each read bounded by `limit`.
bool write_bytes(int fd, const std::vector<uint8_t>& bytes) {
  uint64_t size = bytes.size();
  return write(fd, &size, sizeof size) == sizeof size &&
         write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size());
}

bool read_exact(int fd, void* out, size_t size, std::chrono::milliseconds limit) {
  auto* p = static_cast<uint8_t*>(out);
  while (size > 0) {
    pollfd pfd{fd, POLLIN, 0};
    if (poll(&pfd, 1, static_cast<int>(limit.count())) <= 0) return false;
    ssize_t n = read(fd, p, size);
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

std::optional<std::vector<uint8_t>> read_bytes(int fd, std::chrono::milliseconds limit) {
  uint64_t size = 0;
  if (!read_exact(fd, &size, sizeof size, limit) || size > (1u << 20)) return std::nullopt;
  std::vector<uint8_t> bytes(size);
  if (!read_exact(fd, bytes.data(), size, limit)) return std::nullopt;
  return bytes;
}

// Rank 1 in a child: trades worker addresses with the parent (rank 0) over `fd` and connects.
bool join_parent(tr::UcxChannel& channel, int fd) {
  if (!write_bytes(fd, channel.address())) return false;
  auto parent = read_bytes(fd, 5s);
  if (!parent) return false;
  channel.connect({*parent, {}});
  return true;
}

// The child: rank 1 receives a tensor and sends it back as a gradient.
int echo_child(int fd) {
  try {
    tr::UcxChannel channel(1, 2);
    if (!join_parent(channel, fd)) return 2;
    std::vector<tr::TensorDescriptor> descriptors{
        tr::describe(tp::empty({1 << 18}, {.dtype = tp::DType::Float32, .device = tp::cpu()}))};
    auto got = channel.receive(0, pkey(0, 1, Direction::Forward, 0), descriptors, tp::cpu(), 5s);
    channel.send(0, pkey(0, 0, Direction::Backward, 0), got);
    for (auto end = std::chrono::steady_clock::now() + 5s;
         channel.pending() > 0 && std::chrono::steady_clock::now() < end;)
      std::this_thread::sleep_for(1ms);
    return channel.pending() == 0 ? 0 : 4;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ucx echo child: %s\n", e.what());
    return 1;
  }
}

// The child of the failure test: rank 1 says hello, then waits to be killed.
int doomed_child(int fd) {
  try {
    tr::UcxChannel channel(1, 2);
    if (!join_parent(channel, fd)) return 2;
    channel.send(0, pkey(0, 0, Direction::Backward, 0), {tp::ones({4})});
    std::this_thread::sleep_for(10s);  // killed long before
    return 0;
  } catch (const std::exception&) {
    return 1;
  }
}

// Reaps the child on every path; kills it when it does not finish in time.
struct Child {
  pid_t pid = -1;
  int status = -1;
  int wait(std::chrono::milliseconds limit) {
    for (auto end = std::chrono::steady_clock::now() + limit; pid > 0;) {
      pid_t done = waitpid(pid, &status, WNOHANG);
      if (done == pid) {
        pid = -1;
        break;
      }
      if (std::chrono::steady_clock::now() >= end) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        pid = -1;
        return -1;
      }
      std::this_thread::sleep_for(1ms);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  ~Child() {
    if (pid > 0) wait(0ms);
  }
};

// Forks a child that runs `body` on its end of a socket pair and exits with its result; returns
// this process's end. Fork before this process starts any UCX thread, so the child starts from
// one thread.
int fork_child(Child& child, int (*body)(int fd)) {
  int fds[2];
  REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
  child.pid = fork();
  REQUIRE(child.pid >= 0);
  if (child.pid == 0) {
    close(fds[0]);
    _exit(body(fds[1]));
  }
  close(fds[1]);
  return fds[0];
}

}  // namespace

TEST_CASE("a 1 MiB tensor crosses processes over ucx and comes back", "[transport][ucx][fork]") {
  Child child;
  int fd = fork_child(child, echo_child);

  tr::UcxChannel channel(0, 2);
  REQUIRE(write_bytes(fd, channel.address()));
  auto child_address = read_bytes(fd, 5s);
  close(fd);
  REQUIRE(child_address);
  channel.connect({{}, *child_address});

  tp::Tensor t = patterned({1 << 18}, tp::DType::Float32, 3);  // 1 MiB
  auto descriptors = channel.send(1, pkey(0, 1, Direction::Forward, 0), {t});
  auto back = channel.receive(1, pkey(0, 0, Direction::Backward, 0), descriptors, tp::cpu(), 5s);
  REQUIRE(back.size() == 1);
  CHECK(same_bytes(back[0], t));
  CHECK(child.wait(5s) == 0);
}

TEST_CASE("a ucx peer that dies fails the receives posted for it, naming its rank",
          "[transport][ucx][fork]") {
  if (tp::knob_string(tp::transport::kUcxErrorModeKnob) == "none") {
    WARN("TENSORPLAY_UCX_ERROR_MODE=none: dead peers are noticed by timeouts only");
    return;
  }
  Child child;
  int fd = fork_child(child, doomed_child);
  Outcomes outcomes;
  tr::UcxChannel channel(0, 2);
  REQUIRE(write_bytes(fd, channel.address()));
  auto child_address = read_bytes(fd, 5s);
  close(fd);
  REQUIRE(child_address);
  channel.connect({{}, *child_address});
  std::vector<tr::TensorDescriptor> four{tr::describe(tp::ones({4}))};
  channel.receive(1, pkey(0, 0, Direction::Backward, 0), four, tp::cpu(), 5s);  // it is up

  channel.post_receive(1, pkey(1, 0, Direction::Backward, 0), four, tp::cpu(), 30s,
                       outcomes.callback(0));
  kill(child.pid, SIGKILL);
  child.wait(5s);
  REQUIRE(outcomes.wait(1, 10s));
  CHECK_THAT(outcomes.results[0].second,
             Catch::Contains("connection to rank 1 failed") &&
                 Catch::Contains("step 1 stage 0 backward microbatch 0"));
  CHECK_THROWS_WITH(channel.send(1, pkey(2, 1, Direction::Forward, 0), {tp::ones({1})}),
                    Catch::Contains("rank 1"));
}
