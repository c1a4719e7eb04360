// Tests for nccl_channel.h: two ranks exchange float32 and bfloat16 tensors in both directions at
// once (two processes on one GPU, or two threads on two GPUs), then a timeout aborts the channel;
// three processes on one GPU carry a skip connection (a send to a non-neighbour ahead of one to a
// neighbour), which one stream per direction deadlocked.
// The [cuda] cases skip without a GPU; the others check the clear errors of a build or machine
// without NCCL.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "pipeline_keys.h"
#include "tensorplay/tensor.h"
#include "tensorplay/transport/nccl_channel.h"

namespace tp = tensorplay;
namespace tr = tensorplay::transport;
using tensorplay::testing::Direction;
using tensorplay::testing::pkey;
using namespace std::chrono_literals;

namespace {

constexpr int kMicrobatches = 4;
// The two-process case hands the unique ids to its peer process through this variable.
constexpr const char* kIdsVariable = "TENSORPLAY_TEST_NCCL_IDS";
// The three-process case also hands each peer its rank.
constexpr const char* kRankVariable = "TENSORPLAY_TEST_NCCL_RANK";
// Names without Catch2's special characters, so that they also work as test specs.
constexpr const char* kTwoProcessTestName =
    "nccl channel: two processes on one GPU exchange both ways and then time out";
constexpr const char* kSkipTestName =
    "nccl channel: three processes on one GPU carry a skip connection past a neighbour";

tr::TransferKey tag_for(Direction direction, int microbatch) {
  return pkey(1, direction == Direction::Forward ? 1 : 0, direction, microbatch);
}

// What the sender of `tag` sends, on the host: float32 and bfloat16 values that differ per tag,
// a large tensor (past NCCL's staging buffers, so its send waits for the receiver), an absent
// gradient and an empty tensor.
std::vector<tp::Tensor> payload(const tr::TransferKey& key) {
  const tp::pipelining::PipelineTag tag = tp::pipelining::decode_pipeline_key(key);
  float base = static_cast<float>(tag.microbatch) * 1000.0f +
               (tag.direction == Direction::Backward ? 0.5f : 0.0f);
  std::vector<float> small(15), large(1024 * 1100), narrow(8);
  for (size_t i = 0; i < small.size(); ++i) small[i] = base + static_cast<float>(i);
  for (size_t i = 0; i < large.size(); ++i) large[i] = base + 0.25f * static_cast<float>(i);
  for (size_t i = 0; i < narrow.size(); ++i) narrow[i] = base / 7.0f - 1.3f * static_cast<float>(i);
  return {tp::from_vector(small, {3, 5}), tp::from_vector(large, {1024, 1100}),
          tp::from_vector(narrow, {2, 4}).to(tp::DType::BFloat16), tp::Tensor(), tp::zeros({0, 3})};
}

// "" when `got` holds exactly the bytes payload(tag) describes, on `device`; otherwise what
// differs. Plain strings, not Catch2 checks: it runs on the channel's completion thread.
std::string mismatch(const std::vector<tp::Tensor>& got, const tr::TransferKey& tag,
                     tp::Device device) {
  std::vector<tp::Tensor> want = payload(tag);
  std::string where = tr::to_string(tag) + ": ";
  if (got.size() != want.size())
    return where + std::to_string(got.size()) + " tensors, expected " + std::to_string(want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    std::string which = where + "tensor " + std::to_string(i) + " ";
    if (!want[i].defined()) {
      if (got[i].defined()) return which + "should be absent";
      continue;
    }
    if (!got[i].defined()) return which + "is missing";
    if (got[i].device() != device) return which + "is on " + tp::to_string(got[i].device());
    if (got[i].shape() != want[i].shape() || got[i].dtype() != want[i].dtype())
      return which + "is " + tp::to_string(got[i].shape()) + " " + tp::to_string(got[i].dtype());
    tp::Tensor host = got[i].cpu();
    if (host.nbytes() > 0 && std::memcmp(host.raw_data(), want[i].raw_data(), host.nbytes()) != 0)
      return which + "holds other bytes than were sent";
  }
  return {};
}

// Receives reported by the channel, from whichever thread it reports them on.
struct Inbox {
  std::mutex mutex;
  std::condition_variable cv;
  int count = 0;
  std::string errors;

  void record(const std::string& error) {
    {
      std::lock_guard lock(mutex);
      ++count;
      if (!error.empty()) errors += error + "\n";
    }
    cv.notify_all();
  }
  bool wait_for(int n, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex);
    return cv.wait_for(lock, timeout, [&] { return count >= n; });
  }
};

