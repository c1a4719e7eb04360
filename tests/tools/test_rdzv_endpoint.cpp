// tp-launch's elastic rendezvous over loopback TCP (rdzv_endpoint.h): two nodes meet at the
// endpoint and get their ranks; a failure ends the round for both; a lost node's partner goes on
// alone after the timeout; a returning node ends that round and both meet again; a wrong token is
// refused with the reason. Every wait is bounded.
#include <catch2/catch.hpp>
#include <future>

#include "rdzv_endpoint.h"

namespace {

namespace tl = tensorplay::launch;

tl::JoinRequest node(const std::string& id, int node_rank, const std::string& token = "t0ken") {
  return {.job_id = "job", .node_id = id, .node_rank = node_rank, .nproc = 2, .token = token};
}

}  // namespace

TEST_CASE("elastic: nodes meet at the endpoint, lose one, go on, and meet again",
          "[elastic][rdzv][endpoint]") {
  tl::RdzvServer server("127.0.0.1", 0,
                        {.job_id = "job",
                         .min_nodes = 1,
                         .max_nodes = 2,
                         .timeout_seconds = 0.5,
                         .max_restarts = 5,
                         .token = "t0ken"});
  tl::RdzvClient a("127.0.0.1", server.port(), 5);
  auto b = std::make_unique<tl::RdzvClient>("127.0.0.1", server.port(), 5);
  auto a_round = std::async(std::launch::async, [&] { return a.join(node("a", 0), 10); });
  const tl::RoundAssignment b0 = b->join(node("b", 1), 10);
  const tl::RoundAssignment a0 = a_round.get();
  CHECK(a0.round == 0);
  CHECK(a0.world_size == 4);
  CHECK(a0.rank_offset == 0);
  CHECK(b0.rank_offset == 2);
  CHECK(b0.master_addr == "127.0.0.1");
  CHECK_FALSE(a.round_ended(0.1));

  // A rank of b fails: the round ends for both; both join round 1.
  b->report_failure();
  CHECK(a.round_ended(5));
  CHECK(b->round_ended(5));
  a_round = std::async(std::launch::async, [&] { return a.join(node("a", 0), 10); });
  CHECK(b->join(node("b", 1), 10).round == 1);
  CHECK(a_round.get().world_size == 4);

  // b is lost (its launcher dies): a's round ends, and a goes on alone after the timeout.
  b.reset();
  CHECK(a.round_ended(5));
  const tl::RoundAssignment alone = a.join(node("a", 0), 10);
  CHECK(alone.round == 2);
  CHECK(alone.world_size == 2);
  CHECK(alone.nnodes == 1);

  // b comes back: a's round ends so that the next one has both.
  tl::RdzvClient back("127.0.0.1", server.port(), 5);
  auto back_round = std::async(std::launch::async, [&] { return back.join(node("b2", 1), 10); });
  CHECK(a.round_ended(5));
  const tl::RoundAssignment a3 = a.join(node("a", 0), 10);
  CHECK(a3.round == 3);
  CHECK(a3.world_size == 4);
  CHECK(back_round.get().rank_offset == 2);
}

TEST_CASE("elastic misuse: a wrong token is refused and fewer than MIN nodes time out",
          "[elastic][rdzv][endpoint][misuse]") {
  tl::RdzvServer server("127.0.0.1", 0,
                        {.job_id = "job",
                         .min_nodes = 2,
                         .max_nodes = 2,
                         .timeout_seconds = 0.3,
                         .max_restarts = 0,
                         .token = "t0ken"});
  tl::RdzvClient intruder("127.0.0.1", server.port(), 5);
  CHECK_THROWS_WITH(intruder.join(node("x", 0, "guess"), 5), Catch::Contains("cluster token"));
  tl::RdzvClient lonely("127.0.0.1", server.port(), 5);
  CHECK_THROWS_WITH(lonely.join(node("a", 0), 5),
                    Catch::Contains("only 1 node joined") && Catch::Contains("at least 2"));
  CHECK_THROWS_WITH(tl::RdzvClient("127.0.0.1", 1, 0.2), Catch::Contains("did not answer"));
}
