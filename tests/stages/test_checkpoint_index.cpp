// Tests for checkpoint_index.h: the index text round-trips, and a truncated, damaged or foreign
// index, an entry past the data file, or a name with a space is a clear error.
#include <catch2/catch.hpp>
#include <cstdio>

#include "tensorplay/pipelining/checkpoints/checkpoint.h"
#include "tensorplay/pipelining/checkpoints/checkpoint_index.h"
#include "tensorplay/pipelining/checkpoints/checkpoint_io.h"

namespace pp = tensorplay::pipelining;

namespace {

pp::CheckpointIndex sample() {
  pp::CheckpointIndex index;
  index.step = 120;
  index.samples_consumed = 3840;
  index.num_stages = 4;
  index.stages = {1, 2};
  index.layout = "pp 2 x dp 2";
  index.optimizer = "AdamW";
  index.data_file = "data_s1.bin";
  index.data_bytes = 256;
  pp::IndexEntry weight;
  weight.name = "blocks.1.attn.c_attn.weight";
  weight.offset = 0;
  weight.bytes = 96;
  weight.dtype = "F32";
  weight.shape = {4, 6};
  weight.checksum = 0x0123456789abcdefull;
  pp::IndexEntry moment = weight;
  moment.kind = pp::EntryKind::Optimizer;
  moment.key = "exp_avg";
  moment.offset = 128;
  moment.dtype = "BF16";
  moment.bytes = 48;
  pp::IndexEntry rng;
  rng.kind = pp::EntryKind::Generator;
  rng.name = "dropout.blocks.1.attn.drop";
  rng.offset = 192;
  rng.bytes = 5;
  rng.dtype = pp::kByteDType;
  rng.shape = {5};
  index.entries = {weight, moment, rng};
  return index;
}

}  // namespace

TEST_CASE("a checkpoint index round-trips through its text", "[checkpoint][index]") {
  const pp::CheckpointIndex index = sample();
  const pp::CheckpointIndex back = pp::parse_index(pp::format_index(index), "index");
  CHECK(back.step == 120);
  CHECK(back.samples_consumed == 3840);
  CHECK(back.num_stages == 4);
  CHECK(back.stages == std::vector<int>{1, 2});
  CHECK(back.layout == "pp 2 x dp 2");
  CHECK(back.optimizer == "AdamW");
  CHECK(back.data_file == "data_s1.bin");
  CHECK(back.data_bytes == 256);
  REQUIRE(back.entries.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    CHECK(back.entries[i].kind == index.entries[i].kind);
    CHECK(back.entries[i].name == index.entries[i].name);
    CHECK(back.entries[i].key == index.entries[i].key);
    CHECK(back.entries[i].offset == index.entries[i].offset);
    CHECK(back.entries[i].bytes == index.entries[i].bytes);
    CHECK(back.entries[i].dtype == index.entries[i].dtype);
    CHECK(back.entries[i].shape == index.entries[i].shape);
    CHECK(back.entries[i].checksum == index.entries[i].checksum);
  }
}

TEST_CASE("misuse: a truncated, damaged or foreign index is a clear error", "[checkpoint][index]") {
  const std::string text = pp::format_index(sample());
  for (size_t cut : {size_t{30}, text.size() / 2, text.size() - 1})
    CHECK_THROWS_WITH(pp::parse_index(text.substr(0, cut), "idx.txt"),
                      Catch::Contains("idx.txt") && Catch::Contains("truncated"));
  std::string flipped = text;
  flipped[text.find("120")] = '9';
  CHECK_THROWS_WITH(pp::parse_index(flipped, "idx.txt"), Catch::Contains("checksum differs"));
  CHECK_THROWS_WITH(pp::parse_index("TPLAYSD", "idx.txt"),
                    Catch::Contains("not a layout-free checkpoint index"));
  pp::CheckpointIndex past = sample();
  past.entries[0].offset = 200;  // 200 + 96 > 256
  CHECK_THROWS_WITH(pp::parse_index(pp::format_index(past), "idx.txt"),
                    Catch::Contains("blocks.1.attn.c_attn.weight") && Catch::Contains("past"));
  pp::CheckpointIndex wrong = sample();
  wrong.entries[0].bytes = 95;
  CHECK_THROWS_WITH(pp::parse_index(pp::format_index(wrong), "idx.txt"),
                    Catch::Contains("blocks.1.attn.c_attn.weight") && Catch::Contains("needs 96"));
  // Found by the index fuzzer: a stage that is no number was a std::invalid_argument.
  std::string bad_stage = text;
  bad_stage.replace(bad_stage.find("stages 1 2"), 10, "stages 1 x");
  const size_t end = bad_stage.rfind("\nend ");
  char sum[20];
  std::snprintf(sum, sizeof(sum), "%016llx",
                static_cast<unsigned long long>(
                    tensorplay::pipelining::checkpoint_io::fnv1a64(bad_stage.substr(0, end + 1))));
  bad_stage = bad_stage.substr(0, bad_stage.rfind(' ') + 1) + sum + "\n";
  CHECK_THROWS_WITH(pp::parse_index(bad_stage, "idx.txt"),
                    Catch::Contains("stage 'x' is not a whole number"));
  pp::CheckpointIndex spaced = sample();
  spaced.entries[0].name = "a name";
  CHECK_THROWS_AS(pp::format_index(spaced), pp::CheckpointError);
}
