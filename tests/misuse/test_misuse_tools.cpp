// Misuse of the command-line tools: tp-sim given costs that are not finite numbers >= 0 or flags
// it does not have, tp-trace given logs cut mid-line, appended to themselves, or with negative
// numbers. Each runs the built tool under a time limit.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "misuse_support.h"

#if defined(TP_SIM_PATH) && defined(TP_TRACE_PATH)

namespace {

using misuse::run_tool;
using misuse::ToolResult;

const std::string kSim = TP_SIM_PATH;
const std::string kTrace = TP_TRACE_PATH;
const std::string kRun = " --schedule 1F1B --ranks 2 --microbatches 4";

// Checks a tool's failure: a non-zero status that is not the time limit's, one "<tool>: " error
// and the words that name the fix.
void expect_tool_error(const ToolResult& r, const std::vector<std::string>& words) {
  INFO("tool output: " << r.output);
  CHECK(r.status != 0);
  CHECK(r.status != 124);  // the time limit: a hang
  for (const std::string& word : words) {
    INFO("expected the words '" << word << "'");
    CHECK(r.output.find(word) != std::string::npos);
  }
}

// A message log in a fresh file: rank 0 runs 0F0 [0, 10) and 0B0 [10, 20) in step 1, rank 1 runs
// 1F0 [10, 15) and 1B0 [15, 18).
std::string log_lines(const std::string& step = "1") {
  std::string head = "[12:00:00.000000] [tensorplay] rank=";
  std::string out;
  auto line = [&](int rank, const std::string& event, const std::string& what, int t) {
    out += head + std::to_string(rank) + " step=" + step + " event=" + event + " what=" + what +
           " t_us=" + std::to_string(1000 + t) + "\n";
  };
  line(0, "start", "0F0", 0);
  line(0, "finish", "0F0", 10);
  line(1, "start", "1F0", 10);
  line(1, "finish", "1F0", 15);
  line(1, "start", "1B0", 15);
  line(1, "finish", "1B0", 18);
  line(0, "start", "0B0", 18);
  line(0, "finish", "0B0", 28);
  return out;
}

std::string write_log(const std::string& name, const std::string& text) {
  std::string path = (std::filesystem::temp_directory_path() /
                      ("tp_misuse_" + std::to_string(::getpid()) + "_" + name))
                         .string();
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

}  // namespace

TEST_CASE("misuse: tp-sim --cost with NaN", "[misuse][tools]") {
  // This spun forever.
  expect_tool_error(run_tool(kSim + kRun + " --cost F=1,I=nan,W=1"),
                    {"tp-sim: --cost I", "finite number >= 0"});
}

TEST_CASE("misuse: tp-sim --cost with Inf", "[misuse][tools]") {
  // This printed "makespan": null with exit status 0.
  ToolResult r = run_tool(kSim + kRun + " --cost F=inf --json");
  expect_tool_error(r, {"--cost F", "finite number >= 0"});
  CHECK(r.output.find("null") == std::string::npos);
}

TEST_CASE("misuse: tp-sim --cost negative, or not a number", "[misuse][tools]") {
  expect_tool_error(run_tool(kSim + kRun + " --cost W=-2"), {"--cost W", ">= 0"});
  expect_tool_error(run_tool(kSim + kRun + " --cost F=fast"),
                    {"--cost F", "'fast' is not a number"});
  expect_tool_error(run_tool(kSim + kRun + " --cost I=2,B=1"), {"--cost", "B = I + W"});
}

TEST_CASE("misuse: tp-sim latency, bandwidth, bytes and overlap must be finite and >= 0",
          "[misuse][tools]") {
  expect_tool_error(run_tool(kSim + kRun + " --latency nan"), {"--latency", "finite number >= 0"});
  expect_tool_error(run_tool(kSim + kRun + " --bandwidth -1"), {"--bandwidth", ">= 0"});
  expect_tool_error(run_tool(kSim + kRun + " --bytes inf"), {"--bytes", "finite"});
  expect_tool_error(run_tool(kSim + kRun + " --overlap -0.5"), {"--overlap", ">= 0"});
}

TEST_CASE("misuse: tp-sim with an unknown flag names it first", "[misuse][tools]") {
  // This said "--schedule is required".
  ToolResult r = run_tool(kSim + " --frobnicate");
  expect_tool_error(r, {"unknown option '--frobnicate'", "--help"});
  CHECK(r.output.find("required") == std::string::npos);
  expect_tool_error(run_tool(kSim + kRun + " --microbatch=3"), {"'--microbatch'"});
}

TEST_CASE("misuse: tp-sim negative counts", "[misuse][tools]") {
  ToolResult r = run_tool(kSim + " --schedule 1F1B --ranks 2 --microbatches -3");
  expect_tool_error(r, {"--microbatches"});
  CHECK(r.output.find("18446744073709551613") == std::string::npos);
  expect_tool_error(run_tool(kSim + kRun + " --stages-per-rank -1"), {"--stages-per-rank"});
  expect_tool_error(run_tool(kSim + " --schedule dynamic --ranks 2 --microbatches 4 --cap -3"),
                    {"--cap"});
}

TEST_CASE("misuse: tp-trace on a log cut mid-line", "[misuse][tools]") {
  // The cut time read as a smaller number: negative busy and idle times, exit status 0.
  std::string text = log_lines();
  std::string path = write_log("cut.log", text.substr(0, text.size() - 4));
  ToolResult r = run_tool(kTrace + " " + path);
  CHECK(r.output.find("'" + path + "' line 8 is cut short") != std::string::npos);
  expect_tool_error(r, {"0B0", "never finished"});
  std::filesystem::remove(path);
}

TEST_CASE("misuse: tp-trace on a log appended to itself", "[misuse][tools]") {
  std::string path = write_log("twice.log", log_lines() + log_lines());
  ToolResult r = run_tool(kTrace + " " + path + " --json");
  expect_tool_error(r, {"'" + path + "'", "overlapping actions", "pass one run's log once"});
  CHECK(r.output.find("\"idle_us\"") == std::string::npos);
  std::filesystem::remove(path);
}

TEST_CASE("misuse: tp-trace given the same log twice", "[misuse][tools]") {
  std::string path = write_log("same.log", log_lines());
  expect_tool_error(run_tool(kTrace + " " + path + " " + path), {"passed twice", path});
  std::filesystem::remove(path);
}

TEST_CASE("misuse: tp-trace on a log whose step is -3", "[misuse][tools]") {
  // The step became 18446744073709551613.
  std::string path = write_log("negative.log", log_lines("-3"));
  ToolResult r = run_tool(kTrace + " " + path);
  expect_tool_error(r, {"'" + path + "' line 1", "step=-3 is negative"});
  CHECK(r.output.find("18446744073709551613") == std::string::npos);
  std::filesystem::remove(path);
}

TEST_CASE("misuse: tp-trace --step -3 and unknown flags", "[misuse][tools]") {
  std::string path = write_log("good.log", log_lines());
  ToolResult good = run_tool(kTrace + " " + path);
  INFO(good.output);
  CHECK(good.status == 0);
  expect_tool_error(run_tool(kTrace + " " + path + " --step -3"), {"--step -3", ">= 0"});
  expect_tool_error(run_tool(kTrace + " " + path + " --steps 1"), {"unknown option '--steps'"});
  std::filesystem::remove(path);
}

#endif
