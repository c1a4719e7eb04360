// Tests for tensor.h: factories, views, conversions, printing.
#include <catch2/catch.hpp>
#include <sstream>

#include "tensorplay/tensor.h"

namespace tp = tensorplay;

TEST_CASE("factories fill shapes", "[tensor]") {
  tp::Tensor z = tp::zeros({2, 3});
  CHECK(z.shape() == tp::Shape{2, 3});
  CHECK(z.numel() == 6);
  CHECK(tp::ones({4}).to_vector() == std::vector<float>(4, 1.0f));
  CHECK(tp::full({2}, 2.5f).to_vector() == std::vector<float>{2.5f, 2.5f});
  CHECK(tp::arange(3).to_vector() == std::vector<float>{0, 1, 2});
  CHECK(tp::scalar_tensor(3).item() == 3.0f);
}

TEST_CASE("slice0 and reshape are views of the same storage", "[tensor]") {
  tp::Tensor t = tp::arange(12).reshape({4, 3});
  tp::Tensor rows = t.slice0(1, 3);
  CHECK(rows.shape() == tp::Shape{2, 3});
  CHECK(rows.to_vector() == std::vector<float>{3, 4, 5, 6, 7, 8});
  rows.fill_(0);
  CHECK(t.to_vector()[3] == 0.0f);
  CHECK_THROWS_WITH(t.reshape({5, 3}), Catch::Contains("cannot view"));
  CHECK(t.reshape({-1, 6}).shape() == tp::Shape{2, 6});
}

TEST_CASE("seeded randn repeats", "[tensor]") {
  tp::manual_seed(42);
  auto a = tp::randn({8}).to_vector();
  tp::manual_seed(42);
  auto b = tp::randn({8}).to_vector();
  CHECK(a == b);
}

TEST_CASE("bfloat16 round trip keeps 8 bits of mantissa", "[tensor]") {
  tp::Tensor t = tp::from_vector({1.0f, 3.140625f, -2.5f}, {3});
  tp::Tensor b = t.to(tp::DType::BFloat16);
  CHECK(b.dtype() == tp::DType::BFloat16);
  CHECK(b.nbytes() == 6);
  CHECK(b.to(tp::DType::Float32).to_vector() == std::vector<float>{1.0f, 3.140625f, -2.5f});
}

TEST_CASE("devices parse and print", "[tensor]") {
  CHECK(tp::to_string(tp::Device("cuda:1")) == "cuda:1");
  CHECK(tp::Device("cpu").is_cpu());
  CHECK_THROWS_WITH(tp::Device("gpu0"), Catch::Contains("unknown device"));
}

TEST_CASE("printing shows shape and values", "[tensor]") {
  std::ostringstream os;
  os << tp::from_vector({1, 2}, {2});
  CHECK(os.str().find("shape=[2]") != std::string::npos);
  CHECK(os.str().find("values=[1, 2]") != std::string::npos);
}

TEST_CASE("bfloat16 tensors print, convert to vectors and give items", "[tensor]") {
  tp::Tensor b = tp::from_vector({1.5f, -2.0f}, {2}).to(tp::DType::BFloat16);
  CHECK(b.to_vector() == std::vector<float>{1.5f, -2.0f});
  CHECK(tp::scalar_tensor(0.25f).to(tp::DType::BFloat16).item() == 0.25f);
  std::ostringstream os;
  os << b;
  CHECK(os.str().find("dtype=bfloat16") != std::string::npos);
  CHECK(os.str().find("values=[1.5, -2]") != std::string::npos);
}
