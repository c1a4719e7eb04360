#include <catch2/catch.hpp>
#include <cstring>
#include <type_traits>
#include <unordered_set>

#include "tensorplay/schedules/action.h"

using namespace tensorplay::schedules;

TEST_CASE("actions print in PyTorch's form", "[action]") {
  CHECK(to_string(make_action(1, ActionKind::Forward, 0)) == "1F0");
  CHECK(to_string(make_action(0, ActionKind::FullBackward, 3)) == "0B3");
  CHECK(to_string(make_action(2, ActionKind::BackwardInput, 5)) == "2I5");
  CHECK(to_string(make_action(2, ActionKind::BackwardWeight, 5)) == "2W5");
  CHECK(to_string(make_action(3, ActionKind::SendF, 1)) == "3SEND_F1");
  CHECK(to_string(make_action(3, ActionKind::RecvF, 1)) == "3RECV_F1");
  CHECK(to_string(make_action(3, ActionKind::SendB, 12)) == "3SEND_B12");
  CHECK(to_string(make_action(3, ActionKind::RecvB, 12)) == "3RECV_B12");
  Action overlap = make_overlap(make_action(0, ActionKind::Forward, 3),
                                make_action(3, ActionKind::FullBackward, 1));
  CHECK(to_string(overlap) == "(0F3;3B1)OVERLAP_F_B");
}

TEST_CASE("parse_action inverts to_string", "[action]") {
  for (const char* text : {"2F0", "0B3", "3SEND_F1", "4RECV_F0", "1SEND_B7", "0RECV_B2", "12I34",
                           "7W0", "(0F7;7B3)OVERLAP_F_B"}) {
    CHECK(to_string(parse_action(text)) == text);
  }
  Action parsed = parse_action(" (0F7; 7B3)OVERLAP_F_B ");
  REQUIRE(parsed.kind == ActionKind::OverlapFB);
  REQUIRE(parsed.sub_actions.size() == 2);
  CHECK(parsed.sub_actions[0] == make_action(0, ActionKind::Forward, 7));
  CHECK(parsed.sub_actions[1] == make_action(7, ActionKind::FullBackward, 3));
}

TEST_CASE("parse_action rejects bad text with a clear message", "[action]") {
  CHECK_THROWS_WITH(parse_action(""), Catch::Contains("empty"));
  CHECK_THROWS_WITH(parse_action("F0"), Catch::Contains("stage number"));
  CHECK_THROWS_WITH(parse_action("1X0"), Catch::Contains("unknown action kind"));
  CHECK_THROWS_WITH(parse_action("1F"), Catch::Contains("microbatch number is missing"));
  CHECK_THROWS_WITH(parse_action("1F0x"), Catch::Contains("unexpected text"));
  CHECK_THROWS_WITH(parse_action("(0F1;1B0"), Catch::Contains("matching ')'"));
  CHECK_THROWS_WITH(parse_action("(0F1;1B0)SEND_F"), Catch::Contains("OVERLAP_F_B"));
  CHECK_THROWS_AS(parse_action("(0F1)OVERLAP_F_B"), std::invalid_argument);
}

TEST_CASE("actions compare and hash by value", "[action]") {
  std::unordered_set<Action, ActionHash> set;
  set.insert(make_action(1, ActionKind::Forward, 0));
  set.insert(make_action(1, ActionKind::Forward, 0));
  set.insert(make_action(0, ActionKind::Forward, 1));
  set.insert(parse_action("(0F7;7B3)OVERLAP_F_B"));
  CHECK(set.size() == 3);
  CHECK(set.count(parse_action("(0F7;7B3)OVERLAP_F_B")) == 1);
  CHECK(make_action(1, ActionKind::Forward, 0) != make_action(1, ActionKind::FullBackward, 0));
}

TEST_CASE("kind helpers", "[action]") {
  CHECK(is_compute(ActionKind::OverlapFB));
  CHECK_FALSE(is_compute(ActionKind::SendF));
  CHECK(is_input_backward(ActionKind::BackwardInput));
  CHECK(is_input_backward(ActionKind::FullBackward));
  CHECK_FALSE(is_input_backward(ActionKind::BackwardWeight));
  CHECK(frees_activation(ActionKind::BackwardWeight));
  CHECK(frees_activation(ActionKind::FullBackward));
  CHECK(kind_name(ActionKind::RecvB) == "RECV_B");
}

TEST_CASE("rank orders print and parse as space-separated lists", "[action]") {
  RankOrder order = parse_rank_order("0F0 0F1, 0B0 (0F2;3B0)OVERLAP_F_B");
  REQUIRE(order.size() == 4);
  CHECK(to_string(order) == "0F0 0F1 0B0 (0F2;3B0)OVERLAP_F_B");
}

TEST_CASE("an action is a small plain value, with OVERLAP_F_B's parts inline", "[action]") {
  static_assert(std::is_trivially_copyable_v<Action>);
  static_assert(sizeof(Action) <= 32);
  Action overlap = parse_action("(0F7;7B3)OVERLAP_F_B");
  Action copy;
  std::memcpy(&copy, &overlap, sizeof(Action));  // what trivially copyable allows
  CHECK(copy == overlap);
  CHECK(to_string(copy) == "(0F7;7B3)OVERLAP_F_B");
  std::vector<Action> parts(overlap.sub_actions.begin(), overlap.sub_actions.end());
  REQUIRE(parts.size() == 2);
  CHECK(parts[1] == make_action(7, ActionKind::FullBackward, 3));
  CHECK_THROWS_AS(overlap.sub_actions.at(2), std::out_of_range);
  CHECK_THROWS_WITH(copy.sub_actions.push_back(make_action(1, ActionKind::Forward, 0)),
                    Catch::Contains("at most 2"));
  Action nested;
  CHECK_THROWS_WITH(nested.sub_actions.push_back(overlap), Catch::Contains("cannot have"));
  CHECK(make_overlap(make_action(0, ActionKind::Forward, 1),
                     make_action(1, ActionKind::FullBackward, 0)) !=
        make_overlap(make_action(0, ActionKind::Forward, 1),
                     make_action(1, ActionKind::FullBackward, 1)));
}

TEST_CASE("one count of stashed activations", "[action]") {
  CHECK(activations_taken(parse_action("0F0")) == 1);
  CHECK(activations_freed(parse_action("0F0")) == 0);
  CHECK(activations_taken(parse_action("0I0")) == 0);
  CHECK(activations_freed(parse_action("0I0")) == 0);
  CHECK(activations_freed(parse_action("0W0")) == 1);
  CHECK(activations_freed(parse_action("0B0")) == 1);
  Action overlap = parse_action("(0F7;7B3)OVERLAP_F_B");
  CHECK(activations_taken(overlap) == 1);
  CHECK(activations_freed(overlap) == 1);
}
