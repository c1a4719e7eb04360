// Tests for checkpoint_io.h: step folder names, the word checksum, atomic writes of several parts
// and generator states as text.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "tensorplay/pipelining/checkpoints/checkpoint.h"
#include "tensorplay/pipelining/checkpoints/checkpoint_io.h"

namespace pp = tensorplay::pipelining;
namespace io = tensorplay::pipelining::checkpoint_io;
namespace fs = std::filesystem;

TEST_CASE("step folders are named and parsed back", "[checkpoint][io]") {
  CHECK(io::step_folder("run", 120) == "run/step_00000120");
  int64_t step = 0;
  CHECK(io::parse_step_name("step_00000120", step));
  CHECK(step == 120);
  CHECK_FALSE(io::parse_step_name("step_", step));
  CHECK_FALSE(io::parse_step_name("step_12a", step));
  CHECK_FALSE(io::parse_step_name("stage_0", step));
}

TEST_CASE("the word checksum sees every byte and the length", "[checkpoint][io]") {
  std::string bytes(37, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7);
  const uint64_t sum = io::word_checksum(bytes.data(), bytes.size());
  CHECK(sum == io::word_checksum(bytes.data(), bytes.size()));
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string changed = bytes;
    changed[i] ^= 1;
    CHECK(io::word_checksum(changed.data(), changed.size()) != sum);
  }
  CHECK(io::word_checksum(bytes.data(), 36) != sum);
  CHECK(io::word_checksum(bytes.data(), 0) != io::word_checksum(bytes.data(), 1));
}

TEST_CASE("an atomic write joins its parts and leaves no temporary file", "[checkpoint][io]") {
  const fs::path dir = fs::temp_directory_path() / ("tp_io_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string a = "hello ", b = "world";
  io::write_atomically((dir / "f").string(), {{a.data(), a.size()}, {b.data(), b.size()}});
  CHECK(io::read_whole((dir / "f").string()) == "hello world");
  CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator()) == 1);
  CHECK_THROWS_AS(io::write_atomically((dir / "missing" / "f").string(), a), pp::CheckpointError);
  CHECK_THROWS_AS(io::read_whole((dir / "none").string()), pp::CheckpointError);
  fs::remove_all(dir);
}

TEST_CASE("a generator state goes to text and back and damaged text changes nothing",
          "[checkpoint][io]") {
  tensorplay::Generator g(5), other(9);
  g.uniform();
  const std::string state = io::generator_state(g);
  CHECK(io::restore_generator_state(other, state));
  CHECK(other.uniform() == g.uniform());
  tensorplay::Generator copy(0);
  CHECK(io::restore_generator_state(copy, io::generator_state(other)));
  CHECK_FALSE(io::restore_generator_state(other, "not a state"));
  CHECK(other.uniform() == copy.uniform());
}
