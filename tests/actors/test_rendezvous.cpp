// Tests for detail/rendezvous.h: rank 0's record of the rendezvous (the table once every rank
// joined, each refusal ending it for every rank with the reason, the first joined rank's timeout
// ending it naming the ranks that did not join), and each rendezvous state's timeout and error,
// with the ranks of a job joined in this process and one state stalled past the deadline.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <caf/all.hpp>
#include <catch2/catch.hpp>
#include <string>
#include <thread>

#include "in_process_job.h"
#include "tensorplay/distributed/detail/rendezvous.h"
#include "tensorplay/wire/detail/caf_system.h"

namespace dd = tensorplay::distributed::detail;
using Kind = dd::HelloOutcome::Kind;

namespace {

/// Entries of a job's ranks, each naming one idle actor as its process actor.
struct Job {
  // Spawned with an argument: CAF 0.17 dereferences the empty argument tuple of an actor spawned
  // without one (harmless, but UndefinedBehaviorSanitizer stops on it).
  caf::actor actor = tensorplay::pipelining::detail::process_actor_system().spawn(
      [](int) { return caf::behavior{[](int) {}}; }, 0);

  dd::PeerEntry entry(int rank, int world_size = 4, std::string token = "t") {
    dd::PeerEntry e;
    e.rank = rank;
    e.world_size = world_size;
    e.host = "10.0.0." + std::to_string(rank);
    e.token = std::move(token);
    e.actor = actor;
    e.timeout_ms = 2000;
    return e;
  }
  ~Job() { caf::anon_send_exit(actor, caf::exit_reason::user_shutdown); }
};

}  // namespace

TEST_CASE("the table comes once every rank joined, sorted by rank", "[rendezvous]") {
  Job job;
  dd::RendezvousBook book(3, "t");
  CHECK(book.hello(job.entry(2, 3), true).kind == Kind::kWait);
  CHECK(book.hello(job.entry(0, 3), true).kind == Kind::kWait);
  CHECK(book.summary() == "rank(s) [1] of 3 did not join (joined: [0, 2])");
  CHECK(book.hello(job.entry(1, 3), true).kind == Kind::kComplete);
  REQUIRE(book.table().size() == 3);
  for (int r = 0; r < 3; ++r) CHECK(book.table()[r].rank == r);
  CHECK_FALSE(book.open());
  CHECK(book.expire(0).empty());  // over: a timer that fires late ends nothing
  // After the rendezvous a hello is refused alone (a process late or duplicated).
  auto late = book.hello(job.entry(1, 3), true);
  CHECK(late.kind == Kind::kRefuse);
  CHECK_THAT(late.to_sender, Catch::Contains("rank 1 joined already"));
}

TEST_CASE("a refused rank ends the rendezvous for every rank, with the reason", "[rendezvous]") {
  struct Case {
    dd::PeerEntry entry;
    std::string why;
  };
  Job job;
  auto protocol = job.entry(3);
  protocol.protocol = 1;
  auto forged = job.entry(3);
  const std::vector<Case> cases = {
      {job.entry(3, 5), "it was started with WORLD_SIZE=5, rank 0 with WORLD_SIZE=4"},
      {job.entry(6, 8), "(RANK=6 is out of range for rank 0's 4 ranks)"},
      {job.entry(3, 4, "other"), "presented a different cluster token (TENSORPLAY_CLUSTER_TOKEN)"},
      {job.entry(3, 4, ""), "presented no cluster token"},
      {job.entry(1), "rank 1 joined already (from 10.0.0.1); each process needs its own RANK"},
      {job.entry(-1), "RANK=-1 is out of range for WORLD_SIZE=4 (ranks 0 to 3)"},
      {protocol, "it speaks rendezvous protocol 1, rank 0 " +
                     std::to_string(tensorplay::pipelining::detail::kRendezvousProtocol) +
                     "; start every rank from the same"},
  };
  for (const Case& c : cases) {
    INFO(c.why);
    dd::RendezvousBook book(4, "t");
    REQUIRE(book.hello(job.entry(0), true).kind == Kind::kWait);
    REQUIRE(book.hello(job.entry(1), true).kind == Kind::kWait);
    auto out = book.hello(c.entry, true);
    CHECK(out.kind == Kind::kEnd);
    CHECK_THAT(out.to_sender, Catch::StartsWith("rank 0 refused rank " +
                                                std::to_string(c.entry.rank) + " (10.0.0.") &&
                                  Catch::Contains(c.why));
    CHECK_THAT(out.to_waiting, Catch::StartsWith("the rendezvous ended: rank 0 refused rank") &&
                                   Catch::Contains(c.why) &&
                                   Catch::EndsWith("rank(s) [2, 3] of 4 did not join (joined: "
                                                   "[0, 1])"));
    CHECK_FALSE(book.open());
    // Ranks that come later hear why at once.
    auto late = book.hello(job.entry(2), true);
    CHECK(late.kind == Kind::kRefuse);
    CHECK_THAT(late.to_sender,
               Catch::StartsWith("the rendezvous ended already: ") && Catch::Contains(c.why));
  }
  dd::RendezvousBook book(4, "t");
  auto out = book.hello(forged, false);
  CHECK(out.kind == Kind::kEnd);
  CHECK_THAT(out.to_sender, Catch::Contains("names a process actor on another node"));
}

