#include <catch2/catch.hpp>

#include "order_rows.h"
#include "tensorplay/schedules/errors.h"
#include "tensorplay/schedules/lowering.h"
#include "tensorplay/schedules/schedule_kind.h"

using namespace tensorplay::schedules;

using schedules_test::rows;

// Expected orders are PyTorch's pipeline_order_with_comms with its FSDP and gradient-reduction
// bookkeeping actions removed.
TEST_CASE("lowering Interleaved1F1B matches PyTorch's _add_send_recv", "[lowering]") {
  PipelineOrder lowered =
      lower_to_communication(generate_order(ScheduleKind::Interleaved1F1B, 2, 2, 4), {0, 1, 0, 1});
  CHECK(rows(lowered) ==
        std::vector<std::string>{
            "0F0 0SEND_F0 2RECV_F0 0F1 0SEND_F1 2RECV_F1 2F0 2SEND_F0 2F1 2SEND_F1 2RECV_B0 0F2 "
            "0SEND_F2 2B0 2SEND_B0 2RECV_B1 0F3 0SEND_F3 2RECV_F2 2B1 2SEND_B1 0RECV_B0 2F2 "
            "2SEND_F2 2RECV_F3 0B0 0RECV_B1 2F3 2SEND_F3 0B1 2RECV_B2 2B2 2SEND_B2 2RECV_B3 2B3 "
            "2SEND_B3 0RECV_B2 0B2 0RECV_B3 0B3",
            "1RECV_F0 1F0 1SEND_F0 1RECV_F1 1F1 1SEND_F1 3RECV_F0 3F0 3RECV_F1 3B0 3SEND_B0 "
            "1RECV_F2 3F1 1RECV_B0 3B1 3SEND_B1 1RECV_F3 1F2 1SEND_F2 1RECV_B1 1B0 1SEND_B0 "
            "3RECV_F2 1F3 1SEND_F3 1B1 1SEND_B1 3RECV_F3 3F2 3B2 3SEND_B2 1RECV_B2 3F3 3B3 "
            "3SEND_B3 1RECV_B3 1B2 1SEND_B2 1B3 1SEND_B3"});
}

TEST_CASE("lowering ZB-H1 matches PyTorch's _add_send_recv", "[lowering]") {
  PipelineOrder lowered = lower_to_communication(
      generate_order(ScheduleKind::InterleavedZeroBubble, 3, 1, 3), {0, 1, 2});
  CHECK(rows(lowered) ==
        std::vector<std::string>{
            "0F0 0SEND_F0 0F1 0SEND_F1 0F2 0SEND_F2 0RECV_B0 0I0 0W0 0RECV_B1 0I1 0W1 0RECV_B2 "
            "0I2 0W2",
            "1RECV_F0 1F0 1SEND_F0 1RECV_F1 1F1 1SEND_F1 1RECV_B0 1RECV_F2 1I0 1SEND_B0 1F2 "
            "1SEND_F2 1RECV_B1 1I1 1SEND_B1 1W0 1RECV_B2 1I2 1SEND_B2 1W1 1W2",
            "2RECV_F0 2F0 2RECV_F1 2I0 2SEND_B0 2F1 2RECV_F2 2I1 2SEND_B1 2F2 2I2 2SEND_B2 2W0 "
            "2W1 2W2"});
}

TEST_CASE("lowering V schedules skips the same-rank turn and handles OVERLAP_F_B", "[lowering]") {
  PipelineOrder lowered =
      lower_to_communication(generate_order(ScheduleKind::DualPipeV, 2, 2, 4), {0, 1, 1, 0});
  CHECK(to_string(lowered[1]) ==
        "1RECV_F0 1F0 1RECV_F1 2F0 2SEND_F0 1RECV_F2 1F1 2F1 2SEND_F1 2RECV_B0 1F2 2B0 "
        "(2F2;1B0)OVERLAP_F_B 2SEND_F2 1SEND_B0 1RECV_F3 2RECV_B1 (1F3;2B1)OVERLAP_F_B "
        "(2F3;1B1)OVERLAP_F_B 2SEND_F3 1SEND_B1 2RECV_B2 2B2 1B2 1SEND_B2 2RECV_B3 2I3 1I3 "
        "1SEND_B3 2W3 1W3");
  // Stage 1 -> 2 lives on rank 1: no SEND/RECV for it.
  for (const Action& a : lowered[1]) {
    CHECK_FALSE((a.kind == ActionKind::SendF && a.stage == 1));
    CHECK_FALSE((a.kind == ActionKind::SendB && a.stage == 2));
  }
}

TEST_CASE("every send has its receive and stripping gives the compute order back", "[lowering]") {
  for (ScheduleKind kind : all_schedule_kinds()) {
    int v = default_stages_per_rank(kind);
    PipelineOrder order = generate_order(kind, 4, v, 8);
    PipelineOrder lowered = lower_to_communication(order, stage_to_rank(kind, 4, v));
    CHECK(strip_communication(lowered) == order);
    int sends = 0, recvs = 0;
    for (const RankOrder& rank : lowered) {
      for (const Action& a : rank) {
        sends += a.kind == ActionKind::SendF || a.kind == ActionKind::SendB;
        recvs += a.kind == ActionKind::RecvF || a.kind == ActionKind::RecvB;
      }
    }
    CHECK(sends == recvs);
    CHECK(sends > 0);
  }
}

TEST_CASE("lowering a deadlocked order fails clearly", "[lowering]") {
  PipelineOrder order = {parse_rank_order("0F0 0B0 0F1 0B1"), parse_rank_order("1F0 1F1 1B0 1B1")};
  CHECK_THROWS_AS(lower_to_communication(order, {0, 1}), ScheduleError);
  CHECK_THROWS_WITH(lower_to_communication(order, {0, 1}),
                    Catch::Contains("can't schedule sends/recvs"));
}
