// Misuse of the examples: an error (a bad launcher variable, a bad argument) ends seed_mlp and
// train_gpt with their message and status 1, never an abort on an uncaught exception.
#include <catch2/catch.hpp>
#include <string>

#include "misuse_support.h"

#if defined(SEED_MLP_PATH) && defined(TRAIN_GPT_PATH)

namespace {

using misuse::run_tool;
using misuse::ToolResult;

// A failure with status 1 (not an abort's 134, not the time limit's 124) and the words.
void expect_exit_with_message(const ToolResult& r, const std::vector<std::string>& words) {
  INFO("output: " << r.output);
  CHECK(r.status == 1);
  CHECK(r.output.find("terminate called") == std::string::npos);
  for (const std::string& word : words) {
    INFO("expected the words '" << word << "'");
    CHECK(r.output.find(word) != std::string::npos);
  }
}

// Launcher variables that do not parse: init_process_group throws before any rank is met.
const std::string kBadEnv = "env RANK=0 WORLD_SIZE=two ";

}  // namespace

TEST_CASE("misuse: seed_mlp exits with its message on an error", "[misuse][examples]") {
  expect_exit_with_message(run_tool(kBadEnv + SEED_MLP_PATH " 1"), {"seed_mlp: ", "WORLD_SIZE"});
  expect_exit_with_message(run_tool(std::string(SEED_MLP_PATH) + " ten"),
                           {"seed_mlp: ", "'ten' is not a step count", "usage"});
  // Three processes for two stages: every rank says so before any waits for the others (rank 2
  // failed with "stage_index 2 is out of range" while the others waited for it).
  expect_exit_with_message(
      run_tool("env RANK=2 WORLD_SIZE=3 LOCAL_RANK=2 LOCAL_WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 "
               "MASTER_PORT=1 " SEED_MLP_PATH " 1"),
      {"seed_mlp: ", "2 stages, one a process", "start it on 2 processes", "not 3"});
}

TEST_CASE("misuse: train_gpt exits with its message on an error", "[misuse][examples]") {
  expect_exit_with_message(run_tool(kBadEnv + TRAIN_GPT_PATH " --steps 1"),
                           {"train_gpt: ", "WORLD_SIZE"});
}

#endif
