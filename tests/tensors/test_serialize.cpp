// Tests for serialize.h: the binary checkpoint format, byte for byte, and its error messages.
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "temp_path.h"
#include "tensors/tensors.h"

namespace tp = tensorplay;

namespace {
template <typename T>
T read_le(const std::string& bytes, size_t offset) {
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));  // the test host is little-endian
  return value;
}
}  // namespace

TEST_CASE("write_tensors follows the documented layout", "[serialize]") {
  tp::StateDict d;
  d.insert("ab", tp::from_vector({1.5f, -2.0f}, {2, 1}));
  std::ostringstream out;
  tp::write_tensors(out, d);
  std::string bytes = out.str();
  REQUIRE(bytes.size() == 8 + 4 + 8 + (4 + 2 + 1 + 4 + 2 * 8 + 2 * 4));
  CHECK(std::memcmp(bytes.data(), "TPLAYSD\0", 8) == 0);
  CHECK(read_le<uint32_t>(bytes, 8) == 1);   // version
  CHECK(read_le<uint64_t>(bytes, 12) == 1);  // count
  CHECK(read_le<uint32_t>(bytes, 20) == 2);  // name length
  CHECK(bytes.substr(24, 2) == "ab");
  CHECK(static_cast<uint8_t>(bytes[26]) == 0);  // float32
  CHECK(read_le<uint32_t>(bytes, 27) == 2);     // rank
  CHECK(read_le<int64_t>(bytes, 31) == 2);
  CHECK(read_le<int64_t>(bytes, 39) == 1);
  CHECK(read_le<float>(bytes, 47) == 1.5f);
  CHECK(read_le<float>(bytes, 51) == -2.0f);
}

TEST_CASE("tensors round-trip through a file, scalars and bfloat16 included", "[serialize]") {
  tp::Generator g(3);
  tp::StateDict d;
  d.insert("w", tp::randn({3, 4}, {}, &g));
  d.insert("scalar", tp::scalar_tensor(2.25f));
  d.insert("half", tp::from_vector({1.0f, 0.5f, -3.0f}, {3}).to(tp::DType::BFloat16));
  d.insert("empty", tp::zeros({0, 5}));
  auto path = test_files::temp_path("serialize.bin");
  tp::save_tensors(d, path);
  tp::StateDict back = tp::load_tensors(path);
  std::filesystem::remove(path);
  REQUIRE(back.keys() == d.keys());
  for (const auto& [name, t] : d) {
    CHECK(back.at(name).shape() == t.shape());
    CHECK(back.at(name).dtype() == t.dtype());
    CHECK(back.at(name).to_vector() == t.to_vector());
  }
}

TEST_CASE("reading a bad checkpoint says what is wrong", "[serialize]") {
  {
    std::istringstream in("not a checkpoint at all");
    CHECK_THROWS_WITH(tp::read_tensors(in, "x.bin"), Catch::Contains("bad magic"));
  }
  tp::StateDict d;
  d.insert("weight", tp::ones({4, 4}));
  std::ostringstream out;
  tp::write_tensors(out, d);
  std::string bytes = out.str();
  {
    std::istringstream in(bytes.substr(0, bytes.size() - 3));
    CHECK_THROWS_WITH(tp::read_tensors(in),
                      Catch::Contains("truncated") && Catch::Contains("'weight'"));
  }
  {
    std::string newer = bytes;
    newer[8] = 9;
    std::istringstream in(newer);
    CHECK_THROWS_WITH(tp::read_tensors(in), Catch::Contains("version 9"));
  }
  CHECK_THROWS_WITH(tp::load_tensors("/nonexistent/dir/file.bin"), Catch::Contains("cannot open"));
  tp::StateDict bad;
  bad.insert("u", tp::Tensor());
  std::ostringstream sink;
  CHECK_THROWS_WITH(tp::write_tensors(sink, bad), Catch::Contains("'u'"));
}
