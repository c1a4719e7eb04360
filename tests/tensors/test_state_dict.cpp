// Tests for state_dict.h: insertion order, lookup, duplicate keys.
#include <catch2/catch.hpp>

#include "tensorplay/tensor.h"

namespace tp = tensorplay;

TEST_CASE("StateDict keeps insertion order and finds keys", "[state_dict]") {
  tp::StateDict d;
  d.insert("z", tp::ones({2}));
  d.insert("a", tp::zeros({3}));
  d.insert("m", tp::full({1}, 5.0f));
  CHECK(d.keys() == std::vector<std::string>{"z", "a", "m"});
  CHECK(d.size() == 3);
  CHECK(d.contains("a"));
  CHECK_FALSE(d.contains("b"));
  CHECK(d.find("b") == nullptr);
  CHECK(d.at("m").item() == 5.0f);
  d.insert_or_assign("z", tp::full({1}, 7.0f));
  CHECK(d.keys().front() == "z");
  CHECK(d.at("z").item() == 7.0f);
}

TEST_CASE("StateDict rejects a duplicate key and names a missing one", "[state_dict]") {
  tp::StateDict d;
  d.insert("w", tp::ones({1}));
  CHECK_THROWS_WITH(d.insert("w", tp::ones({1})), Catch::Contains("'w'"));
  CHECK_THROWS_WITH(d.at("nope"), Catch::Contains("'nope'"));
}
