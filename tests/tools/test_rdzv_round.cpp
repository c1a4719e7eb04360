// tp-launch's elastic rendezvous rounds (rdzv_round.h) on a fake clock: membership and node
// order, a round of as many nodes as answer within the timeout, a failure starting the next round
// without the lost node, a returning node forcing a round, --max-restarts counting rounds, and
// misuse (another job, a wrong token, a node rank claimed twice, too few nodes).
#include <catch2/catch.hpp>

#include "rdzv_round.h"

namespace {

namespace tl = tensorplay::launch;

tl::RdzvConfig config(int min_nodes, int max_nodes, int max_restarts = 3) {
  return {.job_id = "job",
          .min_nodes = min_nodes,
          .max_nodes = max_nodes,
          .timeout_seconds = 10,
          .max_restarts = max_restarts,
          .token = "t0ken"};
}

tl::JoinRequest node(const std::string& id, int node_rank = -1, int nproc = 2) {
  return {.job_id = "job", .node_id = id, .node_rank = node_rank, .nproc = nproc, .token = "t0ken"};
}

}  // namespace

TEST_CASE("elastic: a round starts when MAX nodes join, ranks in node order", "[elastic][rdzv]") {
  tl::RoundKeeper keeper(config(1, 2));
  CHECK(keeper.join(node("b", 1, 3), 0.0).empty());
  CHECK_FALSE(keeper.running());
  CHECK(keeper.join(node("a", 0, 3), 0.5).empty());
  REQUIRE(keeper.running());
  const auto a = keeper.assignment("a"), b = keeper.assignment("b");
  REQUIRE(a);
  REQUIRE(b);
  CHECK(a->round == 0);
  CHECK(a->world_size == 6);
  CHECK(a->nnodes == 2);
  CHECK(a->node_index == 0);
  CHECK(a->rank_offset == 0);
  CHECK(b->node_index == 1);
  CHECK(b->rank_offset == 3);
  CHECK(b->members == std::vector<std::string>{"a", "b"});
  CHECK_FALSE(keeper.assignment("c"));
}

TEST_CASE("elastic: with fewer than MAX, a round starts at the timeout with at least MIN",
          "[elastic][rdzv]") {
  tl::RoundKeeper keeper(config(1, 3));
  CHECK(keeper.join(node("x"), 0.0).empty());
  CHECK(keeper.join(node("y"), 4.0).empty());
  keeper.poll(9.9);
  CHECK_FALSE(keeper.running());
  keeper.poll(10.0);
  REQUIRE(keeper.running());
  CHECK(keeper.assignment("y")->world_size == 4);
}

TEST_CASE("elastic: a lost node ends the round and the others go on without it until it returns",
          "[elastic][rdzv]") {
  tl::RoundKeeper keeper(config(1, 2));
  keeper.join(node("a", 0), 0);
  keeper.join(node("b", 1), 0);
  REQUIRE(keeper.running());
  keeper.fail("b", 12);  // node b's launcher and ranks are killed
  CHECK_FALSE(keeper.running());
  CHECK(keeper.round() == 1);
  keeper.join(node("a", 0), 12.5);  // a rejoins; b stays down
  keeper.poll(21);
  CHECK_FALSE(keeper.running());
  keeper.poll(22.5);  // the timeout since the round began gathering
  REQUIRE(keeper.running());
  CHECK(keeper.assignment("a")->round == 1);
  CHECK(keeper.assignment("a")->world_size == 2);
  CHECK_FALSE(keeper.wants_new_round());
  // b comes back: the running round is asked to end, and the next has both.
  CHECK(keeper.join(node("b2", 1), 40).empty());
  CHECK(keeper.wants_new_round());
  CHECK_FALSE(keeper.assignment("b2"));
  keeper.end_round(41);
  keeper.join(node("a", 0), 41.5);
  REQUIRE(keeper.running());  // MAX reached at once
  CHECK(keeper.assignment("b2")->round == 2);
  CHECK(keeper.assignment("b2")->rank_offset == 2);
  CHECK(keeper.assignment("a")->world_size == 4);
}

