// Tests for trace_log.h: parsing message-log lines, putting per-process logs on one clock,
// rebuilding a step's timeline and its figures, and reading back the log of a real 1F1B step.
#include <catch2/catch.hpp>
#include <sstream>

#include "log_capture.h"
#include "tensorplay/observe/trace_log.h"
#include "tensorplay/pipelining/runtime/schedule.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;

namespace {
std::vector<pp::LogEvent> parse(const std::string& text) {
  std::istringstream in(text);
  return pp::parse_message_log(in);
}
}  // namespace

TEST_CASE("message-log lines parse, other lines are skipped", "[trace_log]") {
  auto events = parse(
      "step 1 loss 0.5\n"
      "[12:00:00.000001] [tensorplay] rank=1 step=3 event=recv what=input 1:0 t_us=100\n"
      "[12:00:00.000002] [tensorplay] rank=1 step=3 event=start what=1F0 t_us=105\n"
      "rank=0 step=3 event=send what=grad 0:1 t_us=107\n");
  REQUIRE(events.size() == 3);
  CHECK(events[0].rank == 1);
  CHECK(events[0].step == 3);
  CHECK(events[0].event == "recv");
  CHECK(events[0].what == "input 1:0");
  CHECK(events[0].t_us == 100);
  CHECK(events[1].what == "1F0");
  CHECK(events[2].rank == 0);
  CHECK(pp::logged_steps(events) == std::vector<uint64_t>{3});
  CHECK_THROWS_WITH(parse("a\nrank=x step=1 event=start what=0F0 t_us=1\n"),
                    Catch::Contains("line 2") && Catch::Contains("rank='x'"));
  CHECK_THROWS_WITH(parse("rank=-1 step=0 event=start what=0F0 t_us=1\n"),
                    Catch::Contains("line 1: rank=-1 is outside"));
  CHECK_THROWS_WITH(parse("rank=4294967296 step=0 event=start what=0F0 t_us=1\n"),
                    Catch::Contains("is outside"));
}

TEST_CASE("evaluations are counted apart: training steps numbered as the trainer counts them",
          "[trace_log]") {
  // Training steps 1 and 2, an evaluation (log step 3), training step 3 (log step 4), another
  // evaluation (5).
  std::string text;
  for (int step = 1; step <= 5; ++step)
    text += "rank=0 step=" + std::to_string(step) +
            " event=recv what=" + (step == 3 || step == 5 ? "eval" : "step") +
            " t_us=" + std::to_string(step) + "\n";
  const auto events = parse(text);
  CHECK(pp::evaluation_steps(events) == std::vector<uint64_t>{3, 5});
  const std::vector<pp::TrainingStep> training = pp::training_steps(events);
  REQUIRE(training.size() == 3);
  CHECK((training[0].number == 1 && training[0].log_step == 1));
  CHECK((training[1].number == 2 && training[1].log_step == 2));
  CHECK((training[2].number == 3 && training[2].log_step == 4));
  // A log written before evaluations were marked: every step a training step.
  CHECK(pp::training_steps(parse("rank=0 step=2 event=recv what=step t_us=1\n")).at(0).number == 2);
}

