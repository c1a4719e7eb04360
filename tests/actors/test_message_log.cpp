// Tests for message_log.h: off by default; at debug level every stage actor logs what it
// receives, starts, finishes and sends, each rank's step ends with a `done` line, and each process
// start begins its part of a log with a run header.
#include <spdlog/sinks/sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

#include "log_capture.h"
#include "tensorplay/base/base_knobs.h"
#include "tensorplay/base/knobs.h"
#include "tensorplay/observe/message_log.h"
#include "tensorplay/observe/trace_log.h"
#include "tensorplay/pipelining/runtime/schedule.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;

namespace {
// `steps` GPipe training steps of two microbatches on two stages.
void train_two_stages(int steps) {
  std::vector<std::shared_ptr<pp::PipelineStage>> stages;
  for (int i = 0; i < 2; ++i)
    stages.push_back(std::make_shared<pp::PipelineStage>(
        tp::nn::Linear(4, 4).ptr(), i, 2, tp::cpu(), std::vector<tp::Tensor>{tp::zeros({2, 4})}));
  pp::ScheduleGPipe schedule(stages, 2, tp::nn::mse_loss);
  for (int i = 0; i < steps; ++i) schedule.step({tp::randn({4, 4})}, {.target = tp::randn({4, 4})});
}

// The log of one GPipe step on two stages, at debug level or at the logger's own level.
std::string run_one_step(bool debug) {
  return log_capture::capture_message_log([] { train_two_stages(1); }, debug);
}
}  // namespace

TEST_CASE("the message log is off by default", "[message_log]") {
  if (tp::knob_is_set(tp::kSpdlogLevelKnob)) {
    WARN("SPDLOG_LEVEL is set: the default cannot be checked");
    return;
  }
  CHECK(run_one_step(/*debug=*/false).empty());
}

TEST_CASE("an evaluation's steps are logged as such", "[message_log]") {
  const std::string log = log_capture::capture_message_log(
      [] {
        std::vector<std::shared_ptr<pp::PipelineStage>> stages;
        for (int i = 0; i < 2; ++i)
          stages.push_back(
              std::make_shared<pp::PipelineStage>(tp::nn::Linear(4, 4).ptr(), i, 2, tp::cpu(),
                                                  std::vector<tp::Tensor>{tp::zeros({2, 4})}));
        pp::ScheduleGPipe schedule(stages, 2, tp::nn::mse_loss);
        schedule.step({tp::randn({4, 4})}, {.target = tp::randn({4, 4})});
        schedule.eval({tp::randn({4, 4})});
      },
      /*debug=*/true);
  CHECK_THAT(log, Catch::Contains("rank=0 step=1 event=recv what=step") &&
                      Catch::Contains("rank=1 step=2 event=recv what=eval"));
  std::istringstream in(log);
  CHECK(pp::evaluation_steps(pp::parse_message_log(in)) == std::vector<uint64_t>{2});
}

TEST_CASE("at debug level the log has every receive, start, finish and send", "[message_log]") {
  std::string log = run_one_step(/*debug=*/true);
  CHECK_THAT(log, Catch::Contains("rank=0 step=") && Catch::Contains("event=recv what=step"));
  CHECK_THAT(log,
             Catch::Contains("event=start what=0F0") && Catch::Contains("event=finish what=0F0"));
  CHECK_THAT(log, Catch::Contains("event=send what=input 1:0"));
  CHECK_THAT(log, Catch::Contains("rank=1") && Catch::Contains("event=recv what=input 1:1"));
  CHECK_THAT(
      log, Catch::Contains("event=start what=1B1") && Catch::Contains("event=send what=grad 0:1"));
  CHECK_THAT(log, Catch::Contains("t_us="));
}

TEST_CASE("log_event_at writes the time it is given", "[message_log]") {
  std::string log = log_capture::capture_message_log(
      [] { pp::log_event_at(3, 7, "send", "input 1:0", 123456789); }, true);
  CHECK_THAT(log, Catch::Contains("rank=3 step=7 event=send what=input 1:0 t_us=123456789"));
}