// One rank of a two-rank pipeline: rank 0 holds stage 0 (sends forward, receives backward), rank 1
// stage 1. Both directions are in flight at once. Rank 0 then checks that a receive its peer never
// sends times out, names its tag, and leaves the channel refusing further work. Returns "" or what
// went wrong (threads cannot use Catch2's checks).
std::string run_rank(int rank, tp::Device device, const std::vector<std::vector<uint8_t>>& ids) {
  std::string me = "rank " + std::to_string(rank) + ": ";
  Inbox inbox;  // outlives the channel, whose destructor may still report receives
  try {
    tr::NcclChannel channel(rank, 2, device, ids, 60s);
    if (channel.name() != "nccl") return me + "name() is " + channel.name();
    int peer = 1 - rank;
    Direction outgoing = rank == 0 ? Direction::Forward : Direction::Backward;
    Direction incoming = rank == 0 ? Direction::Backward : Direction::Forward;
    for (int mb = 0; mb < kMicrobatches; ++mb) {
      tr::TransferKey out = tag_for(outgoing, mb);
      std::vector<tp::Tensor> tensors;
      for (const tp::Tensor& t : payload(out)) tensors.push_back(t.defined() ? t.to(device) : t);
      std::vector<tr::TensorDescriptor> sent = channel.send(peer, out, tensors);
      if (sent.size() != tensors.size() || sent[3].defined)
        return me + "send returned the wrong descriptors";

      tr::TransferKey in = tag_for(incoming, mb);
      std::vector<tr::TensorDescriptor> descriptors;
      for (const tp::Tensor& t : payload(in)) descriptors.push_back(tr::describe(t));
      channel.post_receive(peer, in, descriptors, device, 30s,
                           [&inbox, in, device](std::vector<tp::Tensor> got, std::string error) {
                             inbox.record(error.empty() ? mismatch(got, in, device) : error);
                           });
    }
    if (!inbox.wait_for(kMicrobatches, 60s)) return me + "receives did not complete in 60 s";
    if (!inbox.errors.empty()) return me + inbox.errors;
    for (int i = 0; i < 10000 && channel.pending() > 0; ++i) std::this_thread::sleep_for(1ms);
    if (channel.pending() != 0) return me + "sends still pending after their receives";
    if (rank == 1) return {};

    tr::TransferKey never = tag_for(Direction::Backward, 99);
    std::vector<tr::TensorDescriptor> descriptors{tr::describe(tp::zeros({4}))};
    try {
      channel.receive(peer, never, descriptors, device, 300ms);
      return me + "a receive nobody sends completed";
    } catch (const tr::TransferError& e) {
      if (std::string(e.what()).find(tr::to_string(never)) == std::string::npos)
        return me + "the timeout does not name the transfer: " + e.what();
    }
    try {
      channel.send(peer, tag_for(Direction::Forward, 100), {tp::ones({4}).to(device)});
      return me + "a timed-out channel accepted another send";
    } catch (const tr::TransferError& e) {
      if (std::string(e.what()).find("failed earlier") == std::string::npos)
        return me + "the refusal does not say why: " + e.what();
    }
    if (channel.pending() != 0) return me + "transfers left pending after the abort";
  } catch (const std::exception& e) {
    return me + e.what();
  }
  return {};
}

// One rank of three with a skip connection, all forward: rank 0 sends to rank 2 (skip) and then
// to rank 1; rank 1 forwards to rank 2 once its receive from 0 arrived; rank 2 posts its receive
// from 1 before the one from 0. With one queue per direction rank 0's skip send waited for rank
// 2's receive from 0, queued behind the one from 1, which waited for rank 1, which waited for
// rank 0's send to 1, queued behind the skip send. Returns "" or what went wrong.
std::string run_skip_rank(int rank, const std::vector<std::vector<uint8_t>>& ids) {
  std::string me = "rank " + std::to_string(rank) + ": ";
  tp::Device device("cuda:0");
  auto neighbour_tag = [](int mb) { return tag_for(Direction::Forward, mb); };
  auto skip_tag = [](int mb) { return pkey(1, 2, Direction::Forward, mb); };
  auto on_device = [&](const tr::TransferKey& tag) {
    std::vector<tp::Tensor> tensors;
    for (const tp::Tensor& t : payload(tag)) tensors.push_back(t.defined() ? t.to(device) : t);
    return tensors;
  };
  Inbox inbox;
  auto post = [&](tr::NcclChannel& channel, int peer, const tr::TransferKey& tag) {
    std::vector<tr::TensorDescriptor> descriptors;
    for (const tp::Tensor& t : payload(tag)) descriptors.push_back(tr::describe(t));
    channel.post_receive(peer, tag, descriptors, device, 30s,
                         [&inbox, tag, device](std::vector<tp::Tensor> got, std::string error) {
                           inbox.record(error.empty() ? mismatch(got, tag, device) : error);
                         });
  };
  try {
    tr::NcclChannel channel(rank, 3, device, ids, 60s);
    for (int mb = 0; mb < kMicrobatches; ++mb) {
      if (rank == 0) {
        channel.send(2, skip_tag(mb), on_device(skip_tag(mb)));
        channel.send(1, neighbour_tag(mb), on_device(neighbour_tag(mb)));
      } else if (rank == 1) {
        post(channel, 0, neighbour_tag(mb));
        if (!inbox.wait_for(mb + 1, 60s))
          return me + "the receive from rank 0 of microbatch " + std::to_string(mb) +
                 " did not complete in 60 s";
        channel.send(2, neighbour_tag(mb), on_device(neighbour_tag(mb)));
      } else {
        post(channel, 1, neighbour_tag(mb));
        post(channel, 0, skip_tag(mb));
      }
    }
    int expected = rank == 0 ? 0 : rank == 1 ? kMicrobatches : 2 * kMicrobatches;
    if (!inbox.wait_for(expected, 60s)) return me + "receives did not complete in 60 s";
    if (!inbox.errors.empty()) return me + inbox.errors;
    for (int i = 0; i < 10000 && channel.pending() > 0; ++i) std::this_thread::sleep_for(1ms);
    if (channel.pending() != 0) return me + "sends still pending after their receives";
  } catch (const std::exception& e) {
    return me + e.what();
  }
  return {};
}

