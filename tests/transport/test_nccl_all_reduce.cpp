// Tests for nccl_all_reduce.h: arguments checked before any device is touched (or the build's
// clear refusal without NCCL), and on a GPU a group of one that sums in place.
#include <catch2/catch.hpp>

#include "tensorplay/core/device_info.h"
#include "tensorplay/tensor.h"
#include "tensorplay/transport/nccl_all_reduce.h"
#include "tensorplay/transport/nccl_channel.h"

namespace tp = tensorplay;
namespace tr = tensorplay::transport;

namespace {

std::string refusal(int rank, int size, tp::Device device, const std::vector<uint8_t>& id) {
  try {
    tr::NcclAllReduce reduce(rank, size, device, id);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "nothing thrown";
}

}  // namespace

TEST_CASE("nccl all-reduce: arguments are checked before any device is touched", "[transport]") {
  std::vector<uint8_t> id(128, 1);
  tp::Device gpu("cuda:0");
  CHECK_THAT(refusal(0, 2, tp::cpu(), id),
             Catch::Contains("is not a GPU") || Catch::Contains("built without NCCL"));
  CHECK_THAT(refusal(2, 2, gpu, id), Catch::Contains("rank 2 is not in a group of 2") ||
                                         Catch::Contains("built without NCCL"));
  CHECK_THAT(refusal(0, 2, gpu, std::vector<uint8_t>(5)),
             Catch::Contains("has 5 bytes") || Catch::Contains("built without NCCL"));
}

TEST_CASE("nccl all-reduce: a group of one sums in place on the GPU", "[cuda]") {
  if (!tp::cuda_available() || !tr::nccl_available()) {
    WARN("no CUDA device or no NCCL: skipped");
    return;
  }
  tr::NcclAllReduce reduce(0, 1, tp::Device("cuda:0"), tr::nccl_unique_id());
  for (tp::DType dtype : {tp::DType::Float32, tp::DType::BFloat16}) {
    tp::Tensor t = tp::arange(200).to(dtype).to(tp::Device("cuda:0"));
    reduce.all_reduce(t);
    CHECK(t.cpu().to(tp::DType::Float32).to_vector() == tp::arange(200).to_vector());
  }
  tp::Tensor host = tp::ones({4});
  CHECK_THROWS_WITH(reduce.all_reduce(host), Catch::Contains("must be defined and on cuda:0"));
}
