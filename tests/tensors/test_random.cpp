// Tests for random.h: seeded streams repeat, and threads sharing a generator draw whole blocks.
#include <algorithm>
#include <catch2/catch.hpp>
#include <thread>

#include "tensorplay/tensor.h"

namespace tp = tensorplay;

TEST_CASE("a seed gives the same values every time", "[random]") {
  tp::Generator a(42), b(42);
  CHECK(tp::randn({16}, {}, &a).to_vector() == tp::randn({16}, {}, &b).to_vector());
  std::vector<float> ids = tp::randint(3, 7, {64}, {}, &a).to_vector();
  CHECK(*std::min_element(ids.begin(), ids.end()) >= 3);
  CHECK(*std::max_element(ids.begin(), ids.end()) < 7);
}

TEST_CASE("threads sharing a generator draw the values one thread would", "[random]") {
  // Stage actors share the default generator (dropout); each draw takes the stream whole.
  constexpr int kDraws = 200, kSize = 64;
  tp::Generator shared(7), alone(7);
  std::vector<float> got[2];
  auto draw = [&](int t) {
    for (int i = 0; i < kDraws; ++i) {
      std::vector<float> v = tp::rand_uniform({kSize}, 0, 1, {}, &shared).to_vector();
      got[t].insert(got[t].end(), v.begin(), v.end());
    }
  };
  std::thread t0(draw, 0), t1(draw, 1);
  t0.join();
  t1.join();
  std::vector<float> all = got[0];
  all.insert(all.end(), got[1].begin(), got[1].end());
  std::vector<float> want = tp::rand_uniform({2 * kDraws * kSize}, 0, 1, {}, &alone).to_vector();
  std::sort(all.begin(), all.end());
  std::sort(want.begin(), want.end());
  CHECK(all == want);
}