std::string to_hex(const std::vector<uint8_t>& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string text;
  for (uint8_t b : bytes) {
    text += digits[b >> 4];
    text += digits[b & 15];
  }
  return text;
}

std::vector<uint8_t> from_hex(const std::string& text) {
  std::vector<uint8_t> bytes;
  for (size_t i = 0; i + 1 < text.size(); i += 2)
    bytes.push_back(static_cast<uint8_t>(std::stoi(text.substr(i, 2), nullptr, 16)));
  return bytes;
}

// Starts this test binary again as rank 1, running only the two-process case. NCCL refuses two
// ranks of one group on one GPU of one host, so the peer claims another host (NCCL_HOSTID) and
// both talk through sockets on the loopback interface.
pid_t spawn_peer(const std::vector<std::vector<uint8_t>>& ids, int rank = 1,
                 const char* test_name = kTwoProcessTestName) {
  std::vector<std::string> variables{
      std::string(kIdsVariable) + "=" + to_hex(ids[0]) + to_hex(ids[1]),
      std::string(kRankVariable) + "=" + std::to_string(rank),
      "NCCL_HOSTID=tensorplay-nccl-test-peer-" + std::to_string(rank), "NCCL_NET=Socket",
      "NCCL_SOCKET_IFNAME=lo"};
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry = *e;
    bool replaced = false;
    for (const char* name :
         {kIdsVariable, kRankVariable, "NCCL_HOSTID", "NCCL_NET", "NCCL_SOCKET_IFNAME"})
      replaced = replaced || entry.rfind(std::string(name) + "=", 0) == 0;
    if (!replaced) variables.push_back(entry);
  }
  std::vector<char*> envp;
  for (std::string& v : variables) envp.push_back(v.data());
  envp.push_back(nullptr);
  std::string self = "/proc/self/exe", spec = test_name;
  std::string warn = "--warn", no_tests = "NoTests";  // a spec matching nothing fails the peer
  std::vector<char*> argv{self.data(), spec.data(), warn.data(), no_tests.data(), nullptr};
  pid_t pid = -1;
  if (posix_spawn(&pid, self.c_str(), nullptr, nullptr, argv.data(), envp.data()) != 0) return -1;
  return pid;
}

// The peer's exit status, or -1 when it had to be killed after `timeout`.
int wait_peer(pid_t pid, std::chrono::seconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() >= deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(10ms);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// True (after a visible warning) when this machine or build cannot run NCCL.
bool skip_without_nccl() {
  if (!tp::cuda_available()) {
    WARN("no CUDA device: skipped");
    return true;
  }
  if (!tr::nccl_available()) {
    WARN("built without NCCL: skipped");
    return true;
  }
  return false;
}

}  // namespace

TEST_CASE("nccl channel: without NCCL or a GPU making one is a clear error", "[transport]") {
  if (tr::nccl_available()) {
    SUCCEED("NCCL and a GPU are present: the [cuda] cases cover the channel");
    return;
  }
  CHECK_THROWS_AS(tr::nccl_unique_id(), tr::TransferError);
  std::vector<std::vector<uint8_t>> ids{std::vector<uint8_t>(128, 1), std::vector<uint8_t>(128, 2)};
  CHECK_THROWS_WITH(
      tr::NcclChannel(0, 2, tp::Device("cuda:0"), ids),
      Catch::Contains("nccl channel") &&
          (Catch::Contains("built without NCCL") || Catch::Contains("no CUDA device is visible")));
}

