// Tests for detail/layout_codec.h: layouts round-trip; cut or inflated bytes are refused, never
// read past or allocated for.
#include <catch2/catch.hpp>

#include "tensorplay/core/detail/layout_codec.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;

TEST_CASE("tensor layouts round-trip, and damaged ones are refused", "[layout_codec]") {
  const std::vector<tp::Tensor> tensors = {
      tp::zeros({2, 3}), tp::zeros({}), tp::zeros({4}).to(tp::DType::BFloat16), tp::zeros({0, 5})};
  const std::string bytes = tp::detail::encode_layouts(tensors);
  const auto layouts = tp::detail::decode_layouts(bytes);
  REQUIRE(layouts.has_value());
  REQUIRE(layouts->size() == tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    CHECK((*layouts)[i].dtype == tensors[i].dtype());
    CHECK((*layouts)[i].shape == tensors[i].shape());
  }
  CHECK(tp::detail::decode_layouts(tp::detail::encode_layouts({}))->empty());
  for (size_t cut = 0; cut < bytes.size(); cut += 3)  // every shorter prefix
    CHECK_FALSE(tp::detail::decode_layouts(bytes.substr(0, cut)).has_value());
  std::string inflated = bytes;
  inflated[7] = '\x7f';  // a count of about 2^62 tensors
  CHECK_FALSE(tp::detail::decode_layouts(inflated).has_value());
  std::string deep = bytes;
  deep[16] = '\x7f';  // the first tensor's rank
  CHECK_FALSE(tp::detail::decode_layouts(deep).has_value());
}