TEST_CASE("a step's timeline has the simulator's figures", "[trace_log]") {
  // Rank 0: F0 [0,10), F1 [10,20), B0 [30,40), B1 [40,50). Rank 1: F0 [12,22), B0 [22,30).
  auto events = parse(
      "rank=0 step=7 event=start what=0F0 t_us=1000\nrank=0 step=7 event=finish what=0F0 "
      "t_us=1010\n"
      "rank=0 step=7 event=start what=0F1 t_us=1010\nrank=0 step=7 event=finish what=0F1 "
      "t_us=1020\n"
      "rank=1 step=7 event=start what=1F0 t_us=1012\nrank=1 step=7 event=finish what=1F0 "
      "t_us=1022\n"
      "rank=1 step=7 event=start what=1B0 t_us=1022\nrank=1 step=7 event=finish what=1B0 "
      "t_us=1030\n"
      "rank=0 step=7 event=start what=0B0 t_us=1030\nrank=0 step=7 event=finish what=0B0 "
      "t_us=1040\n"
      "rank=0 step=7 event=start what=0B1 t_us=1040\nrank=0 step=7 event=finish what=0B1 "
      "t_us=1050\n"
      "rank=0 step=8 event=start what=0F0 t_us=2000\n");
  tensorplay::schedules::SimulationResult r = pp::step_timeline(events, 7);
  CHECK(r.actions == 6);
  CHECK(r.makespan == 50);
  CHECK(r.busy == std::vector<double>{40, 18});
  CHECK(r.idle == std::vector<double>{10, 32});
  CHECK(r.bubble_fraction == Approx(42.0 / 100));
  CHECK(r.peak_activations == std::vector<int>{2, 1});
  CHECK(r.timeline.front().start == 0);
  CHECK(r.span == 50);
  CHECK_THROWS_WITH(pp::step_timeline(events, 8),
                    Catch::Contains("rank 0 started 0F0 and never finished"));
  CHECK_THROWS_WITH(pp::step_timeline(events, 9), Catch::Contains("no start/finish events"));
  auto twice = parse(
      "rank=0 step=1 event=start what=0F0 t_us=1\nrank=0 step=1 event=start what=0F0 t_us=2\n");
  CHECK_THROWS_WITH(pp::step_timeline(twice, 1), Catch::Contains("started 0F0 twice"));
}

namespace {
// One step of two ranks (rank 0: F0 F1 . B0 B1; rank 1: F0 B0), times from `t0` on.
std::string rank_lines(int rank, int64_t t0) {
  auto line = [&](const char* event, const char* what, int64_t t) {
    return "rank=" + std::to_string(rank) + " step=7 event=" + event + " what=" + what +
           " t_us=" + std::to_string(t0 + t) + "\n";
  };
  if (rank == 0)
    return line("start", "0F0", 0) + line("finish", "0F0", 10) + line("start", "0F1", 10) +
           line("finish", "0F1", 20) + line("start", "0B0", 30) + line("finish", "0B0", 40) +
           line("start", "0B1", 40) + line("finish", "0B1", 50);
  return line("start", "1F0", 12) + line("finish", "1F0", 22) + line("start", "1B0", 22) +
         line("finish", "1B0", 30);
}

void check_same_timeline(const tensorplay::schedules::SimulationResult& a,
                         const tensorplay::schedules::SimulationResult& b) {
  CHECK(a.actions == b.actions);
  CHECK(a.makespan == b.makespan);
  CHECK(a.busy == b.busy);
  CHECK(a.idle == b.idle);
  CHECK(a.peak_activations == b.peak_activations);
  REQUIRE(a.timeline.size() == b.timeline.size());
  for (size_t i = 0; i < a.timeline.size(); ++i) {
    CHECK(a.timeline[i].rank == b.timeline[i].rank);
    CHECK(a.timeline[i].start == b.timeline[i].start);
    CHECK(a.timeline[i].end == b.timeline[i].end);
  }
}
}  // namespace

TEST_CASE("a clock line shifts every event of its log onto rank 0's clock", "[trace_log]") {
  // Without a clock line the offset is 0: times read as written.
  auto plain = parse("rank=1 step=3 event=start what=1F0 t_us=100\n");
  REQUIRE(plain.size() == 1);
  CHECK(plain[0].t_us == 100);
  // With one, it applies before the line as well as after it.
  auto shifted = parse(
      "rank=1 step=3 event=start what=1F0 t_us=100\n"
      "rank=1 step=0 event=clock what=offset_us:-40 t_us=150\n"
      "rank=1 step=3 event=finish what=1F0 t_us=200\n");
  REQUIRE(shifted.size() == 3);
  CHECK(shifted[0].t_us == 60);
  CHECK(shifted[1].t_us == 110);
  CHECK(shifted[2].t_us == 160);
  // The clock line's step 0 is no logged step.
  CHECK(pp::logged_steps(shifted) == std::vector<uint64_t>{3});
  CHECK_THROWS_WITH(parse("x\nrank=1 step=0 event=clock what=offset_us:abc t_us=1\n"),
                    Catch::Contains("line 2") && Catch::Contains("offset_us='abc'"));
  CHECK_THROWS_WITH(parse("rank=1 step=0 event=clock what=5 t_us=1\n"),
                    Catch::Contains("is not offset_us:N"));
}

