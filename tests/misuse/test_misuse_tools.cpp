// Misuse of the command-line tools: tp-sim given costs that are not finite numbers >= 0 or flags
// it does not have, tp-trace given logs cut mid-line, appended to themselves, with negative
// numbers, of two jobs, holding two runs, or with a rank's log cut, empty or missing. Each runs
// the built tool under a time limit.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

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

// A run header as a process writes it at its start.
std::string run_header(int rank, const std::string& job, const std::string& run, int world) {
  return "[12:00:00.000000] [tensorplay] rank=" + std::to_string(rank) +
         " step=0 event=run what=job:" + job + " run:" + run +
         " attempt:0 world:" + std::to_string(world) + " t_us=0\n";
}

// Rank `rank`'s part of log_lines' step 1, `shift` us later, with the `done` line that ends it.
std::string rank_step(int rank, int shift = 0) {
  std::string out;
  auto line = [&](const std::string& event, const std::string& what, int t) {
    out += "[12:00:00.000000] [tensorplay] rank=" + std::to_string(rank) +
           " step=1 event=" + event + " what=" + what +
           " t_us=" + std::to_string(1000 + shift + t) + "\n";
  };
  if (rank == 0) {
    line("start", "0F0", 0);
    line("finish", "0F0", 10);
    line("start", "0B0", 18);
    line("finish", "0B0", 28);
  } else {
    line("start", "1F0", 10);
    line("finish", "1F0", 15);
    line("start", "1B0", 15);
    line("finish", "1B0", 18);
  }
  line("done", "step", 30);
  return out;
}

// `text` (lines of step 1) moved to step `step`.
std::string as_step(std::string text, int step) {
  const std::string to = "step=" + std::to_string(step) + " ";
  for (size_t at = 0; (at = text.find("step=1 ", at)) != std::string::npos; at += to.size())
    text.replace(at, 7, to);
  return text;
}

// A fresh directory of per-rank logs, messages_rank_R.log holding `texts[R]`.
std::string write_log_dir(const std::string& name, const std::vector<std::string>& texts) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("tp_misuse_" + std::to_string(::getpid()) + "_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  for (size_t r = 0; r < texts.size(); ++r)
    std::ofstream(dir / ("messages_rank_" + std::to_string(r) + ".log"), std::ios::binary)
        << texts[r];
  return dir.string();
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
  expect_tool_error(run_tool(kSim + kRun + " --cost I=1,R=2"),
                    {"recompute_ahead is longer than its input_backward"});
  expect_tool_error(run_tool(kSim + kRun + " --cost Q=1"), {"--cost key 'Q'", "F, I, W, B, R, C"});
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
  // A log written before run headers still reads, saying what cannot be checked.
  CHECK(good.output.find("has no run header") != std::string::npos);
  CHECK(good.output.find("cannot be checked") != std::string::npos);
  expect_tool_error(run_tool(kTrace + " " + path + " --step -3"), {"--step -3", ">= 0"});
  expect_tool_error(run_tool(kTrace + " " + path + " --steps 1"), {"unknown option '--steps'"});
  std::filesystem::remove(path);
}

