// Tests for data/token_window_loader.h: windows and their targets from the shards' tokens, every
// window once per epoch, dp replicas' windows disjoint and together dp 1's, and a restored
// position reading the same next windows.
#include <catch2/catch.hpp>
#include <filesystem>
#include <set>

#include "temp_path.h"
#include "tensorplay/data/token_window_loader.h"

namespace data = tensorplay::data;
namespace fs = std::filesystem;

namespace {

// Two shards whose token i is (shard * 1000 + i) % 50000: 401 and 250 tokens, so 50 + 31
// windows of 8.
std::string make_shards() {
  const std::string dir = test_files::temp_path("windows");
  fs::create_directories(dir);
  for (int s = 0; s < 2; ++s) {
    std::vector<int32_t> tokens;
    for (int i = 0; i < (s == 0 ? 401 : 250); ++i) tokens.push_back(s * 1000 + i);
    data::write_token_shard(dir + "/shard_" + std::to_string(s) + ".bin", tokens,
                            data::TokenType::UInt16);
  }
  return dir;
}

}  // namespace

TEST_CASE("windows come from the shards with targets one token on", "[token_windows]") {
  const std::string dir = make_shards();
  data::TokenWindowLoader loader(dir, {.context = 8, .batch = 4, .seed = 3});
  CHECK(loader.num_windows() == 81);
  CHECK(loader.num_tokens() == 651);
  CHECK(loader.window(0).front() == 0);
  CHECK(loader.window(49).back() == 49 * 8 + 8);
  CHECK(loader.window(50).front() == 1000);  // the second shard's first window
  auto [inputs, targets] = loader.next();
  CHECK(inputs.shape() == tensorplay::Shape{4, 8});
  std::vector<float> x = inputs.to_vector(), y = targets.to_vector();
  for (size_t i = 0; i < x.size(); ++i) CHECK(y[i] == x[i] + 1);  // consecutive ids
  // An epoch visits every window once; the next epoch is another order.
  std::set<int64_t> seen;
  std::vector<int64_t> first_epoch;
  data::TokenWindowLoader again(dir, {.context = 8, .batch = 9, .seed = 3});
  for (int step = 0; step < 9; ++step)
    for (int64_t w : again.next_windows()) {
      CHECK(seen.insert(w).second);
      first_epoch.push_back(w);
    }
  CHECK(seen.size() == 81);
  std::vector<int64_t> second = again.next_windows();
  CHECK(again.position() == data::TokenWindowPosition{1, 9});
  CHECK(second != std::vector<int64_t>(first_epoch.begin(), first_epoch.begin() + 9));
  CHECK_THROWS_WITH(data::TokenWindowLoader(dir, {.context = 8, .batch = 100}),
                    Catch::Contains("81 windows") && Catch::Contains("batch of 100"));
  CHECK_THROWS_WITH(data::TokenWindowLoader(dir, {.context = 8, .batch = 3, .dp_size = 2}),
                    Catch::Contains("multiple of dp_size 2"));
  fs::remove_all(dir);
}

TEST_CASE("dp replicas draw disjoint windows that together are dp 1's", "[token_windows]") {
  const std::string dir = make_shards();
  data::TokenWindowLoader one(dir, {.context = 8, .batch = 6, .seed = 11});
  data::TokenWindowLoader r0(dir,
                             {.context = 8, .batch = 6, .dp_rank = 0, .dp_size = 2, .seed = 11});
  data::TokenWindowLoader r1(dir,
                             {.context = 8, .batch = 6, .dp_rank = 1, .dp_size = 2, .seed = 11});
  for (int step = 0; step < 30; ++step) {  // across an epoch's end (13 steps of 6 in 81)
    INFO("step " << step);
    std::vector<int64_t> all = one.next_windows(), a = r0.next_windows(), b = r1.next_windows();
    REQUIRE(a.size() == 3);
    std::multiset<int64_t> together(a.begin(), a.end());
    together.insert(b.begin(), b.end());
    CHECK(std::set<int64_t>(together.begin(), together.end()).size() == 6);  // disjoint
    CHECK(together == std::multiset<int64_t>(all.begin(), all.end()));
  }
  fs::remove_all(dir);
}

TEST_CASE("a restored position reads the same next windows", "[token_windows]") {
  const std::string dir = make_shards();
  const data::TokenWindowOptions options{
      .context = 8, .batch = 4, .dp_rank = 1, .dp_size = 2, .seed = 5};
  data::TokenWindowLoader loader(dir, options);
  for (int step = 0; step < 23; ++step) loader.next_windows();
  const data::TokenWindowPosition saved = loader.position();
  CHECK(saved == loader.position_after(23));
  std::vector<std::vector<int64_t>> expected;
  for (int step = 0; step < 5; ++step) expected.push_back(loader.next_windows());

  data::TokenWindowLoader resumed(dir, options);
  resumed.set_position(saved);
  for (int step = 0; step < 5; ++step) CHECK(resumed.next_windows() == expected[step]);
  data::TokenWindowLoader by_steps(dir, options);
  by_steps.set_position(by_steps.position_after(23));
  CHECK(by_steps.next_windows() == expected[0]);
  CHECK_THROWS_WITH(resumed.set_position({0, 500}), Catch::Contains("does not fit 81 windows"));
  fs::remove_all(dir);
}