TEST_CASE("elastic: --max-restarts counts rounds", "[elastic][rdzv]") {
  tl::RoundKeeper keeper(config(1, 1, 1));
  keeper.join(node("a"), 0);
  keeper.fail("a", 1);
  CHECK(keeper.error().empty());
  keeper.join(node("a"), 2);
  REQUIRE(keeper.running());
  keeper.fail("a", 3);
  CHECK_THAT(keeper.error(), Catch::Contains("--max-restarts 1"));
  CHECK_THAT(keeper.join(node("a"), 4), Catch::Contains("--max-restarts 1"));
}

TEST_CASE("elastic misuse: another job, a wrong token, a node rank claimed twice, too few nodes",
          "[elastic][rdzv][misuse]") {
  tl::RoundKeeper keeper(config(2, 3));
  auto other_job = node("a");
  other_job.job_id = "other";
  CHECK_THAT(keeper.join(other_job, 0), Catch::Contains("--rdzv-id"));
  auto wrong_token = node("a");
  wrong_token.token = "guess";
  const std::string refused = keeper.join(wrong_token, 0);
  CHECK_THAT(refused, Catch::Contains("cluster token"));
  CHECK_THAT(refused, !Catch::Contains("t0ken") && !Catch::Contains("guess"));
  CHECK(keeper.join(node("a", 0), 0).empty());
  CHECK_THAT(keeper.join(node("b", 0), 1), Catch::Contains("claims node rank 0") &&
                                               Catch::Contains("'a'") &&
                                               Catch::Contains("--node-rank"));
  CHECK_THAT(keeper.join(node("c", 1, 0), 1), Catch::Contains("no ranks"));
  CHECK_THAT(keeper.join(node("d", 1, 3), 1), Catch::Contains("--nproc-per-node"));
  keeper.poll(10);
  CHECK_FALSE(keeper.running());
  CHECK_THAT(keeper.error(), Catch::Contains("only 1 node joined") &&
                                 Catch::Contains("at least 2") &&
                                 Catch::Contains("--rdzv-timeout"));
  CHECK_THROWS_AS(tl::RoundKeeper(config(3, 2)), std::invalid_argument);
}

TEST_CASE("elastic: JOIN and ROUND lines round-trip and other lines are refused",
          "[elastic][rdzv]") {
  std::string error;
  const auto join = tl::parse_join(tl::format_join(node("host-1.42", 3, 8)), error);
  REQUIRE(join);
  CHECK(join->job_id == "job");
  CHECK(join->node_id == "host-1.42");
  CHECK(join->node_rank == 3);
  CHECK(join->nproc == 8);
  CHECK(join->token == "t0ken");
  CHECK(tl::parse_join(tl::format_join(node("h")), error)->node_rank == -1);
  CHECK_FALSE(tl::parse_join("JOIN job h x 2 t", error));
  CHECK_THAT(error, Catch::Contains("'x'"));
  CHECK_FALSE(tl::parse_join("JOIN job h 0 2", error));
  CHECK_FALSE(tl::parse_join("HELLO", error));
  tl::RoundAssignment round{
      .round = 2, .world_size = 4, .nnodes = 2, .node_index = 1, .rank_offset = 2};
  const auto back = tl::parse_round(tl::format_round(round));
  REQUIRE(back);
  CHECK(back->round == 2);
  CHECK(back->world_size == 4);
  CHECK(back->rank_offset == 2);
  CHECK(back->master_addr == "-");
  round.master_addr = "10.0.0.1";
  CHECK(tl::parse_round(tl::format_round(round))->master_addr == "10.0.0.1");
  CHECK_FALSE(tl::parse_round("ROUND 0 4 2 2 0 h"));  // node index past the node count
  CHECK_FALSE(tl::parse_round("ROUND 0 4 2 1 4 h"));  // rank offset past the world
  CHECK_FALSE(tl::parse_round("ROUND 0 4 2 1 2"));    // no master address
}