TEST_CASE("a rank of another job is refused alone, naming both jobs, and the rendezvous goes on",
          "[rendezvous]") {
  Job job;
  dd::RendezvousBook book(2, "", "slurm-7.0");
  auto mine = [&](int rank) {
    auto e = job.entry(rank, 2, "");
    e.job = "slurm-7.0";
    return e;
  };
  REQUIRE(book.hello(mine(0), true).kind == Kind::kWait);
  // Another job's rank 1, with the same (empty) token: refused, this job's rendezvous still open.
  auto stranger = job.entry(1, 2, "");
  stranger.job = "slurm-8.0";
  auto out = book.hello(stranger, true);
  CHECK(out.kind == Kind::kRefuse);
  CHECK_THAT(
      out.to_sender,
      Catch::StartsWith("rank 0 of job slurm-7.0 refused rank 1 (10.0.0.1) of job slurm-8.0"));
  CHECK(book.open());
  // Without a job id on one side, it is still another job.
  auto nameless = job.entry(1, 2, "");
  CHECK_THAT(book.hello(nameless, true).to_sender, Catch::Contains("of job (no job id)"));
  CHECK(book.hello(mine(1), true).kind == Kind::kComplete);
}

TEST_CASE("the first joined rank's timeout ends the rendezvous naming who did not join",
          "[rendezvous]") {
  Job job;
  dd::RendezvousBook book(4, "t");
  CHECK(book.expire(2).empty());  // not joined: nothing to end
  REQUIRE(book.hello(job.entry(0), true).kind == Kind::kWait);
  REQUIRE(book.hello(job.entry(3), true).kind == Kind::kWait);
  REQUIRE(book.hello(job.entry(1), true).kind == Kind::kWait);
  const std::string why = book.expire(3);
  CHECK(why ==
        "the rendezvous did not complete within rank 3's timeout of 2000 ms "
        "(TENSORPLAY_RDZV_TIMEOUT, "
        "tp-launch --rdzv-timeout, or init_process_group's .timeout): rank(s) [2] of 4 did not "
        "join (joined: [0, 1, 3])");
  CHECK_FALSE(book.open());
  CHECK(book.expire(0).empty());  // ended once
  CHECK_THAT(book.hello(job.entry(2), true).to_sender,
             Catch::Contains("ended already") && Catch::Contains("[2] of 4 did not join"));
}

namespace {

/// Stalls `rank` for `stall` as it enters `state`, while alive.
struct StallState {
  StallState(int rank, dd::RdzvState state, std::chrono::milliseconds stall) {
    dd::set_rdzv_state_hook([=](int r, dd::RdzvState s) {
      if (r == rank && s == state) std::this_thread::sleep_for(stall);
    });
  }
  ~StallState() { dd::set_rdzv_state_hook(nullptr); }
};

constexpr auto kRdzvTimeout = std::chrono::milliseconds(1500);
constexpr auto kStall = std::chrono::milliseconds(1800);  // past the rendezvous's deadline

}  // namespace

