// Tests for detail/fnv1a.h: the published FNV-1a 64 test vectors, continuation, and the mix of
// whole numbers.
#include <catch2/catch.hpp>
#include <string>

#include "tensorplay/core/detail/fnv1a.h"

namespace td = tensorplay::detail;

TEST_CASE("fnv1a64 gives the published FNV-1a 64-bit values", "[fnv1a]") {
  CHECK(td::fnv1a64("") == 0xcbf29ce484222325ull);
  CHECK(td::fnv1a64("a") == 0xaf63dc4c8601ec8cull);
  CHECK(td::fnv1a64("foobar") == 0x85944171f73967e8ull);
  static_assert(td::fnv1a64("a") == 0xaf63dc4c8601ec8cull, "usable at compile time");
}

TEST_CASE("fnv1a64 continues a hash, and bytes above 127 count as unsigned", "[fnv1a]") {
  CHECK(td::fnv1a64("bar", td::fnv1a64("foo")) == td::fnv1a64("foobar"));
  const std::string high(1, static_cast<char>(0xff));
  CHECK(td::fnv1a64(high) == td::fnv1a64_mix(td::kFnvOffsetBasis, 0xff));
}

TEST_CASE("fnv1a64_mix tells sequences of numbers apart by order", "[fnv1a]") {
  auto hash = [](std::initializer_list<uint64_t> values) {
    uint64_t h = td::kFnvOffsetBasis;
    for (uint64_t v : values) h = td::fnv1a64_mix(h, v);
    return h;
  };
  CHECK(hash({1, 2}) != hash({2, 1}));
  CHECK(hash({1}) != hash({1, 0}));
}
