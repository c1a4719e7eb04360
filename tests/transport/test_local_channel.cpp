// Tests for local_channel.h: zero-copy hand-over, timeouts, double sends.
#include <catch2/catch.hpp>
#include <thread>

#include "pipeline_keys.h"
#include "tensorplay/tensor.h"
#include "tensorplay/transport/local_channel.h"

namespace tp = tensorplay;
namespace tr = tensorplay::transport;
using tensorplay::testing::Direction;
using tensorplay::testing::pkey;

TEST_CASE("the local channel hands over storage without copying", "[transport]") {
  tr::LocalChannel channel;
  tp::Tensor t = tp::randn({4, 4});
  tr::TransferKey tag = pkey(1, 2, Direction::Forward, 3);
  auto descriptors = channel.send(0, tag, {t});
  CHECK(descriptors[0].shape == tp::Shape{4, 4});
  CHECK(channel.pending() == 1);
  auto got = channel.receive(0, tag, descriptors, tp::cpu(), std::chrono::milliseconds(100));
  REQUIRE(got.size() == 1);
  CHECK(got[0].shares_storage(t));
  CHECK(channel.pending() == 0);
}

TEST_CASE("a receive waits for a later send", "[transport]") {
  tr::LocalChannel channel;
  tr::TransferKey tag = pkey(0, 1, Direction::Backward, 0);
  std::thread sender([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    channel.send(0, tag, {tp::ones({2})});
  });
  auto got = channel.receive(0, tag, {}, tp::cpu(), std::chrono::seconds(5));
  sender.join();
  CHECK(got[0].to_vector() == std::vector<float>{1, 1});
}

TEST_CASE("a receive that times out names the transfer", "[transport]") {
  tr::LocalChannel channel;
  tr::TransferKey tag = pkey(7, 1, Direction::Forward, 5);
  CHECK_THROWS_WITH(channel.receive(0, tag, {}, tp::cpu(), std::chrono::milliseconds(10)),
                    Catch::Contains("step 7 stage 1 forward microbatch 5"));
}

TEST_CASE("sending the same tag twice is an error", "[transport]") {
  tr::LocalChannel channel;
  tr::TransferKey tag = pkey(0, 0, Direction::Forward, 0);
  channel.send(0, tag, {tp::ones({1})});
  CHECK_THROWS_WITH(channel.send(0, tag, {tp::ones({1})}), Catch::Contains("sent twice"));
}
