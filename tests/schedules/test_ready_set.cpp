#include <catch2/catch.hpp>

#include "tensorplay/schedules/ready_set.h"

using namespace tensorplay::schedules;

namespace {
Action act(const char* text) { return parse_action(text); }
}  // namespace

TEST_CASE("forward needs its input, stage 0 always has it", "[ready_set]") {
  ReadySet ready(4, 2);
  CHECK(ready.ready(act("0F0")));
  CHECK_FALSE(ready.ready(act("1F0")));
  ready.input_arrived(1, 0);
  CHECK(ready.ready(act("1F0")));
  CHECK_FALSE(ready.ready(act("1F1")));
}

TEST_CASE("backward needs its forward and the gradient", "[ready_set]") {
  ReadySet ready(3, 2);
  ready.input_arrived(1, 0);
  CHECK_FALSE(ready.ready(act("1B0")));
  ready.grad_arrived(1, 0);
  CHECK_FALSE(ready.ready(act("1B0")));  // F not done yet
  CHECK(ready.why_not_ready(act("1B0")) == "1B0: its forward 1F0 has not completed");
  ready.completed(act("1F0"));
  CHECK(ready.ready(act("1B0")));
  CHECK(ready.ready(act("1I0")));
  CHECK_FALSE(ready.ready(act("1W0")));
  ready.completed(act("1I0"));
  CHECK(ready.ready(act("1W0")));
  CHECK(ready.is_completed(act("1I0")));
  CHECK_FALSE(ready.is_completed(act("1B0")));
}

TEST_CASE("the last stage's gradient comes from its own loss", "[ready_set]") {
  ReadySet ready(2, 1);
  ready.input_arrived(1, 0);
  CHECK_FALSE(ready.ready(act("1B0")));
  CHECK(ready.why_not_ready(act("1B0")) == "1B0: its forward 1F0 has not completed");
  ready.completed(act("1F0"));
  CHECK(ready.ready(act("1B0")));
}

TEST_CASE("same-rank neighbours hand over without arrivals (the V turn)", "[ready_set]") {
  ReadySet ready(4, 1);  // rank holding stages 1 and 2 of 4
  ready.input_arrived(1, 0);
  ready.completed(act("1F0"));
  CHECK(ready.ready(act("2F0")));
  ready.completed(act("2F0"));
  CHECK_FALSE(ready.ready(act("2B0")));
  CHECK(ready.why_not_ready(act("2B0")) == "2B0: gradient not arrived");
  ready.grad_arrived(2, 0);
  ready.completed(act("2B0"));
  CHECK(ready.ready(act("1B0")));
  CHECK(ready.is_completed(act("2W0")));  // a B counts as I and W
}

TEST_CASE("OVERLAP_F_B is ready when both halves are", "[ready_set]") {
  ReadySet ready(4, 2);
  Action overlap = act("(0F1;3B0)OVERLAP_F_B");
  ready.input_arrived(3, 0);
  CHECK_FALSE(ready.ready(overlap));
  ready.completed(act("3F0"));
  CHECK(ready.ready(overlap));
  ready.completed(overlap);
  CHECK(ready.is_completed(act("0F1")));
  CHECK(ready.is_completed(act("3B0")));
}

TEST_CASE("reset forgets the step, bad indices throw", "[ready_set]") {
  ReadySet ready(2, 2);
  ready.input_arrived(1, 1);
  ready.completed(act("0F0"));
  ready.reset();
  CHECK_FALSE(ready.ready(act("1F1")));
  CHECK_FALSE(ready.is_completed(act("0F0")));
  CHECK_THROWS_AS(ready.input_arrived(2, 0), std::invalid_argument);
  CHECK_THROWS_AS(ready.ready(act("0F5")), std::invalid_argument);
  CHECK_THROWS_AS(ReadySet(0, 1), std::invalid_argument);
}

TEST_CASE("a rank may touch many stages", "[ready_set]") {
  ReadySet ready(16, 3);
  for (int stage = 1; stage < 16; ++stage) ready.input_arrived(stage, 2);
  for (int stage = 1; stage < 16; ++stage) CHECK(ready.has_input(stage, 2));
  CHECK_FALSE(ready.has_input(5, 1));
}

TEST_CASE("finished microbatches are forgotten but still read as done", "[ready_set]") {
  ReadySet ready(1, 100);
  for (int mb = 0; mb < 100; ++mb) ready.completed(make_action(0, ActionKind::Forward, mb));
  for (int mb = 0; mb < 100; ++mb) {
    ready.completed(make_action(0, ActionKind::BackwardInput, mb));
    ready.completed(make_action(0, ActionKind::BackwardWeight, mb));
    CHECK(ready.is_completed(make_action(0, ActionKind::FullBackward, mb)));
  }
  CHECK(ready.is_completed(make_action(0, ActionKind::Forward, 0)));
  CHECK(ready.has_grad(0, 50));
  // Out of order: a late microbatch first, then the window catches up.
  ReadySet sparse(3, 64);
  sparse.input_arrived(1, 63);
  sparse.input_arrived(1, 0);
  CHECK(sparse.has_input(1, 63));
  CHECK(sparse.has_input(1, 0));
  CHECK_FALSE(sparse.has_input(1, 31));
  sparse.reset();
  CHECK_FALSE(sparse.has_input(1, 63));
}
