// Tests for data/token_shards.h: nanoGPT uint16 and uint32 shards and llm.c's headered ones
// written and read back, the element type from a folder's tokens.json, folders in name order,
// and files that are not shards refused by name.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "temp_path.h"
#include "tensorplay/data/token_shards.h"

namespace data = tensorplay::data;
namespace fs = std::filesystem;

TEST_CASE("token shards round-trip in each format", "[token_shards]") {
  const std::string dir = test_files::temp_path("shards");
  fs::create_directories(dir);
  const std::vector<int32_t> small = {0, 1, 255, 256, 65535, 7};
  data::write_token_shard(dir + "/a.bin", small, data::TokenType::UInt16);
  CHECK(fs::file_size(dir + "/a.bin") == 12);  // header-free, 2 bytes a token
  data::write_token_shard(dir + "/c.bin", small, data::TokenType::UInt16, data::ShardFormat::LlmC);
  CHECK(fs::file_size(dir + "/c.bin") == 1024 + 12);
  for (const char* name : {"/a.bin", "/c.bin"}) {
    data::TokenShard shard(dir + name, data::TokenType::UInt16);
    REQUIRE(shard.size() == 6);
    for (int64_t i = 0; i < 6; ++i) CHECK(shard.at(i) == small[i]);
  }
  // The folder's shards in name order, uint16 without a tokens.json.
  auto shards = data::open_token_shards(dir);
  REQUIRE(shards.size() == 2);
  CHECK(shards[1].path() == dir + "/c.bin");

  const std::vector<int32_t> large = {70000, 0, 2147483647};
  CHECK(data::token_type_for(65536) == data::TokenType::UInt16);
  CHECK(data::token_type_for(65537) == data::TokenType::UInt32);
  const std::string wide = test_files::temp_path("wide");
  fs::create_directories(wide);
  data::write_token_shard(wide + "/w.bin", large, data::TokenType::UInt32);
  std::ofstream(wide + "/tokens.json") << R"({"dtype": "uint32", "vocab_size": 2147483648})";
  auto wide_shards = data::open_token_shards(wide + "/w.bin");
  REQUIRE(wide_shards.at(0).size() == 3);
  CHECK(wide_shards[0].at(0) == 70000);
  CHECK(wide_shards[0].at(2) == 2147483647);
  fs::remove_all(dir);
  fs::remove_all(wide);
}

TEST_CASE("what is not a token shard is refused by name", "[token_shards]") {
  const std::string dir = test_files::temp_path("shards_bad");
  fs::create_directories(dir);
  CHECK_THROWS_WITH(data::write_token_shard(dir + "/x.bin", {1, 70000}, data::TokenType::UInt16),
                    Catch::Contains("token 70000 at position 1 does not fit uint16"));
  CHECK_THROWS_WITH(data::write_token_shard(dir + "/x.bin", {1}, data::TokenType::UInt32,
                                            data::ShardFormat::LlmC),
                    Catch::Contains("llm.c shards hold uint16"));
  CHECK_THROWS_WITH(data::open_token_shards(dir), Catch::Contains("holding .bin shards"));
  std::ofstream(dir + "/odd.bin") << "abc";
  CHECK_THROWS_WITH(data::open_token_shards(dir), Catch::Contains("not a whole number of uint16"));
  std::ofstream(dir + "/tokens.json") << R"({"dtype": "int8"})";
  CHECK_THROWS_WITH(data::open_token_shards(dir), Catch::Contains("tokens.json"));
  fs::remove_all(dir);
}
