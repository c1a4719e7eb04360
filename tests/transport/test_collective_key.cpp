// The collectives' key codec: round trip, limits, and keys that never collide across calls,
// phases, ring steps and streams within their windows.
#include <catch2/catch.hpp>
#include <random>
#include <unordered_set>

#include "tensorplay/transport/collective_key.h"
#include "tensorplay/transport/ucx_channel.h"

namespace tr = tensorplay::transport;
using tr::RingPhase;

namespace {

uint64_t ucx(const tr::TransferKey& key, size_t index = 0) {
  return tr::UcxChannel::ucx_tag(key, index);
}

}  // namespace

TEST_CASE("collective keys give back their fields", "[transport][keys]") {
  for (uint64_t call : {uint64_t{0}, uint64_t{1}, uint64_t{4095}, uint64_t{4096},
                        tr::kCallWindow - 1, tr::kCallWindow, tr::kCallWindow * 77 + 5})
    for (RingPhase phase : {RingPhase::ReduceScatter, RingPhase::AllGather})
      for (int step = 0; step <= tr::kStatusRingStep; ++step) {
        const uint32_t stream = 0xabcd0u + static_cast<uint32_t>(step);
        const tr::TransferKey key = tr::collective_key(stream, call, phase, step);
        const tr::CollectiveFields f = tr::decode_collective_key(key);
        REQUIRE(key.stream == stream);
        REQUIRE(tr::is_collective_key(key.key));
        REQUIRE(f == tr::CollectiveFields{call, phase, step, (stream >> 4) & 0x3ff});
      }
  std::mt19937_64 random(20);
  for (int i = 0; i < 100000; ++i) {
    const uint64_t call = random() >> 19;  // 45 bits: the call's window and the naming bits
    const auto stream = static_cast<uint32_t>(random());
    const RingPhase phase = random() % 2 ? RingPhase::AllGather : RingPhase::ReduceScatter;
    const int step = static_cast<int>(random() % tr::kMaxRingMembers);
    const tr::CollectiveFields f =
        tr::decode_collective_key(tr::collective_key(stream, call, phase, step));
    REQUIRE(f == tr::CollectiveFields{call, phase, step, (stream >> tr::kStreamBits) & 0x3ff});
  }
  CHECK(tr::to_string(tr::collective_key(16, 7, RingPhase::AllGather, 2)) ==
        "collective call 7 all-gather ring step 2 on stream 16");
}

TEST_CASE("collective keys refuse ring steps and groups past kMaxRingMembers",
          "[transport][keys]") {
  CHECK_NOTHROW(tr::collective_key(0, 1, RingPhase::AllGather, tr::kStatusRingStep));
  CHECK_THROWS_WITH(tr::collective_key(0, 1, RingPhase::AllGather, tr::kStatusRingStep + 1),
                    Catch::Contains("ring step 128") && Catch::Contains("kMaxRingMembers"));
  CHECK_THROWS_WITH(tr::collective_key(0, 1, RingPhase::AllGather, -1),
                    Catch::Contains("ring step -1"));
  CHECK_NOTHROW(tr::check_ring_members(tr::kMaxRingMembers, "ring: "));
  CHECK_THROWS_WITH(tr::check_ring_members(tr::kMaxRingMembers + 1, "ring: "),
                    Catch::StartsWith("ring: ") && Catch::Contains("129 members") &&
                        Catch::Contains("at most 128") && Catch::Contains("kMaxRingMembers"));
  CHECK_THROWS_WITH(tr::check_ring_members(0, "ring: "), Catch::Contains("no members"));
}

TEST_CASE("collective keys never collide within a call window, a phase or a group",
          "[transport][keys]") {
  // Exhaustive over small ranges: every (call, phase, step, index) of one stream has its own tag.
  std::unordered_set<uint64_t> seen;
  for (uint64_t call = 0; call < 512; ++call)
    for (RingPhase phase : {RingPhase::ReduceScatter, RingPhase::AllGather})
      for (int step = 0; step <= tr::kStatusRingStep; ++step)
        for (size_t index = 0; index < 2; ++index)
          REQUIRE(seen.insert(ucx(tr::collective_key(0x50, call, phase, step), index)).second);
  // Streams that differ in their low kStreamBits + kGroupBits bits never collide.
  seen.clear();
  for (uint32_t stream = 0; stream < (1u << (tr::kStreamBits + tr::kGroupBits)); ++stream)
    REQUIRE(seen.insert(ucx(tr::collective_key(stream, 3, RingPhase::AllGather, 1))).second);
  // Randomized over the full ranges: keys that differ in a field within its window differ.
  std::mt19937_64 random(26);
  const uint64_t stream_mask = (uint64_t{1} << (tr::kStreamBits + tr::kGroupBits)) - 1;
  for (int i = 0; i < 200000; ++i) {
    const uint64_t call_a = random(), call_b = random() % 4 ? call_a : random();
    const auto stream_a = static_cast<uint32_t>(random());
    const auto stream_b = random() % 4 ? stream_a : static_cast<uint32_t>(random());
    const int step_a = static_cast<int>(random() % 128), step_b = static_cast<int>(random() % 128);
    const auto phase_a = static_cast<RingPhase>(random() % 2);
    const auto phase_b = static_cast<RingPhase>(random() % 2);
    const bool same = (call_a - call_b) % tr::kCallWindow == 0 &&
                      ((stream_a ^ stream_b) & stream_mask) == 0 && step_a == step_b &&
                      phase_a == phase_b;
    const uint64_t a = ucx(tr::collective_key(stream_a, call_a, phase_a, step_a));
    const uint64_t b = ucx(tr::collective_key(stream_b, call_b, phase_b, step_b));
    REQUIRE((a == b) == same);
  }
}
