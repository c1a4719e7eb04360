// Tests for UcxChannelOptions (ucx_channel.h): a channel kept to named UCX transports still moves
// tensors, and transports the host lacks are a clear error at construction.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>

#include "pipeline_keys.h"
#include "tensorplay/tensor.h"
#include "tensorplay/transport/ucx_channel.h"

namespace tp = tensorplay;
namespace tr = tensorplay::transport;
using namespace tensorplay::testing;  // pkey, Direction
using namespace std::chrono_literals;

TEST_CASE("a ucx channel kept to named transports moves tensors", "[transport][ucx]") {
  for (const char* transports : {"tcp", "shm"}) {
    INFO("UCX transports " << transports);
    tr::UcxChannel rank0(0, 2, {.transports = transports});
    tr::UcxChannel rank1(1, 2, {.transports = transports});
    const std::vector<std::vector<uint8_t>> addresses{rank0.address(), rank1.address()};
    const std::vector<bool> same_host{true, true};
    rank0.connect(addresses, same_host);
    rank1.connect(addresses, same_host);
    const tp::Tensor sent = tp::arange(1 << 16);
    const tr::TransferKey key = pkey(1, 1, Direction::Forward, 0);
    const auto got = rank1.receive(0, key, rank0.send(1, key, {sent}), tp::cpu(), 10s);
    REQUIRE(got.size() == 1);
    REQUIRE(got[0].numel() == sent.numel());
    CHECK(std::memcmp(got[0].raw_data(), sent.raw_data(), sent.nbytes()) == 0);
  }
}

TEST_CASE("ucx transports the host lacks are a clear error", "[transport][ucx]") {
  CHECK_THROWS_AS(tr::UcxChannel(0, 2, {.transports = "no_such_transport"}), tr::TransferError);
  CHECK_THROWS_WITH(tr::UcxChannel(0, 2, {.transports = "no_such_transport"}),
                    Catch::Contains("ucx channel") && Catch::Contains("'no_such_transport'"));
}