TEST_CASE("nccl channel: arguments are checked before any device is touched", "[transport]") {
  std::vector<uint8_t> a(128, 1), b(128, 2);
  // What making a channel throws; a build without NCCL refuses every channel for that reason.
  auto refusal = [](int rank, tp::Device device, const std::vector<std::vector<uint8_t>>& ids) {
    try {
      tr::NcclChannel channel(rank, 2, device, ids);
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("nothing thrown");
  };
  tp::Device gpu("cuda:0");
  std::vector<uint8_t> short_id(5);
  // Matchers combined in place: Catch2 keeps pointers to the parts, so a helper cannot return them.
  CHECK_THAT(refusal(2, gpu, {a, b}), Catch::Contains("is not a rank of a group of 2") ||
                                          Catch::Contains("built without NCCL"));
  CHECK_THAT(refusal(0, tp::cpu(), {a, b}),
             Catch::Contains("needs a CUDA device") || Catch::Contains("built without NCCL"));
  CHECK_THAT(refusal(0, gpu, {a}),
             Catch::Contains("needs two unique ids") || Catch::Contains("built without NCCL"));
  CHECK_THAT(refusal(0, gpu, {a, short_id}), Catch::Contains("make them with nccl_unique_id()") ||
                                                 Catch::Contains("built without NCCL"));
  CHECK_THAT(refusal(0, gpu, {a, a}),
             Catch::Contains("make two") || Catch::Contains("built without NCCL"));
}

// Runs first among the [cuda] cases: it pins NCCL to sockets before NCCL reads its environment.
// The same case is the peer: spawn_peer() runs it again as rank 1, with the ids in the environment.
TEST_CASE(kTwoProcessTestName, "[cuda]") {
  if (const char* ids_text = std::getenv(kIdsVariable)) {
    std::string text = ids_text;
    REQUIRE(text.size() == 4 * 128);
    std::vector<std::vector<uint8_t>> ids{from_hex(text.substr(0, 256)),
                                          from_hex(text.substr(256))};
    CHECK(run_rank(1, tp::Device("cuda:0"), ids) == "");
    return;
  }
  if (skip_without_nccl()) return;
  setenv("NCCL_NET", "Socket", 1);
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  std::vector<std::vector<uint8_t>> ids{tr::nccl_unique_id(), tr::nccl_unique_id()};
  pid_t peer = spawn_peer(ids);
  REQUIRE(peer > 0);
  std::string error = run_rank(0, tp::Device("cuda:0"), ids);
  int peer_status = wait_peer(peer, 60s);
  CHECK(error == "");
  CHECK(peer_status == 0);
}

TEST_CASE(kSkipTestName, "[cuda]") {
  if (const char* ids_text = std::getenv(kIdsVariable)) {
    std::string text = ids_text;
    REQUIRE(text.size() == 4 * 128);
    const char* rank_text = std::getenv(kRankVariable);
    REQUIRE(rank_text != nullptr);
    std::vector<std::vector<uint8_t>> ids{from_hex(text.substr(0, 256)),
                                          from_hex(text.substr(256))};
    CHECK(run_skip_rank(std::atoi(rank_text), ids) == "");
    return;
  }
  if (skip_without_nccl()) return;
  setenv("NCCL_NET", "Socket", 1);
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  std::vector<std::vector<uint8_t>> ids{tr::nccl_unique_id(), tr::nccl_unique_id()};
  pid_t peer1 = spawn_peer(ids, 1, kSkipTestName);
  pid_t peer2 = spawn_peer(ids, 2, kSkipTestName);
  REQUIRE(peer1 > 0);
  REQUIRE(peer2 > 0);
  std::string error = run_skip_rank(0, ids);
  int status1 = wait_peer(peer1, 90s);
  int status2 = wait_peer(peer2, 90s);
  CHECK(error == "");
  CHECK(status1 == 0);
  CHECK(status2 == 0);
}

// Needs two GPUs ([multi_gpu]: the GPU check runs it only where there are two).
TEST_CASE("nccl channel: two threads on two GPUs exchange both ways and then time out",
          "[cuda][multi_gpu]") {
  if (skip_without_nccl()) return;
  if (tp::cuda_device_count() < 2) {
    WARN("one CUDA device: skipped (NCCL needs a GPU per rank; the two-process case covers one)");
    return;
  }
  std::vector<std::vector<uint8_t>> ids{tr::nccl_unique_id(), tr::nccl_unique_id()};
  std::string error1;
  std::thread rank1([&] { error1 = run_rank(1, tp::Device("cuda:1"), ids); });
  std::string error0 = run_rank(0, tp::Device("cuda:0"), ids);
  rank1.join();
  CHECK(error0 == "");
  CHECK(error1 == "");
}
