// Tests for detail/wire_note.h: notifications survive the trip through bytes, and the decoder
// rejects every malformed or truncated message with a reason instead of reading past it.
#include <catch2/catch.hpp>
#include <random>

#include "tensorplay/wire/notification_codec.h"

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

TEST_CASE("a notification survives encoding", "[wire_note]") {
  pp::Notification in = example(), out;
  std::string bytes = pp::encode_notification(in);
  REQUIRE(pp::decode_notification(bytes, out).empty());
  CHECK(out.step == in.step);
  CHECK(out.stage == in.stage);
  CHECK(out.direction == in.direction);
  CHECK(out.microbatch == in.microbatch);
  CHECK(out.source == in.source);
  CHECK(out.tensors == in.tensors);
}

TEST_CASE("malformed notifications are rejected with a reason", "[wire_note]") {
  std::string good = pp::encode_notification(example());
  pp::Notification n;
  CHECK_THAT(pp::decode_notification("", n), Catch::Contains("truncated"));
  CHECK_THAT(pp::decode_notification(good + "x", n), Catch::Contains("past the end"));
  std::string bad = good;
  bad[0] = 2;  // version
  CHECK_THAT(pp::decode_notification(bad, n), Catch::Contains("version 2"));
  bad = good;
  bad[1] = 7;  // direction
  CHECK_THAT(pp::decode_notification(bad, n), Catch::Contains("direction 7"));
  // The first descriptor's byte count no longer matches its shape.
  bad = good;
  bad[26 + 3] ^= 1;
  CHECK_THAT(pp::decode_notification(bad, n), Catch::Contains("bytes for"));
  // A huge dimension overflows the element count.
  pp::Notification big = example();
  big.tensors = {{{int64_t{1} << 40, int64_t{1} << 40}, DType::Float32, 4, true}};
  CHECK_THAT(pp::decode_notification(pp::encode_notification(big), n),
             Catch::Contains("overflows"));
  pp::Notification negative = example();
  negative.tensors = {{{-1}, DType::Float32, 0, true}};
  CHECK_THAT(pp::decode_notification(pp::encode_notification(negative), n),
             Catch::Contains("negative dimension"));
}

TEST_CASE("every truncation and random corruption is rejected or decodes in bounds",
          "[wire_note]") {
  std::string good = pp::encode_notification(example());
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
