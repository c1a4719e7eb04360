// Tests for wire/protocol.h: every message kind survives the trip through bytes, and the one
// decoder rejects every malformed or truncated message with a reason instead of reading past it.
#include <catch2/catch.hpp>
#include <random>

#include "tensorplay/wire/protocol.h"

namespace pp = tensorplay::pipelining;
namespace tr = tensorplay::transport;
using tensorplay::DType;

namespace {

pp::Notification example() {
  pp::Notification n;
  n.step = 0x1234567890ULL;
  n.stage = 5;
  n.direction = pp::Direction::Backward;
  n.microbatch = 31;
  n.source = 3;
  n.tensors = {{{16, 1024}, DType::Float32, 16 * 1024 * 4, true},
               {{}, DType::Float32, 0, false},
               {{2, 0, 3}, DType::BFloat16, 0, true},
               {{7}, DType::BFloat16, 14, true}};
  return n;
}

}  // namespace

TEST_CASE("a notification survives encoding", "[protocol]") {
  pp::Notification in = example(), out;
  std::string bytes = pp::encode_message(in);
  REQUIRE(pp::decode_notification(bytes, out).empty());
  CHECK(out.step == in.step);
  CHECK(out.stage == in.stage);
  CHECK(out.direction == in.direction);
  CHECK(out.microbatch == in.microbatch);
  CHECK(out.source == in.source);
  CHECK(out.tensors == in.tensors);
}

TEST_CASE("malformed notifications are rejected with a reason", "[protocol]") {
  std::string good = pp::encode_message(example());
  pp::Notification n;
  CHECK_THAT(pp::decode_notification("", n), Catch::Contains("truncated"));
  CHECK_THAT(pp::decode_notification(good + "x", n), Catch::Contains("past the end"));
  std::string bad = good;
  bad[0] = 1;  // version
  CHECK_THAT(pp::decode_notification(bad, n), Catch::Contains("version 1, expected 2"));
  bad = good;
  bad[1] = 9;  // kind
  CHECK_THAT(pp::decode_notification(bad, n), Catch::Contains("unknown message kind 9"));
  bad = good;
  bad[2] = 7;  // direction
  CHECK_THAT(pp::decode_notification(bad, n), Catch::Contains("direction 7"));
  // The first descriptor's byte count no longer matches its shape.
  bad = good;
  bad[27 + 2] ^= 1;  // after the 27-byte header: defined, dtype, bytes
  CHECK_THAT(pp::decode_notification(bad, n), Catch::Contains("bytes for"));
  // A huge dimension overflows the element count.
  pp::Notification big = example();
  big.tensors = {{{int64_t{1} << 40, int64_t{1} << 40}, DType::Float32, 4, true}};
  CHECK_THAT(pp::decode_notification(pp::encode_message(big), n), Catch::Contains("overflows"));
  pp::Notification negative = example();
  negative.tensors = {{{-1}, DType::Float32, 0, true}};
  CHECK_THAT(pp::decode_notification(pp::encode_message(negative), n),
             Catch::Contains("negative dimension"));
}

TEST_CASE("every truncation and random corruption is rejected or decodes in bounds", "[protocol]") {
  std::string good = pp::encode_message(example());
  pp::Notification n;
  for (size_t cut = 0; cut < good.size(); ++cut)
    CHECK_FALSE(pp::decode_notification(std::string_view(good).substr(0, cut), n).empty());
  std::mt19937 random(7);
  int rejected = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string bytes = good;
    int flips = 1 + static_cast<int>(random() % 4);
    for (int f = 0; f < flips; ++f) bytes[random() % bytes.size()] = static_cast<char>(random());
    if (random() % 4 == 0) bytes.resize(random() % (bytes.size() + 8), '\x7f');
    std::string error = pp::decode_notification(bytes, n);
    if (!error.empty()) {
      ++rejected;
      continue;
    }
    // Accepted: every descriptor is consistent.
    REQUIRE(n.tensors.size() <= pp::kMaxWireTensors);
    for (const auto& d : n.tensors) {
      uint64_t numel = 1;
      for (int64_t dim : d.shape) {
        REQUIRE(dim >= 0);
        numel *= static_cast<uint64_t>(dim);
      }
      if (d.defined) REQUIRE(numel * tensorplay::element_size(d.dtype) == d.bytes);
    }
  }
  CHECK(rejected > 10000);
}

namespace {

pp::RankFacts facts_example() {
  pp::RankFacts f;
  f.kind = "Schedule1F1B";
  f.n_microbatches = 8;
  f.num_stages = 4;
  f.stages_per_rank = 1;
  f.has_loss = true;
  f.scale_grads = false;
  f.wants_nccl = true;
  f.order_hash = 0x0123456789abcdefULL;
  f.pipe_hash = 42;
  f.stages = {{1, {{{4, 16}, DType::Float32}}, {{{4, 16}, DType::BFloat16}, {{}, DType::Float32}}}};
  return f;
}

/// Encodes `message`, decodes it back as `T` and re-encodes it: the same value, the same bytes.
template <typename T>
void check_round_trip(const T& message) {
  const std::string bytes = pp::encode_message(message);
  const T back = pp::decode_as<T>(bytes, "the test's message");
  CHECK(back == message);
  CHECK(pp::encode_message(back) == bytes);
}

}  // namespace

TEST_CASE("every message kind survives encoding, with one spelling", "[protocol]") {
  check_round_trip(facts_example());
  pp::RankFacts failed;
  failed.error = {"ScheduleError", "rank 1 could not build stage 3"};
  check_round_trip(failed);
  check_round_trip(pp::RankDetail{"pipe text\nwith lines", "F0 B0\nF1 B1\n"});
  check_round_trip(pp::RemoteError{"invalid_argument", ""});
  check_round_trip(pp::Vote{true});
  check_round_trip(pp::Vote{false});
}

TEST_CASE("decode_as names what it read, what was wrong and what to do", "[protocol]") {
  const std::string vote = pp::encode_message(pp::Vote{true});
  CHECK_THROWS_WITH(pp::decode_as<pp::RankFacts>(vote, "rank 1's construction facts"),
                    Catch::Contains("rank 1's construction facts cannot be read") &&
                        Catch::Contains("a vote where construction facts belong") &&
                        Catch::Contains("same tensorplay version"));
  std::string bad = vote;
  bad[2] = 2;  // a flag is 0 or 1: one spelling per message
  CHECK_THROWS_WITH(pp::decode_as<pp::Vote>(bad, "a vote"), Catch::Contains("is 2, not 0 or 1"));
  // A text field claiming more bytes than the message holds is refused, not allocated.
  std::string detail = pp::encode_message(pp::RankDetail{"abc", "d"});
  detail[2] = '\xff';
  detail[9] = '\x7f';
  CHECK_THROWS_WITH(pp::decode_as<pp::RankDetail>(detail, "details"),
                    Catch::Contains("truncated at the pipe's text"));
  // An error without its type would rethrow as nothing in particular.
  CHECK_THROWS_WITH(
      pp::decode_as<pp::RemoteError>(pp::encode_message(pp::RemoteError{"", "x"}), "an error"),
      Catch::Contains("without its type"));
  // Every truncation of a facts message is refused.
  const std::string facts = pp::encode_message(facts_example());
  for (size_t cut = 0; cut < facts.size(); ++cut)
    CHECK_THROWS_AS(pp::decode_as<pp::RankFacts>(facts.substr(0, cut), "facts"),
                    std::invalid_argument);
}