TEST_CASE("rendezvous states are named and ordered", "[rendezvous]") {
  std::string names;
  for (dd::RdzvState s : dd::kRdzvStates) names += std::string(dd::to_string(s)) + " ";
  CHECK(names == "publish hello connect clock transport barrier ");
}

TEST_CASE("each rendezvous state fails on its timeout, naming itself and who was waited for",
          "[rendezvous][join_job]") {
  using dd::RdzvState;
  using tensorplay::testing::run_ranks;
  SECTION("hello: rank 0 alone names the ranks that did not join") {
    auto out = run_ranks(2, {0}, kRdzvTimeout);
    CHECK_THAT(out[0].error, Catch::Contains("rank(s) [1] of 2 did not join") &&
                                 Catch::EndsWith("(rendezvous state: hello)"));
  }
  SECTION("hello: a rank without rank 0 names the address it tried") {
    auto out = run_ranks(2, {1}, std::chrono::milliseconds(300));
    CHECK_THAT(out[0].error, Catch::Contains("could not reach rank 0 at 127.0.0.1:") &&
                                 Catch::EndsWith("(rendezvous state: hello)"));
  }
  for (RdzvState stalled :
       {RdzvState::kConnect, RdzvState::kClock, RdzvState::kTransport, RdzvState::kBarrier}) {
    DYNAMIC_SECTION(dd::to_string(stalled) << ": the stalled rank and the ones that wait for it") {
      StallState stall(2, stalled, kStall);
      auto out = run_ranks(3, {0, 1, 2}, kRdzvTimeout);
      CHECK_THAT(
          out[2].error,
          Catch::Contains("rank 2 ran out of rank 2's rendezvous timeout of 1500 ms") &&
              Catch::EndsWith(std::string("(rendezvous state: ") + dd::to_string(stalled) + ")"));
      for (int r : {0, 1})
        CHECK_THAT(out[r].error, Catch::Contains("rank(s) [2] did not take part") &&
                                     Catch::EndsWith("(rendezvous state: barrier)"));
    }
  }
}

TEST_CASE("a port in use fails the publish state, saying what to check", "[rendezvous][join_job]") {
  const int port = tensorplay::testing::free_port();
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  REQUIRE(::listen(fd, 1) == 0);
  std::string error;
  try {
    tensorplay::distributed::join_job({.timeout = std::chrono::milliseconds(500),
                                       .env = tensorplay::testing::loopback_env(0, 2, port)});
  } catch (const std::exception& e) {
    error = e.what();
  }
  ::close(fd);
  CHECK_THAT(error, Catch::Contains("could not listen on 127.0.0.1:" + std::to_string(port)) &&
                        Catch::Contains("is MASTER_PORT in use?") &&
                        Catch::EndsWith("(rendezvous state: publish)"));
}

TEST_CASE("a port another job's rank 0 listens on fails the publish state, naming that job",
          "[rendezvous][join_job]") {
  // Finding 1: CAF shares a listening port (SO_REUSEPORT), so a second job's rank 0 listened there
  // too and the ranks of the two jobs met at random.
  const int port = tensorplay::testing::free_port();
  auto first = tensorplay::testing::loopback_env(0, 2, port);
  first.job_id = "slurm-41.0";
  std::thread holder([&] {
    try {  // waits for its rank 1, which never comes
      tensorplay::distributed::join_job({.timeout = std::chrono::milliseconds(3000), .env = first});
    } catch (const std::exception&) {
    }
  });
  // Until the first rank 0 listens.
  for (int i = 0; i < 200; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<uint16_t>(port));
    const bool up = ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
    ::close(fd);
    if (up) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  auto second = tensorplay::testing::loopback_env(0, 2, port);
  second.job_id = "slurm-42.0";
  std::string error;
  try {
    tensorplay::distributed::join_job({.timeout = std::chrono::milliseconds(2000), .env = second});
  } catch (const std::exception& e) {
    error = e.what();
  }
  holder.join();
  CHECK_THAT(error,
             Catch::Contains("rank 0 could not listen on 127.0.0.1:" + std::to_string(port)) &&
                 Catch::Contains("rank 0 of job slurm-41.0 listens there already") &&
                 Catch::Contains("MASTER_PORT=" + std::to_string(port)) &&
                 Catch::EndsWith("(rendezvous state: publish)"));
}