TEST_CASE("per-rank logs with different clock offsets merge into one timeline", "[trace_log]") {
  // The embedded run: both ranks in one log on one clock.
  auto embedded = parse(rank_lines(0, 1000) + rank_lines(1, 1000));
  auto expected = pp::step_timeline(embedded, 7);
  // Launched: rank 1's clock reads 5 s behind rank 0's, its clock line says so (mid-file, to
  // check it shifts the lines before it too); rank 0's log has no clock line.
  auto rank0 = parse(rank_lines(0, 1000));
  std::string lines1 = rank_lines(1, 1000 - 5'000'000);
  size_t middle = lines1.find("rank=1 step=7 event=start what=1B0");
  lines1.insert(middle, "rank=1 step=0 event=clock what=offset_us:5000000 t_us=0\n");
  auto rank1 = parse(lines1);
  // Whichever order the files come in, the timeline is the embedded one.
  check_same_timeline(pp::step_timeline(pp::merge_message_logs({{"r0", rank0}, {"r1", rank1}}), 7),
                      expected);
  check_same_timeline(pp::step_timeline(pp::merge_message_logs({{"r1", rank1}, {"r0", rank0}}), 7),
                      expected);
  // Without the offset the ranks would be 5 s apart.
  auto unshifted =
      pp::merge_message_logs({{"r0", rank0}, {"r1", parse(rank_lines(1, 1000 - 5'000'000))}});
  CHECK(pp::step_timeline(unshifted, 7).makespan > 4'000'000);
}

TEST_CASE("a rank in two logs is an error naming both", "[trace_log]") {
  auto rank0 = parse(rank_lines(0, 1000));
  auto rank1 = parse(rank_lines(1, 1000));
  CHECK_THROWS_WITH(
      pp::merge_message_logs({{"a/messages_rank_0.log", rank0},
                              {"b/messages_rank_1.log", rank1},
                              {"b/messages_rank_0.log", rank0}}),
      Catch::Contains("rank 0 is in both 'a/messages_rank_0.log' and 'b/messages_rank_0.log'"));
  CHECK_THROWS_WITH(pp::merge_message_logs({{"run.log", rank0}, {"run.log", rank0}}),
                    Catch::Contains("'run.log' is passed twice"));
  // Both ranks in one log (an embedded run) is fine.
  auto both = parse(rank_lines(0, 1000) + rank_lines(1, 1000));
  CHECK(pp::merge_message_logs({{"run.log", both}}).size() == both.size());
}

TEST_CASE("the log of a real 1F1B step reads back as its timeline", "[trace_log]") {
  std::string log = log_capture::capture_message_log(
      [] {
        std::vector<std::shared_ptr<pp::PipelineStage>> stages;
        for (int i = 0; i < 2; ++i)
          stages.push_back(
              std::make_shared<pp::PipelineStage>(tp::nn::Linear(8, 8).ptr(), i, 2, tp::cpu(),
                                                  std::vector<tp::Tensor>{tp::zeros({2, 8})}));
        pp::Schedule1F1B schedule(stages, 4, tp::nn::mse_loss);
        schedule.step({tp::randn({8, 8})}, {.target = tp::randn({8, 8})});
      },
      /*debug=*/true);
  std::istringstream in(log);
  auto events = pp::parse_message_log(in);
  REQUIRE(pp::logged_steps(events).size() == 1);
  auto r = pp::step_timeline(events, pp::logged_steps(events).front());
  CHECK(r.actions == 16);  // a forward and a backward per microbatch and stage
  REQUIRE(r.busy.size() == 2);
  for (int rank = 0; rank < 2; ++rank) {
    double last_end = -1;
    for (const auto& e : r.timeline) {
      if (e.rank != rank) continue;
      CHECK(e.start >= last_end);  // one action at a time per rank
      CHECK(e.end >= e.start);
      last_end = e.end;
    }
  }
  // 1F1B on 2 stages: rank 0 holds at most 2 activations, the last rank 1.
  CHECK(r.peak_activations == std::vector<int>{2, 1});
  CHECK(r.bubble_fraction >= 0.0);
  CHECK(r.bubble_fraction < 1.0);
  // Every rank's part of the step ends with its `done` line: the step reads as whole.
  std::istringstream again(log);
  pp::JobLog job = pp::read_job_log({{"log", pp::parse_log_runs(again)}});
  CHECK(pp::step_gaps(job, pp::logged_steps(events).front()).empty());
  CHECK(job.expected_ranks == std::vector<int>{0, 1});
}