TEST_CASE("send and recv lines are written after the hand-over they time, with its time",
          "[message_log]") {
  // Rank 0's send of input 1:0 is written once the message is on its way, rank 1's recv once
  // the forward it allowed has run: each line keeps the time of its event, before the next
  // stage's start, whatever order the lines have in the log.
  std::string log = log_capture::capture_message_log([] { train_two_stages(10); }, true);
  std::map<uint64_t, std::map<std::string, std::pair<int64_t, size_t>>> at;  // step -> key -> t, n
  std::istringstream in(log);
  size_t n = 0;
  for (const pp::LogEvent& e : pp::parse_message_log(in))
    at[e.step][e.event + " " + e.what] = {e.t_us, n++};
  int recv_written_after_start = 0;
  for (const auto& [step, events] : at) {
    if (step == 0) continue;
    INFO("step " << step);
    REQUIRE(events.count("send input 1:0"));
    REQUIRE(events.count("recv input 1:0"));
    REQUIRE(events.count("start 1F0"));
    const auto sent = events.at("send input 1:0"), received = events.at("recv input 1:0"),
               started = events.at("start 1F0");
    CHECK(sent.first <= received.first);
    CHECK(received.first <= started.first);
    if (received.second > started.second) ++recv_written_after_start;
  }
  // A notification that comes before its step began here is written at once; most come after.
  CHECK(recv_written_after_start > 0);
}

namespace {
// The `start` events of one rank in a message log, in order ("1F0", "1B0", ...).
std::vector<std::vector<std::string>> started_by_rank(const std::string& log, int ranks) {
  std::vector<std::vector<std::string>> out(ranks);
  std::istringstream in(log);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find("event=start ") == std::string::npos) continue;
    auto field = [&](const std::string& key) {
      size_t at = line.find(key + "=");
      size_t end = line.find(' ', at);
      return line.substr(at + key.size() + 1, end - at - key.size() - 1);
    };
    out.at(std::stoi(field("rank"))).push_back(field("what"));
  }
  return out;
}
}  // namespace

TEST_CASE("what ran is what was scheduled: every schedule's log lists its order per rank",
          "[message_log][conformance]") {
  namespace sc = tensorplay::schedules;
  for (sc::ScheduleKind kind :
       {sc::ScheduleKind::GPipe, sc::ScheduleKind::OneFOneB, sc::ScheduleKind::Interleaved1F1B,
        sc::ScheduleKind::LoopedBFS, sc::ScheduleKind::InterleavedZeroBubble,
        sc::ScheduleKind::ZBVZeroBubble, sc::ScheduleKind::DualPipeV, sc::ScheduleKind::VHalf,
        sc::ScheduleKind::VMin}) {
    const int ranks = 4;
    const int stages_count = sc::is_single_stage_per_rank(kind) ? ranks : 2 * ranks;
    const int n_microbatches = 8;
    std::unique_ptr<pp::PipelineSchedule> schedule;
    std::string log = log_capture::capture_message_log(
        [&] {
          std::vector<std::shared_ptr<pp::PipelineStage>> stages;
          for (int i = 0; i < stages_count; ++i)
            stages.push_back(std::make_shared<pp::PipelineStage>(
                tp::nn::Linear(4, 4).ptr(), i, stages_count, tp::cpu(),
                std::vector<tp::Tensor>{tp::zeros({1, 4})}));
          schedule =
              std::make_unique<pp::PipelineSchedule>(stages, n_microbatches, tp::nn::mse_loss, kind);
          schedule->step({tp::randn({8, 4})}, {.target = tp::randn({8, 4})});
        },
        true);
    INFO(sc::schedule_name(kind));
    auto ran = started_by_rank(log, ranks);
    for (int r = 0; r < ranks; ++r) {
      std::vector<std::string> want;
      for (const sc::Action& a : schedule->order()[r]) want.push_back(sc::to_string(a));
      INFO("rank " << r);
      CHECK(ran[r] == want);
    }
  }
}