TEST_CASE("misuse: tp-trace on rank logs of two jobs", "[misuse][tools]") {
  // Rank 0's log of one job beside rank 1's of another gave a makespan of 948,505 us and a bubble
  // of 99.9%.
  std::string dir =
      write_log_dir("two_jobs", {run_header(0, "job-a", "u0", 2) + rank_step(0),
                                 run_header(1, "job-b", "u1", 2) + rank_step(1, 948'000)});
  ToolResult r = run_tool(kTrace + " " + dir);
  expect_tool_error(r,
                    {"message logs of two jobs", "'" + dir + "/messages_rank_0.log' is job job-a",
                     "'" + dir + "/messages_rank_1.log' is job job-b", "pass the logs of one job"});
  CHECK(r.output.find("makespan") == std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("misuse: tp-trace on one log holding two appended runs", "[misuse][tools]") {
  // Two runs of an embedded program appended to one file read as one step of twice the actions
  // ("32 actions", a bubble of 99.89%).
  std::string first = run_header(0, "job-1", "run-1", 1) + rank_step(0) + rank_step(1);
  std::string second =
      run_header(0, "job-2", "run-2", 1) + rank_step(0, 500'000) + rank_step(1, 500'000);
  std::string path = write_log("two_runs.log", first + second);
  ToolResult newest = run_tool(kTrace + " " + path);
  INFO(newest.output);
  CHECK(newest.status == 0);
  CHECK(newest.output.find("2 ranks, 4 actions") != std::string::npos);
  CHECK(newest.output.find("makespan 28 us") != std::string::npos);
  CHECK(newest.output.find("'" + path + "' holds 2 runs") != std::string::npos);
  CHECK(newest.output.find("run 1 (job job-1, attempt 0, step 1)") != std::string::npos);
  CHECK(newest.output.find("reading run 2, the newest") != std::string::npos);
  CHECK(newest.output.find("--run K") != std::string::npos);
  ToolResult first_run = run_tool(kTrace + " " + path + " --run 1 --json");
  INFO(first_run.output);
  CHECK(first_run.status == 0);
  CHECK(first_run.output.find("\"actions\":4,\"makespan_us\":28.0") != std::string::npos);
  expect_tool_error(run_tool(kTrace + " " + path + " --run 3"),
                    {"there is no run 3 in '" + path + "': it holds 2", "pick one of 1 to 2"});
  expect_tool_error(run_tool(kTrace + " " + path + " --run 0"), {"--run 0", "count from 1"});
  std::filesystem::remove(path);
}

// Rank `rank`'s lines of an evaluation logged as step `step`: forward only, its recv line marked.
std::string rank_eval(int rank, int step, int shift) {
  std::string out;
  auto line = [&](const std::string& event, const std::string& what, int t) {
    out += "[12:00:00.000000] [tensorplay] rank=" + std::to_string(rank) +
           " step=" + std::to_string(step) + " event=" + event + " what=" + what +
           " t_us=" + std::to_string(1000 + shift + t) + "\n";
  };
  const std::string forward = std::to_string(rank) + "F0";
  line("recv", "eval", 0);
  line("start", forward, rank == 0 ? 0 : 10);
  line("finish", forward, rank == 0 ? 10 : 15);
  line("done", "step", 20);
  return out;
}

TEST_CASE("misuse: tp-trace skips evaluations unless asked for them", "[misuse][tools]") {
  // A validation after training step 1 is the log's step 2: tp-trace read it by default (forward
  // only), and --step counted it, so the trainer's step 2 was --step 3.
  std::vector<std::string> texts;
  for (int rank : {0, 1})
    texts.push_back(run_header(rank, "job", "u" + std::to_string(rank), 2) + rank_step(rank) +
                    rank_eval(rank, 2, 500) + as_step(rank_step(rank, 1000), 3) +
                    rank_eval(rank, 4, 1500));
  std::string dir = write_log_dir("evaluations", texts);
  for (const std::string flags : {"", " --step 2"}) {
    ToolResult r = run_tool(kTrace + " " + dir + flags + " --json");
    INFO(r.output);
    CHECK(r.status == 0);
    CHECK(r.output.find("\"step\":2,\"log_step\":3,\"steps_logged\":2,\"evaluations_logged\":2") !=
          std::string::npos);
    CHECK(r.output.find("\"actions\":4") != std::string::npos);
  }
  ToolResult evaluation = run_tool(kTrace + " " + dir + " --eval 2");
  INFO(evaluation.output);
  CHECK(evaluation.status == 0);
  CHECK(evaluation.output.find("evaluation 2 (log step 4) (2 training steps and 2 evaluations "
                               "logged; forward only): 2 ranks, 2 actions") != std::string::npos);
  expect_tool_error(run_tool(kTrace + " " + dir + " --step 3"),
                    {"step 3 is not in the log", "training steps 1 to 2", "--eval K"});
  expect_tool_error(run_tool(kTrace + " " + dir + " --eval 3"),
                    {"--eval 3 is not in the log", "evaluations 1 to 2"});
  expect_tool_error(run_tool(kTrace + " " + dir + " --eval 1 --step 1"), {"pass one of them"});
  std::filesystem::remove_all(dir);
}

TEST_CASE("misuse: tp-trace with a rank's log cut in half, empty or missing", "[misuse][tools]") {
  // Each reported the step for "1 ranks", with a bubble from rank 0 alone.
  const std::string rank0 = run_header(0, "job", "u0", 2) + rank_step(0);
  const std::string rank1 = run_header(1, "job", "u1", 2) + rank_step(1);
  SECTION("cut in half") {
    std::string dir = write_log_dir("cut_rank", {rank0, rank1.substr(0, rank1.size() / 2)});
    ToolResult r = run_tool(kTrace + " " + dir);
    expect_tool_error(r, {"step 1 cannot be measured",
                          "rank 1 logged only part of step 1 in '" + dir + "/messages_rank_1.log'",
                          "no training step is whole in every rank's log"});
    CHECK(r.output.find("makespan") == std::string::npos);
    std::filesystem::remove_all(dir);
  }
  SECTION("empty") {
    std::string dir = write_log_dir("empty_rank", {rank0, ""});
    ToolResult r = run_tool(kTrace + " " + dir + " --json");
    expect_tool_error(r, {"step 1 cannot be measured",
                          "rank 1 has no log (the job has 2 processes, says the header of '" + dir +
                              "/messages_rank_0.log')",
                          "'" + dir + "/messages_rank_1.log' holds no message-log line (empty)"});
    CHECK(r.output.find("makespan") == std::string::npos);
    std::filesystem::remove_all(dir);
  }
  SECTION("missing") {
    std::string dir = write_log_dir("missing_rank", {rank0});
    ToolResult r = run_tool(kTrace + " " + dir);
    expect_tool_error(r, {"step 1 cannot be measured", "rank 1 has no log"});
    CHECK(r.output.find("makespan") == std::string::npos);
    std::filesystem::remove_all(dir);
  }
  SECTION("a later step cut: the last whole step reads by default, with a note") {
    const std::string step2 = as_step(rank_step(1, 1000), 2);
    std::string dir = write_log_dir("later_cut", {rank0 + as_step(rank_step(0, 1000), 2),
                                                  rank1 + step2.substr(0, step2.size() / 2)});
    expect_tool_error(
        run_tool(kTrace + " " + dir + " --step 2"),
        {"step 2 cannot be measured", "rank 1 logged only part of step 2",
         "the last training step whole in every rank's log before it is 1 (--step 1)"});
    for (const std::string flags : {"", " --step 1"}) {
      ToolResult r = run_tool(kTrace + " " + dir + flags);
      INFO(r.output);
      CHECK(r.status == 0);
      CHECK(r.output.find("step 1 (2 training steps logged)") != std::string::npos);
      CHECK(r.output.find("the logs' last step (log step 2) is not whole") != std::string::npos);
      CHECK(r.output.find("2 ranks, 4 actions") != std::string::npos);
    }
    std::filesystem::remove_all(dir);
  }
}

#endif