namespace {
// A run header as a process writes it.
std::string header(int rank, const std::string& job, const std::string& run, int world,
                   int attempt = 0) {
  return "[12:00:00.000000] [tensorplay] rank=" + std::to_string(rank) +
         " step=0 event=run what=job:" + job + " run:" + run +
         " attempt:" + std::to_string(attempt) + " world:" + std::to_string(world) + " t_us=0\n";
}

// A rank's step 7 (rank_lines) with the `done` line that ends it.
std::string whole_rank(int rank, int64_t t0) {
  return rank_lines(rank, t0) + "rank=" + std::to_string(rank) +
         " step=7 event=done what=step t_us=" + std::to_string(t0 + 60) + "\n";
}

std::vector<pp::LogRun> runs_of(const std::string& text) {
  std::istringstream in(text);
  return pp::parse_log_runs(in);
}
}  // namespace

TEST_CASE("run headers split a log into runs, each on its own clock", "[trace_log]") {
  auto runs = runs_of(
      "rank=0 step=7 event=start what=0F0 t_us=5\n" +  // written before logs had headers
      header(0, "job-a", "u1", 1) + "rank=0 step=0 event=clock what=offset_us:100 t_us=0\n" +
      "rank=0 step=7 event=start what=0F0 t_us=10\n" +
      header(0, "job-b", "u1", 2) +  // the same process naming its job at init: the same run
      "rank=0 step=7 event=finish what=0F0 t_us=20\n" + header(0, "job-b", "u2", 2, 1) +
      "rank=0 step=7 event=start what=0F0 t_us=10\n");
  REQUIRE(runs.size() == 3);
  CHECK_FALSE(runs[0].has_header);
  CHECK(runs[0].events.size() == 1);
  CHECK(runs[0].events[0].t_us == 5);  // the next run's clock line is not this run's
  REQUIRE(runs[1].has_header);
  CHECK(runs[1].header.job_id == "job-b");
  CHECK(runs[1].header.run_id == "u1");
  CHECK(runs[1].header.world_size == 2);
  REQUIRE(runs[1].events.size() == 3);
  CHECK(runs[1].events[1].t_us == 110);
  CHECK(runs[1].events[2].t_us == 120);
  CHECK(runs[2].header.run_id == "u2");
  CHECK(runs[2].header.attempt == 1);
  REQUIRE(runs[2].events.size() == 1);
  CHECK(runs[2].events[0].t_us == 10);
  // The flat reading has every run's events and no header.
  std::istringstream all(header(0, "j", "u", 1) + rank_lines(0, 1000));
  CHECK(pp::parse_message_log(all).size() == 8);
  CHECK_THROWS_WITH(runs_of("x\nrank=0 step=0 event=run what=job: run:u world:1 t_us=0\n"),
                    Catch::Contains("line 2") && Catch::Contains("lacks job:ID"));
  CHECK_THROWS_WITH(runs_of("rank=0 step=0 event=run what=job:j run:u world:0 t_us=0\n"),
                    Catch::Contains("world:0 is outside"));
}

