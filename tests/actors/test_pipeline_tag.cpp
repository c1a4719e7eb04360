// The pipeline's key codec: round trip, limits, the step window, and keys that never collide
// with each other across streams nor with the collectives' keys.
#include <catch2/catch.hpp>
#include <random>
#include <unordered_set>

#include "tensorplay/transport/collective_key.h"
#include "tensorplay/transport/ucx_channel.h"
#include "tensorplay/wire/pipeline_tag.h"

namespace tr = tensorplay::transport;
namespace pp = tensorplay::pipelining;
using pp::Direction;
using pp::PipelineTag;

namespace {

uint64_t ucx(const tr::TransferKey& key, size_t index = 0) {
  return tr::UcxChannel::ucx_tag(key, index);
}

PipelineTag random_tag(std::mt19937_64& random) {
  return {random() >> 33, static_cast<int>(random() % pp::kMaxPipelineStages),
          random() % 2 ? Direction::Backward : Direction::Forward,
          static_cast<int>(random() % pp::kMaxMicrobatches)};
}

}  // namespace

TEST_CASE("pipeline keys give back their fields", "[actors][keys]") {
  for (uint64_t step : {uint64_t{0}, uint64_t{1}, pp::kStepWindow - 1, pp::kStepWindow,
                        pp::kStepWindow * 1000 + 17})
    for (int stage : {0, 1, 2, 7, pp::kMaxPipelineStages - 1})
      for (Direction d : {Direction::Forward, Direction::Backward})
        for (int mb : {0, 1, 5, pp::kMaxMicrobatches - 1}) {
          const PipelineTag tag{step, stage, d, mb};
          const tr::TransferKey key = pp::pipeline_key(9, tag);
          REQUIRE(pp::decode_pipeline_key(key) == tag);
          REQUIRE(key.stream == 9);
          REQUIRE(key.lane == (d == Direction::Backward ? 1 : 0));
          REQUIRE(pp::is_pipeline_key(key.key));
          REQUIRE_FALSE(tr::is_collective_key(key.key));
        }
  std::mt19937_64 random(12);
  for (int i = 0; i < 100000; ++i) {
    const PipelineTag tag = random_tag(random);
    REQUIRE(pp::decode_pipeline_key(pp::pipeline_key(static_cast<uint32_t>(random()), tag)) == tag);
  }
  CHECK(tr::to_string(pp::pipeline_key(0, {3, 1, Direction::Forward, 2})) ==
        "step 3 stage 1 forward microbatch 2");
}

TEST_CASE("pipeline keys and schedules refuse one past each limit, naming it", "[actors][keys]") {
  const int last_stage = pp::kMaxPipelineStages - 1;
  CHECK_NOTHROW(pp::pipeline_key(0, {0, last_stage, Direction::Forward, 0}));
  CHECK_THROWS_WITH(pp::pipeline_key(0, {0, last_stage + 1, Direction::Forward, 0}),
                    Catch::Contains("stage 1023") && Catch::Contains("kMaxPipelineStages"));
  CHECK_THROWS_WITH(pp::pipeline_key(0, {0, -1, Direction::Forward, 0}),
                    Catch::Contains("stage -1"));
  CHECK_NOTHROW(pp::pipeline_key(0, {0, 0, Direction::Forward, pp::kMaxMicrobatches - 1}));
  CHECK_THROWS_WITH(pp::pipeline_key(0, {0, 0, Direction::Forward, pp::kMaxMicrobatches}),
                    Catch::Contains("microbatch 8192") && Catch::Contains("kMaxMicrobatches"));
  CHECK_THROWS_WITH(pp::pipeline_key(0, {0, 0, Direction::Forward, -1}),
                    Catch::Contains("microbatch -1"));
  CHECK_NOTHROW(pp::check_pipeline_limits("GPipe", pp::kMaxPipelineStages, pp::kMaxMicrobatches));
  CHECK_THROWS_WITH(pp::check_pipeline_limits("GPipe", pp::kMaxPipelineStages + 1, 4),
                    Catch::StartsWith("GPipe: 1024 stages") &&
                        Catch::Contains("a schedule across processes holds at most 1023") &&
                        Catch::Contains("kMaxPipelineStages"));
  CHECK_THROWS_WITH(
      pp::check_pipeline_limits("GPipe", 4, pp::kMaxMicrobatches + 1),
      Catch::StartsWith("GPipe: 8193 microbatches") && Catch::Contains("kMaxMicrobatches"));
}

