// Tests for replica_exchange.h: the default all_gather_tensors (through all_gather, in pieces)
// gives every replica every replica's tensors bit for bit, whatever the piece size.
#include <catch2/catch.hpp>
#include <cstring>
#include <limits>

#include "fake_replicas.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
using namespace stages_test;

namespace {

// Replica r's tensors: r + 1 of them, of sizes that do not divide the pieces, with bits that
// differ per replica (negative zero and NaN among them).
std::vector<tp::Tensor> tensors_of(int r) {
  std::vector<tp::Tensor> out;
  tp::Generator g(100 + r);
  for (int i = 0; i <= r; ++i) out.push_back(tp::randn({3 + i, 5 + r}, {}, &g));
  std::vector<float> odd = {-0.0f, std::numeric_limits<float>::quiet_NaN(), 1e-38f};
  out.push_back(tp::from_vector(odd, {3}));
  out.push_back(tp::zeros({0}));
  return out;
}

std::vector<uint32_t> bits(const tp::Tensor& t) {
  std::vector<uint32_t> out(t.numel());
  // For a zero-element tensor `out` is empty and its data() null: memcpy with a null pointer is
  // undefined even for 0 bytes.
  if (t.numel() > 0) std::memcpy(out.data(), t.raw_data(), t.nbytes());
  return out;
}

}  // namespace

TEST_CASE("reshard: the default all_gather_tensors moves every replica's tensors bit for bit",
          "[replicas][reshard]") {
  for (size_t piece : {size_t{7}, size_t{64}, size_t{1} << 20})
    for (int n : {1, 2, 3}) {
      std::vector<std::vector<std::vector<tp::Tensor>>> got(n);
      int calls = 0;
      const auto errors = run_replicas(
          n,
          [&](std::shared_ptr<FakeReplicas> replicas) {
            got[replicas->rank()] = replicas->all_gather_tensors(tensors_of(replicas->rank()));
            if (replicas->rank() == 0) calls = replicas->calls;
          },
          piece);
      INFO("piece " << piece << ", " << n << " replicas");
      for (const auto& e : errors) CHECK(e.empty());
      for (int me = 0; me < n; ++me) {
        REQUIRE(got[me].size() == static_cast<size_t>(n));
        for (int r = 0; r < n; ++r) {
          const auto sent = tensors_of(r);
          REQUIRE(got[me][r].size() == sent.size());
          for (size_t i = 0; i < sent.size(); ++i) {
            CHECK(got[me][r][i].shape() == sent[i].shape());
            CHECK(bits(got[me][r][i]) == bits(sent[i]));
          }
        }
      }
      if (n > 1 && piece == 7) CHECK(calls > 10);  // the bytes went in many pieces
    }
}
