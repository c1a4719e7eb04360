// Tests for detail/rendezvous.h, rank 0's record of the rendezvous: the table once every rank
// joined, each refusal ending it for every rank with the reason, and the first joined rank's
// timeout ending it naming the ranks that did not join.
#include <caf/all.hpp>
#include <catch2/catch.hpp>
#include <string>

#include "actors/detail/caf_system.h"
#include "actors/detail/rendezvous.h"

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
