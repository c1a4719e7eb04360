// Tests for serialize.h: the binary checkpoint format (version 2, and reading version 1), byte for
// byte, its checksums and its error messages. Random corruption is in tests/misuse.
#include <zlib.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "temp_path.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;

namespace {

template <typename T>
T read_le(const std::string& bytes, size_t offset) {
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));  // the test host is little-endian
  return value;
}

template <typename T>
void append_le(std::string& bytes, T value) {
  bytes.append(reinterpret_cast<const char*>(&value), sizeof(T));
}

uint32_t crc_of(const std::string& bytes, size_t begin, size_t end) {
  return static_cast<uint32_t>(
      crc32(0, reinterpret_cast<const Bytef*>(bytes.data() + begin), end - begin));
}

std::string written(const tp::StateDict& d) {
  std::ostringstream out;
  tp::write_tensors(out, d);
  return out.str();
}

tp::StateDict read_back(const std::string& bytes) {
  std::istringstream in(bytes);
  return tp::read_tensors(in, "test.bin");
}

// A version-1 file as the previous format wrote it: no data length, no checksums.
std::string version1_file(const std::string& name, const tp::Shape& shape,
                          const std::vector<float>& values) {
  std::string b("TPLAYSD\0", 8);
  append_le<uint32_t>(b, 1);
  append_le<uint64_t>(b, 1);
  append_le<uint32_t>(b, static_cast<uint32_t>(name.size()));
  b += name;
  append_le<uint8_t>(b, 0);
  append_le<uint32_t>(b, static_cast<uint32_t>(shape.size()));
  for (int64_t d : shape) append_le<int64_t>(b, d);
  for (float v : values) append_le<float>(b, v);
  return b;
}

}  // namespace

TEST_CASE("write_tensors follows the documented layout, checksums included", "[serialize]") {
  tp::StateDict d;
  d.insert("ab", tp::from_vector({1.5f, -2.0f}, {2, 1}));
  std::string bytes = written(d);
  REQUIRE(bytes.size() == 8 + 4 + 8 + (4 + 2 + 1 + 4 + 2 * 8 + 8 + 4 + 2 * 4 + 4) + 4);
  CHECK(std::memcmp(bytes.data(), "TPLAYSD\0", 8) == 0);
  CHECK(read_le<uint32_t>(bytes, 8) == 2);   // version
  CHECK(read_le<uint64_t>(bytes, 12) == 1);  // count
  CHECK(read_le<uint32_t>(bytes, 20) == 2);  // name length
  CHECK(bytes.substr(24, 2) == "ab");
  CHECK(static_cast<uint8_t>(bytes[26]) == 0);  // float32
  CHECK(read_le<uint32_t>(bytes, 27) == 2);     // rank
  CHECK(read_le<int64_t>(bytes, 31) == 2);
  CHECK(read_le<int64_t>(bytes, 39) == 1);
  CHECK(read_le<uint64_t>(bytes, 47) == 8);                      // data length
  CHECK(read_le<uint32_t>(bytes, 55) == crc_of(bytes, 20, 55));  // header checksum
  CHECK(read_le<float>(bytes, 59) == 1.5f);
  CHECK(read_le<float>(bytes, 63) == -2.0f);
  CHECK(read_le<uint32_t>(bytes, 67) == crc_of(bytes, 59, 67));  // data checksum
  CHECK(read_le<uint32_t>(bytes, 71) == crc_of(bytes, 0, 71));   // whole-file checksum
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

TEST_CASE("version-1 checkpoints still load", "[serialize]") {
  tp::StateDict back = read_back(version1_file("w", {2, 2}, {1, 2, 3, -4}));
  REQUIRE(back.keys() == std::vector<std::string>{"w"});
  CHECK(back.at("w").shape() == tp::Shape{2, 2});
  CHECK(back.at("w").to_vector() == std::vector<float>{1, 2, 3, -4});
  // Without checksums, a version-1 file still gets every structural check.
  std::string huge = version1_file("w", {2, 2}, {1, 2, 3, -4});
  int64_t dim = int64_t{1} << 62;
  std::memcpy(huge.data() + 8 + 4 + 8 + 4 + 1 + 1 + 4, &dim, sizeof(dim));
  CHECK_THROWS_WITH(read_back(huge), Catch::Contains("'w'") && Catch::Contains("at byte"));
  CHECK_THROWS_WITH(read_back(version1_file("w", {1}, {1}) + "x"),
                    Catch::Contains("trailing garbage"));
}

TEST_CASE("reading a bad checkpoint says what is wrong and where", "[serialize]") {
  CHECK_THROWS_WITH(read_back("not a checkpoint at all"), Catch::Contains("bad magic"));
  CHECK_THROWS_WITH(read_back(""), Catch::Contains("too few"));
  tp::StateDict d;
  d.insert("weight", tp::ones({4, 4}));
  std::string bytes = written(d);
  CHECK_THROWS_WITH(
      read_back(bytes.substr(0, bytes.size() - 12)),
      Catch::Contains("truncated") && Catch::Contains("'weight'") && Catch::Contains("at byte"));
  {
    std::string newer = bytes;
    newer[8] = 9;
    CHECK_THROWS_WITH(read_back(newer), Catch::Contains("version 9"));
  }
  {
    std::string flipped = bytes;
    flipped[70] ^= 0x10;  // inside the data
    CHECK_THROWS_WITH(read_back(flipped), Catch::Contains("'weight'") &&
                                              Catch::Contains("data checksum mismatch") &&
                                              Catch::Contains("at byte"));
  }
  {
    std::string renamed = bytes;
    renamed[25] = 'W';  // inside the name
    CHECK_THROWS_WITH(read_back(renamed), Catch::Contains("header checksum mismatch"));
  }
  CHECK_THROWS_WITH(read_back(bytes + "garbage"),
                    Catch::Contains("trailing garbage") && Catch::Contains("7 unexpected bytes"));
  CHECK_THROWS_WITH(tp::load_tensors("/nonexistent/dir/file.bin"), Catch::Contains("cannot open"));
  tp::StateDict bad;
  bad.insert("u", tp::Tensor());
  std::ostringstream sink;
  CHECK_THROWS_WITH(tp::write_tensors(sink, bad), Catch::Contains("'u'"));
}
