// Tests for safetensors.h: round trips of every dtype and shape, the reference writer's layout byte
// for byte, float16 on load, each kind of hostile header refused with a message naming it, sharded
// folders and their index, and 10,000 mutated files each loaded exactly or refused cleanly.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "temp_path.h"
#include "tensorplay/core/detail/safetensors_format.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace fs = std::filesystem;
using tp::detail::StDType;
using tp::detail::StEntry;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string u64_le(uint64_t v) {
  std::string out;
  for (int i = 0; i < 8; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
  return out;
}

// A file from a header text (written as is, unpadded) and data bytes.
std::string raw_file(const std::string& header, const std::string& data) {
  return u64_le(header.size()) + header + data;
}

// Loads `bytes` written to a fresh file; the error message on failure.
std::string load_error(const std::string& bytes) {
  const std::string path = test_files::temp_path("hostile.safetensors");
  write_file(path, bytes);
  try {
    tp::load_safetensors(path);
  } catch (const std::runtime_error& e) {
    fs::remove(path);
    const std::string message = e.what();
    CHECK(message.rfind("safetensors: " + path + ": ", 0) == 0);
    return message;
  }
  fs::remove(path);
  return "loaded";
}

bool same_bits(const tp::Tensor& a, const tp::Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

}  // namespace

TEST_CASE("safetensors round-trips every dtype and shape", "[safetensors]") {
  tp::manual_seed(7);
  const std::vector<tp::Shape> shapes = {{},     {0},       {3, 0, 2},       {1},         {7},
                                         {2, 3}, {2, 3, 4}, {1, 1, 1, 1, 5}, {1025, 1031}};
  tp::StateDict saved;
  int k = 0;
  for (tp::DType dtype : {tp::DType::Float32, tp::DType::BFloat16})
    for (const tp::Shape& shape : shapes)
      saved.insert("t" + std::to_string(k++) + "." + tp::to_string(dtype),
                   tp::randn(shape).to(dtype));
  const std::string path = test_files::temp_path("round.safetensors");
  tp::save_safetensors(saved, path, {{"format", "pt"}, {"note", "é ✓"}});

  tp::SafetensorsMetadata metadata;
  tp::StateDict loaded = tp::load_safetensors(path, {.select = {}, .metadata = &metadata});
  CHECK(metadata == tp::SafetensorsMetadata{{"format", "pt"}, {"note", "é ✓"}});
  REQUIRE(loaded.size() == saved.size());
  for (const auto& [name, tensor] : saved) {
    INFO(name);
    REQUIRE(loaded.contains(name));
    CHECK(same_bits(loaded.at(name), tensor));
  }
  // In the file, float32 tensors come first, then bfloat16, each group by name.
  std::vector<std::string> names = loaded.keys();
  CHECK(names.front() == "t0.float32");
  CHECK(names[shapes.size()] == "t10.bfloat16");  // "t10" < "t11" < ... < "t17" < "t9"
  fs::remove(path);
}

TEST_CASE("safetensors writes the reference writer's bytes", "[safetensors]") {
  // The bytes Python's safetensors.torch.save_file writes for
  //   {"b": torch.tensor([1., 2.]), "a": torch.tensor([[1., -2., 0.5]], dtype=torch.bfloat16),
  //    "c": torch.tensor(3.)}, metadata={"format": "pt"}
  // float32 before bfloat16, then by name; compact JSON; spaces up to a multiple of 8.
  const std::string json =
      R"({"__metadata__":{"format":"pt"},"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("c":{"dtype":"F32","shape":[],"data_offsets":[8,12]},)"
      R"("a":{"dtype":"BF16","shape":[1,3],"data_offsets":[12,18]}})";
  REQUIRE(json.size() == 196);
  std::string expected = u64_le(200) + json + std::string(4, ' ');
  expected += std::string("\x00\x00\x80\x3f\x00\x00\x00\x40", 8);  // 1.0f, 2.0f
  expected += std::string("\x00\x00\x40\x40", 4);                  // 3.0f
  expected += std::string("\x80\x3f\x00\xc0\x00\x3f", 6);          // bf16 1, -2, 0.5

  tp::StateDict d;
  d.insert("b", tp::from_vector({1.0f, 2.0f}, {2}));
  d.insert("a", tp::from_vector({1.0f, -2.0f, 0.5f}, {1, 3}).to(tp::DType::BFloat16));
  d.insert("c", tp::scalar_tensor(3.0f));
  const std::string path = test_files::temp_path("reference.safetensors");
  tp::save_safetensors(d, path, {{"format", "pt"}});
  CHECK(read_file(path) == expected);
  fs::remove(path);

  // Without metadata there is no "__metadata__" entry at all.
  tp::StateDict one;
  one.insert("x", tp::scalar_tensor(1.0f));
  tp::save_safetensors(one, path);
  const std::string text = R"({"x":{"dtype":"F32","shape":[],"data_offsets":[0,4]}})";
  CHECK(read_file(path) == u64_le(56) + text + std::string(56 - text.size(), ' ') +
                               std::string("\x00\x00\x80\x3f", 4));
  fs::remove(path);
}

TEST_CASE("safetensors widens float16 to float32 on load", "[safetensors]") {
  const std::vector<uint16_t> halves = {0x3c00, 0xc000, 0x7bff, 0x0001, 0x03ff,
                                        0x8000, 0x3555, 0x7c00, 0xfc00, 0x7e00};
  std::vector<StEntry> entries = {{"h", StDType::F16, {2, 5}, 0, 0}};
  tp::detail::st_assign_offsets(entries);
  std::string bytes = tp::detail::encode_safetensors_header(entries, {});
  for (uint16_t h : halves)
    bytes += std::string{static_cast<char>(h & 0xff), static_cast<char>(h >> 8)};
  const std::string path = test_files::temp_path("half.safetensors");
  write_file(path, bytes);
  tp::StateDict d = tp::load_safetensors(path);
  fs::remove(path);
  const tp::Tensor& h = d.at("h");
  CHECK(h.dtype() == tp::DType::Float32);
  CHECK(h.shape() == tp::Shape{2, 5});
  std::vector<float> v = h.to_vector();
  CHECK(v[0] == 1.0f);
  CHECK(v[1] == -2.0f);
  CHECK(v[2] == 65504.0f);
  CHECK(v[3] == std::ldexp(1.0f, -24));
  CHECK(v[4] == std::ldexp(1023.0f, -24));
  CHECK((v[5] == 0.0f && std::signbit(v[5])));
  CHECK(v[6] == 0.25f * (1.0f + 341.0f / 1024.0f));  // 0.333251953125
  CHECK((std::isinf(v[7]) && v[7] > 0));
  CHECK((std::isinf(v[8]) && v[8] < 0));
  CHECK(std::isnan(v[9]));
}

TEST_CASE("safetensors loads only the selected tensors", "[safetensors]") {
  tp::StateDict d;
  d.insert("keep.a", tp::from_vector({1, 2, 3}, {3}));
  d.insert("drop.b", tp::from_vector({4}, {1}));
  d.insert("keep.c", tp::scalar_tensor(5));
  const std::string path = test_files::temp_path("select.safetensors");
  tp::save_safetensors(d, path);
  tp::StateDict part = tp::load_safetensors(
      path, {.select = [](const std::string& name) { return name.rfind("keep.", 0) == 0; }});
  fs::remove(path);
  CHECK(part.keys() == std::vector<std::string>{"keep.a", "keep.c"});
  CHECK(part.at("keep.a").to_vector() == std::vector<float>{1, 2, 3});
}

TEST_CASE("safetensors refuses a hostile file, naming what is wrong", "[safetensors]") {
  const std::string f32x2 = std::string(8, '\0');
  auto entry = [](const std::string& name, const std::string& dtype, const std::string& shape,
                  const std::string& offsets) {
    return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape +
           ",\"data_offsets\":" + offsets + "}";
  };
  const std::string good = "{" + entry("w", "F32", "[2]", "[0,8]") + "}";
  REQUIRE(load_error(raw_file(good, f32x2)) == "loaded");

  CHECK_THAT(load_error("abc"), Catch::Contains("holds 3 bytes, fewer than the 8-byte"));
  CHECK_THAT(load_error(u64_le(100'000'001) + good),
             Catch::Contains("header length 100000001 exceeds the limit of 100000000"));
  CHECK_THAT(load_error(u64_le(~uint64_t{0}) + good), Catch::Contains("exceeds the limit"));
  CHECK_THAT(load_error(u64_le(good.size() + 9) + good + f32x2),
             Catch::Contains("runs past the end of the file"));
  CHECK_THAT(load_error(raw_file("{\"w\xff\":{}}", "")),
             Catch::Contains("not valid UTF-8 (byte 0xff at offset 11)"));
  CHECK_THAT(load_error(raw_file("{\"\xc0\xaf\":{}}", "")), Catch::Contains("not valid UTF-8"));
  CHECK_THAT(load_error(raw_file(" " + good, f32x2)), Catch::Contains("does not start with '{'"));
  CHECK_THAT(load_error(raw_file("", "")), Catch::Contains("does not start with '{'"));
  CHECK_THAT(load_error(raw_file("{\"w\":", "")), Catch::Contains("not valid JSON"));
  CHECK_THAT(load_error(raw_file(good + "x", f32x2)), Catch::Contains("not valid JSON"));
  CHECK_THAT(load_error(raw_file(good + "   ", f32x2)), Catch::Equals("loaded"));
  CHECK_THAT(load_error(raw_file("[1]", "")), Catch::Contains("does not start with '{'"));
  CHECK_THAT(load_error(raw_file("{" + entry("w", "F32", "[2]", "[0,8]") + "," +
                                     entry("w", "F32", "[2]", "[8,16]") + "}",
                                 f32x2 + f32x2)),
             Catch::Contains("names tensor \"w\" twice"));
  CHECK_THAT(load_error(raw_file(R"({"w":{"dtype":"F32","dtype":"F32","shape":[2],)"
                                 R"("data_offsets":[0,8]}})",
                                 f32x2)),
             Catch::Contains("repeats the key \"dtype\""));
  CHECK_THAT(load_error(raw_file("{" + entry("w", "Q8", "[2]", "[0,8]") + "}", f32x2)),
             Catch::Contains("tensor \"w\" has unknown dtype \"Q8\""));
  CHECK_THAT(load_error(raw_file("{" + entry("w", "I64", "[1]", "[0,8]") + "}", f32x2)),
             Catch::Contains("has dtype I64, which tensorplay does not load"));
  CHECK_THAT(load_error(raw_file("{" + entry("w", "F32", "[3]", "[0,8]") + "}", f32x2)),
             Catch::Contains("shape [3] of F32 needs 12 bytes, but data_offsets [0, 8] hold 8"));
  CHECK_THAT(load_error(raw_file("{" + entry("w", "F32", "[2]", "[8,0]") + "}", f32x2)),
             Catch::Contains("data_offsets [8, 0] end before they begin"));
  CHECK_THAT(load_error(raw_file("{" + entry("w", "F32", "[2]", "[0,8,9]") + "}", f32x2)),
             Catch::Contains("is not a pair of non-negative integers"));
  CHECK_THAT(load_error(raw_file("{" + entry("w", "F32", "[2]", "[0,-8]") + "}", f32x2)),
             Catch::Contains("is not a pair of non-negative integers"));
  CHECK_THAT(load_error(raw_file("{" + entry("w", "F32", "[-2]", "[0,8]") + "}", f32x2)),
             Catch::Contains("shape entry -2 is not a non-negative integer"));
  CHECK_THAT(load_error(raw_file("{" + entry("w", "F32", "[2.0]", "[0,8]") + "}", f32x2)),
             Catch::Contains("shape entry 2.0 is not a non-negative integer"));
  CHECK_THAT(
      load_error(raw_file(
          "{" + entry("w", "F32", "[4294967296,4294967296,4294967296]", "[0,8]") + "}", f32x2)),
      Catch::Contains("has too many elements"));
  CHECK_THAT(
      load_error(raw_file("{" + entry("w", "F32", "[4611686018427387904]", "[0,8]") + "}", f32x2)),
      Catch::Contains("needs more than 2^64 bytes"));
  CHECK_THAT(load_error(raw_file("{" + entry("w", "F32", "[2]", "[0,8]") + "," +
                                     entry("v", "F32", "[2]", "[4,12]") + "}",
                                 f32x2 + "1234")),
             Catch::Contains("\"w\" [0, 8] and \"v\" [4, 12] overlap"));
  CHECK_THAT(load_error(raw_file("{" + entry("w", "F32", "[2]", "[4,12]") + "}", "1234" + f32x2)),
             Catch::Contains("no tensor covers bytes [0, 4]"));
  CHECK_THAT(load_error(raw_file(good, f32x2 + "x")),
             Catch::Contains("cover 8 bytes but the file holds 9 bytes after the header "
                             "(trailing bytes)"));
  CHECK_THAT(load_error(raw_file(good, "1234")), Catch::Contains("(the file is truncated)"));
  CHECK_THAT(
      load_error(raw_file("{" + entry("w", "F32", "[2]", "[0,18446744073709551615]") + "}", f32x2)),
      Catch::Contains("hold 18446744073709551615"));
  CHECK_THAT(load_error(raw_file(R"({"w":[1,2]})", "")), Catch::Contains("not an object"));
  CHECK_THAT(load_error(raw_file(R"({"w":{"shape":[],"data_offsets":[0,0]}})", "")),
             Catch::Contains("tensor \"w\" has no \"dtype\""));
  CHECK_THAT(load_error(raw_file(R"({"__metadata__":{"a":1}})", "")),
             Catch::Contains("\"__metadata__\" entry \"a\" is a number, not a string"));
  CHECK_THAT(load_error(raw_file(R"({"__metadata__":[]})", "")),
             Catch::Contains("\"__metadata__\" is not an object"));
  CHECK_THAT(load_error(raw_file(std::string(100000, '[') + std::string(100000, ']'), "")),
             Catch::Contains("does not start with '{'"));
  CHECK_THAT(load_error(raw_file(
                 "{\"a\":" + std::string(100000, '[') + std::string(100000, ']') + "}", "")),
             Catch::Contains("not an object with dtype"));

  // An empty file, a folder and a missing file are refused too.
  CHECK_THAT(load_error(""), Catch::Contains("holds 0 bytes"));
  CHECK_THROWS_WITH(tp::load_safetensors(fs::temp_directory_path().string()),
                    Catch::Contains("is not a regular file"));
  CHECK_THROWS_WITH(tp::load_safetensors("/nonexistent/x.safetensors"),
                    Catch::Contains("cannot open /nonexistent/x.safetensors"));
}

TEST_CASE("safetensors refuses to write what the format cannot hold", "[safetensors]") {
  const std::string path = test_files::temp_path("bad.safetensors");
  tp::StateDict reserved;
  reserved.insert("__metadata__", tp::scalar_tensor(1));
  CHECK_THROWS_WITH(tp::save_safetensors(reserved, path), Catch::Contains("reserves it"));
  tp::StateDict bad_name;
  bad_name.insert("w\xff", tp::scalar_tensor(1));
  CHECK_THROWS_WITH(tp::save_safetensors(bad_name, path), Catch::Contains("not valid UTF-8"));
  tp::StateDict undefined;
  undefined.insert("u", tp::Tensor());
  CHECK_THROWS_WITH(tp::save_safetensors(undefined, path), Catch::Contains("\"u\" is undefined"));
  CHECK_FALSE(fs::exists(path));
}

TEST_CASE("safetensors folders shard with an index and name a missing shard", "[safetensors]") {
  tp::manual_seed(3);
  tp::StateDict d;
  for (int i = 0; i < 5; ++i) d.insert("layer" + std::to_string(i) + ".w", tp::randn({10, 10}));
  d.insert("big", tp::randn({300}));
  const std::string folder = test_files::temp_path("sharded");

  // 400 bytes per layer, 1000-byte shards: two layers per shard, and the 1200-byte one alone.
  tp::save_safetensors_folder(d, folder, 1000);
  CHECK_FALSE(fs::exists(fs::path(folder) / "model.safetensors"));
  for (const char* shard : {"model-00001-of-00004.safetensors", "model-00002-of-00004.safetensors",
                            "model-00003-of-00004.safetensors", "model-00004-of-00004.safetensors"})
    CHECK(fs::exists(fs::path(folder) / shard));
  const std::string index_path = (fs::path(folder) / "model.safetensors.index.json").string();
  nlohmann::json index = nlohmann::json::parse(read_file(index_path));
  CHECK(index["metadata"]["total_size"] == 5 * 400 + 1200);
  CHECK(index["weight_map"]["layer4.w"] == "model-00003-of-00004.safetensors");
  CHECK(index["weight_map"]["big"] == "model-00004-of-00004.safetensors");

  tp::SafetensorsMetadata metadata;
  tp::StateDict loaded = tp::load_safetensors_folder(folder, {.select = {}, .metadata = &metadata});
  CHECK(metadata.at("total_size") == "3200");
  REQUIRE(loaded.size() == d.size());
  for (const auto& [name, t] : d) CHECK(same_bits(loaded.at(name), t));

  // Selecting tensors opens only their shards: the others may be absent.
  fs::remove(fs::path(folder) / "model-00001-of-00004.safetensors");
  tp::StateDict part = tp::load_safetensors_folder(
      folder, {.select = [](const std::string& n) { return n == "big"; }});
  CHECK(part.keys() == std::vector<std::string>{"big"});
  CHECK_THROWS_WITH(tp::load_safetensors_folder(folder),
                    Catch::Contains("shard model-00001-of-00004.safetensors is missing") &&
                        Catch::Contains("the index puts 2 tensors there: layer0.w, layer1.w"));

  // An index and its shards disagreeing is an error naming the tensor.
  tp::save_safetensors_folder(d, folder, 1000);
  index["weight_map"]["layer0.w"] = "model-00002-of-00004.safetensors";
  write_file(index_path, index.dump());
  CHECK_THROWS_WITH(tp::load_safetensors_folder(folder),
                    Catch::Contains("holds tensor \"layer0.w\", which the index puts in "
                                    "model-00002-of-00004.safetensors"));
  index["weight_map"].erase("layer0.w");
  write_file(index_path, index.dump());
  CHECK_THROWS_WITH(tp::load_safetensors_folder(folder),
                    Catch::Contains("holds tensor \"layer0.w\", which the index") &&
                        Catch::Contains("does not list"));
  index["weight_map"]["layer0.w"] = "model-00001-of-00004.safetensors";
  index["weight_map"]["ghost"] = "model-00001-of-00004.safetensors";
  write_file(index_path, index.dump());
  CHECK_THROWS_WITH(tp::load_safetensors_folder(folder),
                    Catch::Contains("puts tensor \"ghost\" in shard "
                                    "model-00001-of-00004.safetensors, which does not hold it"));
  index["weight_map"]["ghost"] = "../model.safetensors";
  write_file(index_path, index.dump());
  CHECK_THROWS_WITH(tp::load_safetensors_folder(folder),
                    Catch::Contains("not a plain file name beside the index"));
  write_file(index_path, "{\"weight_map\": 3}");
  CHECK_THROWS_WITH(tp::load_safetensors_folder(folder), Catch::Contains("no \"weight_map\""));
  write_file(index_path, "{");
  CHECK_THROWS_WITH(tp::load_safetensors_folder(folder), Catch::Contains("not valid JSON"));

  // Saving again as one file replaces the sharded index; an empty folder is an error.
  tp::save_safetensors_folder(d, folder);
  CHECK(fs::exists(fs::path(folder) / "model.safetensors"));
  CHECK_FALSE(fs::exists(index_path));
  CHECK(tp::load_safetensors_folder(folder).size() == d.size());
  fs::remove_all(folder);
  fs::create_directories(folder);
  CHECK_THROWS_WITH(tp::load_safetensors_folder(folder),
                    Catch::Contains("holds neither model.safetensors nor"));
  fs::remove_all(folder);
}

namespace {

// What the header of `bytes` says, read by nlohmann alone (no checks), to compare a successful
// load with: every tensor, its dtype, shape and offsets.
struct Described {
  std::string dtype;
  tp::Shape shape;
  uint64_t begin, end;
};

std::map<std::string, Described> describe(const std::string& bytes, uint64_t& data_start) {
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  data_start = 8 + n;
  nlohmann::json j = nlohmann::json::parse(bytes.substr(8, n));
  std::map<std::string, Described> out;
  for (const auto& [name, v] : j.items()) {
    if (name == "__metadata__") continue;
    out[name] = {v["dtype"], v["shape"].get<tp::Shape>(), v["data_offsets"][0],
                 v["data_offsets"][1]};
  }
  return out;
}

}  // namespace

TEST_CASE("safetensors loads 10,000 mutated files exactly or refuses them cleanly",
          "[safetensors]") {
  // A valid file with every dtype, a scalar and an empty tensor.
  std::vector<StEntry> entries = {{"a.weight", StDType::F32, {2, 3}, 0, 0},
                                  {"b", StDType::BF16, {5}, 0, 0},
                                  {"c.half", StDType::F16, {3}, 0, 0},
                                  {"s", StDType::F32, {}, 0, 0},
                                  {"e", StDType::BF16, {0, 4}, 0, 0}};
  tp::detail::st_assign_offsets(entries);
  std::string base = tp::detail::encode_safetensors_header(entries, {{"format", "pt"}});
  const size_t header_end = base.size();
  std::mt19937 rng(2024);
  for (uint64_t i = 0; i < entries.back().end; ++i) base += static_cast<char>(rng() & 0x3f);

  const std::string path = test_files::temp_path("mutated.safetensors");
  const std::string alphabet = "{}[]\":,0123456789-.eE FBI16328_\\u\xff\xc3";
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  int loaded = 0, refused = 0;
  for (int round = 0; round < 10000; ++round) {
    std::string bytes = base;
    const int mutations = 1 + static_cast<int>(pick(3));
    for (int m = 0; m < mutations && !bytes.empty(); ++m) {
      // Mostly the header, where parsing happens; sometimes the length field or the data.
      const size_t kind = pick(10);
      const size_t at = kind < 7
                            ? 8 + pick(std::max<size_t>(1, std::min(bytes.size(), header_end) - 8))
                            : pick(bytes.size());
      if (kind < 3 && at < bytes.size()) {
        bytes[at] = alphabet[pick(alphabet.size())];
      } else if (kind == 3 && at < bytes.size()) {
        bytes.erase(at, 1 + pick(4));
      } else if (kind == 4) {
        bytes.insert(std::min(at, bytes.size()), 1, alphabet[pick(alphabet.size())]);
      } else if (kind == 5) {  // copy a piece of the header elsewhere in it
        const size_t from = 8 + pick(header_end - 8), len = 1 + pick(16);
        bytes.insert(std::min(at, bytes.size()), base.substr(from, len));
      } else if (kind == 6 && at < bytes.size()) {
        bytes[at] = static_cast<char>(bytes[at] ^ (1 << pick(8)));
      } else if (kind == 7) {  // the header length
        uint64_t n = 0;
        std::memcpy(&n, bytes.data(), 8);
        n = pick(2) ? n + pick(17) - 8 : (uint64_t{1} << pick(64));
        bytes.replace(0, 8, u64_le(n));
      } else if (kind == 8) {
        bytes.resize(pick(bytes.size() + 1));
      } else if (at < bytes.size()) {
        bytes[at] = static_cast<char>(rng());
      }
    }
    fs::remove(path);  // a fresh file: truncating one in place makes ext4 flush it on close
    write_file(path, bytes);
    INFO("round " << round);
    tp::StateDict d;
    try {
      d = tp::load_safetensors(path);
    } catch (const std::runtime_error& e) {
      const std::string message = e.what();
      REQUIRE(message.rfind("safetensors: " + path + ": ", 0) == 0);
      REQUIRE(message.size() > path.size() + 30);
      ++refused;
      continue;
    }  // any other exception escapes and fails the test
    ++loaded;
    // Loaded: exactly what the (now valid) header describes, from exactly those bytes.
    uint64_t data_start = 0;
    const auto described = describe(bytes, data_start);
    REQUIRE(d.size() == described.size());
    for (const auto& [name, want] : described) {
      INFO(name);
      REQUIRE(d.contains(name));
      const tp::Tensor& t = d.at(name);
      REQUIRE(t.shape() == want.shape);
      const StDType dtype = want.dtype == "F32"    ? StDType::F32
                            : want.dtype == "BF16" ? StDType::BF16
                                                   : StDType::F16;
      REQUIRE(want.dtype == tp::detail::st_dtype_name(dtype));
      REQUIRE(data_start + want.end <= bytes.size());
      std::vector<float> expected(static_cast<size_t>(t.numel()));
      tp::detail::st_decode_to_float(
          dtype, reinterpret_cast<const unsigned char*>(bytes.data()) + data_start + want.begin,
          expected.size(), expected.data());
      std::vector<float> got = t.to_vector();
      REQUIRE(
          (expected.empty() || std::memcmp(got.data(), expected.data(), 4 * expected.size()) == 0));
    }
  }
  fs::remove(path);
  // Both outcomes occur (mutations of the data and of spaces load; most others do not).
  CHECK(loaded > 100);
  CHECK(refused > 5000);
  WARN("mutated files: " << loaded << " loaded, " << refused << " refused");
}

TEST_CASE("cuda: safetensors writes device tensors from the host copy", "[safetensors][cuda]") {
  if (!tp::cuda_available()) {
    WARN("no CUDA device: skipped");
    return;
  }
  tp::manual_seed(5);
  const tp::Tensor a = tp::randn({3, 5}), b = tp::randn({7}).to(tp::DType::BFloat16);
  tp::StateDict on_gpu;
  on_gpu.insert("a", a.to(tp::Device("cuda:0")));
  on_gpu.insert("b", b.to(tp::Device("cuda:0")));
  const std::string path = test_files::temp_path("cuda.safetensors");
  tp::save_safetensors(on_gpu, path);
  tp::StateDict loaded = tp::load_safetensors(path);
  fs::remove(path);
  CHECK(same_bits(loaded.at("a"), a));
  CHECK(same_bits(loaded.at("b"), b));
}
