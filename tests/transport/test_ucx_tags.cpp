// The UCX tag of a transfer: the stream, the key and the tensor index in bits of their own, and
// what that gives pipeline and collective keys (their windows, their limits).
#include <catch2/catch.hpp>
#include <cstdint>

#include "pipeline_keys.h"
#include "tensorplay/transport/collective_key.h"
#include "tensorplay/transport/ucx_channel.h"

namespace tr = tensorplay::transport;
using tensorplay::testing::Direction;
using tensorplay::testing::pkey;

TEST_CASE("ucx tags keep the stream, the key and the tensor index in bits of their own",
          "[transport][ucx]") {
  const tr::TransferKey key{0x21, 0x1234'5678'9abcULL};
  const uint64_t tag = tr::UcxChannel::ucx_tag(key, 3);
  CHECK(tag >> 60 == 0x1);                                                // stream modulo 16
  CHECK((tag >> 15 & ((uint64_t{1} << 45) - 1)) == 0x1234'5678'9abcULL);  // the key's 45 bits
  CHECK((tag & 0x7fff) == 3);
  CHECK(tr::UcxChannel::ucx_tag(key, 4) != tag);
  CHECK(tr::UcxChannel::ucx_tag({0x22, key.key}, 3) != tag);
  CHECK(tr::UcxChannel::ucx_tag({0x21, key.key ^ 1}, 3) != tag);
  // Bits above kKeyBits only name a key: the channel matches on the low ones.
  CHECK(tr::UcxChannel::ucx_tag({0x21, key.key | uint64_t{1} << 50}, 3) == tag);
  CHECK_NOTHROW(tr::UcxChannel::ucx_tag(key, tr::kMaxTransferTensors - 1));
  CHECK_THROWS_WITH(tr::UcxChannel::ucx_tag(key, tr::kMaxTransferTensors),
                    Catch::Contains("more than 32768 tensors"));
}

TEST_CASE("ucx tags of pipeline transfers keep every field and refuse what does not fit",
          "[transport][ucx]") {
  tr::TransferKey tag = pkey(0x12345, 7, Direction::Backward, 9, 0x21);
  const uint64_t ucx = tr::UcxChannel::ucx_tag(tag, 3);
  CHECK(tr::UcxChannel::ucx_tag(tag, 4) != ucx);
  CHECK(tr::UcxChannel::ucx_tag(pkey(0x12345, 7, Direction::Backward, 9, 0x22), 3) != ucx);
  CHECK(tr::UcxChannel::ucx_tag(pkey(0x12345, 7, Direction::Forward, 9, 0x21), 3) != ucx);
  CHECK(tr::UcxChannel::ucx_tag(pkey(0x12345, 6, Direction::Backward, 9, 0x21), 3) != ucx);
  CHECK(tr::UcxChannel::ucx_tag(pkey(0x12345, 7, Direction::Backward, 8, 0x21), 3) != ucx);
  CHECK(tr::UcxChannel::ucx_tag(pkey(0x12346, 7, Direction::Backward, 9, 0x21), 3) != ucx);
  CHECK_THROWS_WITH(pkey(0, 4096, Direction::Forward, 0), Catch::Contains("stage 4096"));
  CHECK_THROWS_WITH(pkey(0, 0, Direction::Forward, -1), Catch::Contains("microbatch -1"));
}

TEST_CASE("ucx tags of collectives tell calls apart over 2^26 calls, not 4096",
          "[transport][ucx]") {
  // A transfer left over from a failed call must not match a later call of the same shape.
  auto call = [](uint64_t n) {
    return tr::collective_key(0x21, n, tr::RingPhase::ReduceScatter, 3);
  };
  CHECK(tr::UcxChannel::ucx_tag(call(5), 0) != tr::UcxChannel::ucx_tag(call(5 + 4096), 0));
  CHECK(tr::UcxChannel::ucx_tag(call(5), 1) != tr::UcxChannel::ucx_tag(call(5 + 4096), 1));
  CHECK(tr::UcxChannel::ucx_tag(call(5), 0) != tr::UcxChannel::ucx_tag(call(5), 1));
  // The window's end: the same tag again.
  CHECK(tr::UcxChannel::ucx_tag(call(5), 1) ==
        tr::UcxChannel::ucx_tag(call(5 + (uint64_t{1} << 26)), 1));
  // A pipeline transfer keeps the 4096-step window and its 15 bits of tensor index.
  CHECK(tr::UcxChannel::ucx_tag(pkey(5, 3, Direction::Forward, 0), 7) ==
        tr::UcxChannel::ucx_tag(pkey(5 + 4096, 3, Direction::Forward, 0), 7));
  CHECK(tr::UcxChannel::ucx_tag(pkey(5, 3, Direction::Forward, 0), 7) !=
        tr::UcxChannel::ucx_tag(pkey(5 + 4095, 3, Direction::Forward, 0), 7));
}
