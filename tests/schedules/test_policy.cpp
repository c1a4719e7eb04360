#include <catch2/catch.hpp>

#include "tensorplay/schedules/generators.h"
#include "tensorplay/schedules/policy.h"

using namespace tensorplay::schedules;

TEST_CASE("the static policy follows its order and waits for inputs", "[policy]") {
  auto policy = make_static_order_policy(parse_rank_order("1F0 1F1 1B0 1B1"));
  ReadySet ready(2, 2);
  CHECK_FALSE(policy->next(ready));
  CHECK(policy->describe_wait(ready) ==
        "waiting for 1F0: input not arrived (action 0 of 4 in the static order)");
  ready.input_arrived(1, 1);  // 1F1 arrives first: still waits for 1F0
  CHECK_FALSE(policy->next(ready));
  ready.input_arrived(1, 0);
  auto action = policy->next(ready);
  REQUIRE(action);
  CHECK(to_string(*action) == "1F0");
  ready.completed(*action);
  policy->completed(*action);
  CHECK(to_string(*policy->next(ready)) == "1F1");
  CHECK_FALSE(policy->finished());
  CHECK(policy->total_actions() == 4);
}

TEST_CASE("the static policy runs a whole rank order and resets", "[policy]") {
  auto policy = make_static_order_policy(one_f_one_b_order(1, 3)[0]);
  for (int step = 0; step < 2; ++step) {
    ReadySet ready(1, 3);
    int ran = 0;
    while (auto action = policy->next(ready)) {
      ready.completed(*action);
      policy->completed(*action);
      ++ran;
    }
    CHECK(ran == 6);
    CHECK(policy->finished());
    CHECK_THAT(policy->describe_wait(ready), Catch::StartsWith("finished"));
    policy->reset();
  }
  CHECK_THROWS_WITH(make_static_order_policy(parse_rank_order("0F0 0SEND_F0")),
                    Catch::Contains("compute actions only"));
  // Its 8-byte entries hold microbatches below 2^28; a negative one is refused, not mistaken for
  // something else.
  CHECK_THROWS_WITH(
      make_static_order_policy({make_action(0, ActionKind::Forward, -1)}),
      Catch::Contains("microbatches 0 to 268435455") && Catch::Contains("position 0"));
  CHECK_THROWS_WITH(make_static_order_policy({make_action(0, ActionKind::Forward, 0),
                                              make_action(0, ActionKind::Forward, 1 << 28)}),
                    Catch::Contains("position 1"));
  auto large = make_static_order_policy({make_action(0, ActionKind::Forward, (1 << 28) - 1)});
  CHECK(large->next_in_order() == make_action(0, ActionKind::Forward, (1 << 28) - 1));
}

TEST_CASE("the dynamic policy prefers backward, then forward, then W", "[policy]") {
  DynamicPolicyOptions options;
  options.split_backward = true;
  auto policy = make_dynamic_policy({1}, 2, 2, options);  // last stage of 2
  ReadySet ready(2, 2);
  ready.input_arrived(1, 0);
  ready.input_arrived(1, 1);
  auto run = [&](const char* expected) {
    auto action = policy->next(ready);
    REQUIRE(action);
    CHECK(to_string(*action) == expected);
    ready.completed(*action);
    policy->completed(*action);
  };
  run("1F0");
  run("1I0");  // backward before the ready 1F1
  run("1F1");
  run("1I1");
  run("1W0");  // W only once nothing else is ready
  run("1W1");
  CHECK(policy->finished());
  CHECK_FALSE(policy->next(ready));
}

TEST_CASE("the dynamic policy's cap holds back new microbatches", "[policy]") {
  DynamicPolicyOptions options;
  options.max_stashed_activations = 1;
  auto policy = make_dynamic_policy({0}, 2, 3, options);
  ReadySet ready(2, 3);
  auto first = policy->next(ready);
  REQUIRE(first);
  CHECK(to_string(*first) == "0F0");
  ready.completed(*first);
  policy->completed(*first);
  CHECK_FALSE(policy->next(ready));  // 0F1 is ready but the cap is reached
  CHECK_THAT(policy->describe_wait(ready), Catch::Contains("activation cap 1 reached") &&
                                               Catch::Contains("0B0: gradient not arrived"));
  ready.grad_arrived(0, 0);
  auto backward = policy->next(ready);
  REQUIRE(backward);
  CHECK(to_string(*backward) == "0B0");
  ready.completed(*backward);
  policy->completed(*backward);
  CHECK(to_string(*policy->next(ready)) == "0F1");
}

TEST_CASE("the dynamic policy rejects a cap that makes progress impossible", "[policy]") {
  DynamicPolicyOptions options;
  options.max_stashed_activations = 1;
  CHECK_THROWS_WITH(make_dynamic_policy({0, 3}, 4, 4, options),
                    Catch::Contains("makes progress impossible") && Catch::Contains("at least 2"));
  CHECK_THROWS_AS(make_dynamic_policy({}, 4, 4, {}), std::invalid_argument);
  CHECK_THROWS_AS(make_dynamic_policy({5}, 4, 4, {}), std::invalid_argument);
  CHECK_THROWS_AS(make_dynamic_policy({1, 1}, 4, 4, {}), std::invalid_argument);
  CHECK(make_dynamic_policy({0, 3}, 4, 4, {})->total_actions() == 16);
}

TEST_CASE("the static policy names the action it waits for, the dynamic one names none",
          "[policy]") {
  auto policy = make_static_order_policy(parse_rank_order("1F0 1B0"));
  ReadySet ready(2, 1);
  REQUIRE(policy->next_in_order());
  CHECK(to_string(*policy->next_in_order()) == "1F0");  // waiting for its input
  ready.input_arrived(1, 0);
  auto action = policy->next(ready);
  REQUIRE(action);
  ready.completed(*action);
  policy->completed(*action);
  CHECK(to_string(*policy->next_in_order()) == "1B0");
  action = policy->next(ready);  // the last stage's gradient is its own loss's
  REQUIRE(action);
  policy->completed(*action);
  CHECK_FALSE(policy->next_in_order());  // none left
  auto dynamic = make_dynamic_policy({1}, 2, 1, {});
  CHECK_FALSE(dynamic->next_in_order());
}