TEST_CASE("each rank's step ends with a done line, after its last action", "[message_log]") {
  std::string log = run_one_step(/*debug=*/true);
  for (int rank = 0; rank < 2; ++rank) {
    size_t last_done = std::string::npos, last_finish = std::string::npos;
    std::istringstream in(log);
    std::string line;
    for (size_t n = 0; std::getline(in, line); ++n) {
      if (line.find("rank=" + std::to_string(rank) + " ") == std::string::npos) continue;
      if (line.find("event=done what=step") != std::string::npos) last_done = n;
      if (line.find("event=finish") != std::string::npos) last_finish = n;
    }
    INFO("rank " << rank << ", log:\n" << log);
    REQUIRE(last_done != std::string::npos);
    CHECK(last_done > last_finish);
  }
}

TEST_CASE("init names the job in a run header that keeps the process's run id", "[message_log]") {
  const std::string job_before = pp::log_job_id();
  std::string log = log_capture::capture_message_log(
      [] {
        pp::log_event(0, 1, "recv", "step");
        pp::set_log_job("job-42", 1, 2, 3);
        pp::log_event(1, 1, "recv", "step");
      },
      /*debug=*/true);
  std::istringstream in(log);
  std::vector<pp::LogRun> runs = pp::parse_log_runs(in);
  INFO(log);
  REQUIRE(!runs.empty());
  const pp::LogRun& run = runs.back();
  REQUIRE(run.has_header);
  CHECK(run.header.job_id == "job-42");
  CHECK(run.header.run_id == pp::log_run_id());
  CHECK(run.header.rank == 1);
  CHECK(run.header.world_size == 2);
  CHECK(run.header.attempt == 3);
  CHECK(run.events.back().rank == 1);
  for (size_t k = 0; k + 1 < runs.size(); ++k) CHECK_FALSE(runs[k].has_header);  // one run
  CHECK(pp::log_job_id() == "job-42");
  pp::set_log_job(job_before, 0, 1, 0);
  // Blanks in a launcher's id would split the header's words.
  pp::set_log_job("my job", 0, 1, 0);
  CHECK(pp::log_job_id() == "my_job");
  pp::set_log_job(job_before, 0, 1, 0);
}

TEST_CASE("log_to_file appends a run after what the file holds", "[message_log]") {
  namespace fs = std::filesystem;
  const fs::path path =
      fs::temp_directory_path() / ("tp_message_log_" + std::to_string(::getpid()) + ".log");
  // An earlier process's run, its writer killed mid-line.
  std::ofstream(path, std::ios::binary)
      << "rank=0 step=0 event=run what=job:old run:old-run attempt:0 world:1 t_us=0\n"
         "rank=0 step=1 event=start what=0F0 t_us=1\nrank=0 step=1 event=fin";
  auto logger = pp::message_log();
  auto sinks = logger->sinks();
  std::vector<spdlog::level::level_enum> sink_levels;
  for (const auto& sink : sinks) sink_levels.push_back(sink->level());
  auto level = logger->level();
  logger->set_level(spdlog::level::debug);
  pp::log_to_file(path.string());
  pp::log_event(0, 1, "recv", "step");
  logger->flush();
  logger->sinks() = sinks;
  for (size_t i = 0; i < sinks.size(); ++i) sinks[i]->set_level(sink_levels[i]);
  logger->set_level(level);

  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  INFO(text);
  CHECK_THAT(text, Catch::StartsWith("rank=0 step=0 event=run what=job:old run:old-run"));
  CHECK_THAT(text, Catch::Contains("event=fin\n["));  // the cut line ended; the header on its own
  std::istringstream lines(text);
  std::vector<pp::LogRun> runs = pp::parse_log_runs(lines);
  REQUIRE(runs.size() == 2);
  CHECK(runs[0].header.run_id == "old-run");
  CHECK(runs[1].header.run_id == pp::log_run_id());
  CHECK(runs[1].header.job_id == pp::log_job_id());
  REQUIRE(runs[1].events.size() == 1);
  CHECK(runs[1].events[0].what == "step");
  fs::remove(path);
}