TEST_CASE("logs of two jobs are refused, naming the files and the job ids", "[trace_log]") {
  // Before run headers, rank 0's log of one job beside rank 1's of another gave a timeline.
  std::vector<pp::MessageLogRuns> mixed = {
      {"a/messages_rank_0.log", runs_of(header(0, "job-a", "u0", 2) + whole_rank(0, 1000))},
      {"b/messages_rank_1.log", runs_of(header(1, "job-b", "u1", 2) + whole_rank(1, 900'000))}};
  CHECK_THROWS_WITH(pp::read_job_log(mixed),
                    Catch::Contains("message logs of two jobs") &&
                        Catch::Contains("'a/messages_rank_0.log' is job job-a") &&
                        Catch::Contains("'b/messages_rank_1.log' is job job-b"));
  // Two attempts of one job (a restart only one rank logged) are refused too.
  std::vector<pp::MessageLogRuns> attempts = {
      {"r0", runs_of(header(0, "job", "u0", 2, 1) + whole_rank(0, 1000))},
      {"r1", runs_of(header(1, "job", "u1", 2, 0) + whole_rank(1, 1000))}};
  CHECK_THROWS_WITH(pp::read_job_log(attempts),
                    Catch::Contains("two attempts of job job") &&
                        Catch::Contains("'r0' is attempt 1, 'r1' is attempt 0"));
  // One job's logs read as one timeline, every rank whole.
  std::vector<pp::MessageLogRuns> one = {
      {"r0", runs_of(header(0, "job", "u0", 2) + whole_rank(0, 1000))},
      {"r1", runs_of(header(1, "job", "u1", 2) + whole_rank(1, 1000))}};
  pp::JobLog log = pp::read_job_log(one);
  CHECK(log.notes.empty());
  CHECK(log.expected_ranks == std::vector<int>{0, 1});
  CHECK(pp::step_gaps(log, 7).empty());
  CHECK(pp::complete_steps(log) == std::vector<uint64_t>{7});
  check_same_timeline(pp::step_timeline(log.events, 7),
                      pp::step_timeline(parse(rank_lines(0, 1000) + rank_lines(1, 1000)), 7));
}

TEST_CASE("a log holding two runs is read one run at a time, the newest by default",
          "[trace_log]") {
  // Before run headers, two appended runs read as one step of twice the actions.
  const std::string first = header(0, "j1", "u1", 1) + whole_rank(0, 1000) + whole_rank(1, 1000);
  const std::string second =
      header(0, "j2", "u2", 1) + whole_rank(0, 900'000) + whole_rank(1, 900'000);
  std::vector<pp::MessageLogRuns> files = {{"run.log", runs_of(first + second)}};
  pp::JobLog newest = pp::read_job_log(files);
  CHECK(newest.most_runs == 2);
  REQUIRE(newest.notes.size() == 1);
  CHECK_THAT(newest.notes[0], Catch::Contains("'run.log' holds 2 runs") &&
                                  Catch::Contains("run 1 (job j1, attempt 0, step 7)") &&
                                  Catch::Contains("reading run 2, the newest"));
  auto r = pp::step_timeline(newest.events, 7);
  CHECK(r.actions == 6);
  CHECK(r.makespan == 50);
  CHECK(r.timeline.front().start == 0);
  pp::JobLog earlier = pp::read_job_log(files, 1);
  CHECK(pp::step_timeline(earlier.events, 7).makespan == 50);
  CHECK(earlier.events.front().t_us == 1000);
  CHECK_THAT(earlier.notes[0], Catch::Contains("reading run 1") && !Catch::Contains("newest"));
  CHECK_THROWS_WITH(pp::read_job_log(files, 3),
                    Catch::Contains("there is no run 3 in 'run.log': it holds 2") &&
                        Catch::Contains("pick one of 1 to 2"));
  // Per-rank files of a restarted job: each file's newest run is the same attempt.
  std::vector<pp::MessageLogRuns> restarted = {
      {"r0",
       runs_of(header(0, "job", "a0", 2, 0) + header(0, "job", "b0", 2, 1) + whole_rank(0, 5000))},
      {"r1", runs_of(header(1, "job", "a1", 2, 0) + whole_rank(1, 1000) +
                     header(1, "job", "b1", 2, 1) + whole_rank(1, 5000))}};
  CHECK(pp::step_gaps(pp::read_job_log(restarted), 7).empty());
  // Its first attempt: rank 0 logged no step before it was restarted.
  CHECK_THAT(pp::step_gaps(pp::read_job_log(restarted, 1), 7),
             Catch::Contains("rank 0's log 'r0' ends before its first step"));
}

TEST_CASE("a step some rank did not log whole is named, not measured", "[trace_log]") {
  const std::string rank0 = header(0, "job", "u0", 2) + whole_rank(0, 1000);
  const std::string rank1 = header(1, "job", "u1", 2) + whole_rank(1, 1000);
  // Rank 1's log cut in half: its step has no `done` line.
  const std::string cut = rank1.substr(0, rank1.size() / 2);
  pp::JobLog halved = pp::read_job_log({{"r0", runs_of(rank0)}, {"r1", runs_of(cut)}});
  CHECK_THAT(pp::step_gaps(halved, 7), Catch::Contains("rank 1 logged only part of step 7 in "
                                                       "'r1' (the log was cut short"));
  CHECK(pp::complete_steps(halved).empty());
  // Rank 1's log empty, or not given: the header's world size expects it.
  pp::JobLog empty = pp::read_job_log({{"r0", runs_of(rank0)}, {"r1", runs_of("")}});
  CHECK_THAT(pp::step_gaps(empty, 7),
             Catch::Contains("rank 1 has no log (the job has 2 processes, says the header of "
                             "'r0')") &&
                 Catch::Contains("'r1' holds no message-log line (empty)"));
  pp::JobLog alone = pp::read_job_log({{"r0", runs_of(rank0)}});
  CHECK_THAT(pp::step_gaps(alone, 7), Catch::Contains("rank 1 has no log"));
  // Rank 1's log ends a step early.
  std::string step6 = whole_rank(0, 100);
  for (size_t at; (at = step6.find("step=7")) != std::string::npos;) step6.replace(at, 6, "step=6");
  std::string rank1_step6 = step6;
  for (size_t at; (at = rank1_step6.find("rank=0")) != std::string::npos;)
    rank1_step6.replace(at, 6, "rank=1");
  for (size_t at; (at = rank1_step6.find("what=0")) != std::string::npos;)
    rank1_step6.replace(at, 6, "what=1");
  pp::JobLog early =
      pp::read_job_log({{"r0", runs_of(header(0, "job", "u0", 2) + step6 + whole_rank(0, 1000))},
                        {"r1", runs_of(header(1, "job", "u1", 2) + rank1_step6)}});
  CHECK_THAT(pp::step_gaps(early, 7), Catch::Contains("rank 1's log 'r1' ends at step 6"));
  CHECK(pp::step_gaps(early, 6).empty());
  CHECK(pp::complete_steps(early) == std::vector<uint64_t>{6});
  // An embedded run (one process, every rank): the ranks it names are the ones expected.
  pp::JobLog embedded = pp::read_job_log(
      {{"run.log", runs_of(header(0, "job", "u", 1) + whole_rank(0, 1000) + rank_lines(1, 1000))}});
  CHECK(embedded.expected_ranks == std::vector<int>{0, 1});
  CHECK_THAT(pp::step_gaps(embedded, 7), Catch::Contains("rank 1 logged only part of step 7"));
  // A pipeline in part of a job (a replica of a device mesh): process 2 logs pipeline rank 0, so
  // the job's size says nothing about the pipeline's ranks.
  pp::JobLog replica =
      pp::read_job_log({{"p2", runs_of(header(2, "job", "u2", 4) + whole_rank(0, 1000))},
                        {"p3", runs_of(header(3, "job", "u3", 4) + whole_rank(1, 1000))}});
  CHECK(replica.expected_ranks == std::vector<int>{0, 1});
  CHECK(pp::step_gaps(replica, 7).empty());
}

TEST_CASE("logs without run headers read with a warning that they cannot be checked",
          "[trace_log]") {
  pp::JobLog log =
      pp::read_job_log({{"old.log", runs_of(rank_lines(0, 1000) + rank_lines(1, 1000))}});
  REQUIRE(log.notes.size() == 1);
  CHECK_THAT(log.notes[0], Catch::Contains("warning: 'old.log' has no run header") &&
                               Catch::Contains("cannot be checked"));
  CHECK(pp::step_gaps(log, 7).empty());  // no `done` lines to ask for
  CHECK(pp::step_timeline(log.events, 7).actions == 6);
}