TEST_CASE("pipeline keys match again only a step window later", "[actors][keys]") {
  const uint64_t first = ucx(pp::pipeline_key(1, {5, 3, Direction::Forward, 2}), 7);
  for (uint64_t later = 1; later < pp::kStepWindow; ++later)
    REQUIRE(ucx(pp::pipeline_key(1, {5 + later, 3, Direction::Forward, 2}), 7) != first);
  CHECK(ucx(pp::pipeline_key(1, {5 + pp::kStepWindow, 3, Direction::Forward, 2}), 7) == first);
}

TEST_CASE("pipeline keys never collide across fields, streams or with collectives",
          "[actors][keys]") {
  // Exhaustive over small ranges: pipeline tags of 16 streams and collective tags of 16 streams,
  // every one its own UCX tag.
  std::unordered_set<uint64_t> seen;
  for (uint32_t stream = 0; stream < (1u << tr::kStreamBits); ++stream) {
    for (uint64_t step = 0; step < 8; ++step)
      for (int stage = 0; stage < 8; ++stage)
        for (Direction d : {Direction::Forward, Direction::Backward})
          for (int mb = 0; mb < 8; ++mb)
            for (size_t index = 0; index < 3; ++index)
              REQUIRE(
                  seen.insert(ucx(pp::pipeline_key(stream, {step, stage, d, mb}), index)).second);
    for (uint64_t call = 0; call < 8; ++call)
      for (auto phase : {tr::RingPhase::ReduceScatter, tr::RingPhase::AllGather})
        for (int step = 0; step <= tr::kStatusRingStep; ++step)
          for (size_t index = 0; index < 2; ++index)
            REQUIRE(seen.insert(ucx(tr::collective_key(stream, call, phase, step), index)).second);
  }
  // Streams of two groups (ids above kStreamBits) in the same slot keep their keys apart.
  const PipelineTag tag{3, 1, Direction::Forward, 2};
  CHECK(ucx(pp::pipeline_key(1u << tr::kStreamBits | 1, tag)) !=
        ucx(pp::pipeline_key(2u << tr::kStreamBits | 1, tag)));
  // Randomized over the full ranges.
  std::mt19937_64 random(45);
  for (int i = 0; i < 200000; ++i) {
    const PipelineTag a = random_tag(random);
    PipelineTag b = random() % 2 ? a : random_tag(random);
    const auto stream_a = static_cast<uint32_t>(random());
    const auto stream_b = random() % 2 ? stream_a : static_cast<uint32_t>(random());
    const bool same =
        (a.step - b.step) % pp::kStepWindow == 0 && a.stage == b.stage &&
        a.direction == b.direction && a.microbatch == b.microbatch &&
        (stream_a - stream_b) % (1u << (tr::kStreamBits + pp::kPipelineGroupBits)) == 0;
    const size_t index = random() % tr::kMaxTransferTensors;
    REQUIRE((ucx(pp::pipeline_key(stream_a, a), index) ==
             ucx(pp::pipeline_key(stream_b, b), index)) == same);
    const tr::TransferKey collective =
        tr::collective_key(stream_a, random(), static_cast<tr::RingPhase>(random() % 2),
                           static_cast<int>(random() % tr::kMaxRingMembers));
    REQUIRE(ucx(pp::pipeline_key(stream_a, a), index % 2) != ucx(collective, index % 2));
    REQUIRE(pp::pipeline_key(stream_a, a).key % (uint64_t{1} << tr::kKeyBits) !=
            collective.key % (uint64_t{1} << tr::kKeyBits));
  }
}
