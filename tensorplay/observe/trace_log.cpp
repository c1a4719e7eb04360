// Message-log reader: parses the log lines written by message_log.cpp into runs on rank 0's clock,
// merges one job's logs of several processes, says which ranks a step lacks, and rebuilds a
// step's timeline from its start/finish pairs.
#include "tensorplay/observe/trace_log.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <tuple>

#include "tensorplay/schedules/action.h"

namespace tensorplay::pipelining {
namespace {

constexpr int64_t kMaxRanks = int64_t{1} << 20;

// The value after `key=` up to the next space (or the end), or false when the key is absent.
bool field(const std::string& line, const std::string& key, std::string& value) {
  size_t at = line.find(" " + key + "=");
  size_t skip = key.size() + 2;
  if (at == std::string::npos) {
    if (line.rfind(key + "=", 0) != 0) return false;
    at = 0;
    skip = key.size() + 1;
  }
  size_t begin = at + skip;
  size_t end = line.find(' ', begin);
  value = line.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
  return true;
}

int64_t to_integer(const std::string& text, const std::string& key, size_t line_number) {
  size_t used = 0;
  long long value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size())
    throw std::invalid_argument("message log line " + std::to_string(line_number) + ": " + key +
                                "='" + text + "' is not an integer");
  return value;
}

// The N of a clock line's `offset_us:N`.
int64_t clock_offset(const std::string& what, size_t line_number) {
  const std::string prefix = "offset_us:";
  if (what.rfind(prefix, 0) != 0)
    throw std::invalid_argument("message log line " + std::to_string(line_number) +
                                ": a clock line's what='" + what + "' is not offset_us:N");
  return to_integer(what.substr(prefix.size()), "offset_us", line_number);
}

// A run header's `job:J run:U attempt:A world:W` (other words are left for later fields).
RunHeader run_header(const std::string& what, size_t line_number) {
  RunHeader header;
  bool job = false, run = false;
  size_t begin = 0;
  while (begin < what.size()) {
    size_t end = what.find(' ', begin);
    if (end == std::string::npos) end = what.size();
    const std::string word = what.substr(begin, end - begin);
    begin = end + 1;
    const size_t colon = word.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = word.substr(0, colon), value = word.substr(colon + 1);
    if (key == "job") {
      header.job_id = value;
      job = true;
    } else if (key == "run") {
      header.run_id = value;
      run = true;
    } else if (key == "attempt") {
      header.attempt = static_cast<int>(to_integer(value, "attempt", line_number));
    } else if (key == "world") {
      const int64_t world = to_integer(value, "world", line_number);
      if (world < 1 || world > kMaxRanks)
        throw std::invalid_argument("message log line " + std::to_string(line_number) +
                                    ": a run header's world:" + value + " is outside [1, " +
                                    std::to_string(kMaxRanks) + "]");
      header.world_size = static_cast<int>(world);
    }
  }
  if (!job || !run || header.job_id.empty() || header.run_id.empty())
    throw std::invalid_argument("message log line " + std::to_string(line_number) +
                                ": a run header's what='" + what +
                                "' lacks job:ID or run:ID (is the log damaged?)");
  return header;
}

}  // namespace

namespace {

/// One event line of a message log (line `number`), or nothing for a line that is not one.
std::optional<LogEvent> parse_event_line(const std::string& line, size_t number) {
  std::string rank, step, event, t_us;
  if (!field(line, "rank", rank) || !field(line, "step", step) || !field(line, "event", event) ||
      !field(line, "t_us", t_us))
    return std::nullopt;
  // `what` may hold spaces ("input 1:0"): it runs from its key to " t_us=".
  size_t what_at = line.find(" what=");
  size_t t_at = line.find(" t_us=");
  if (what_at == std::string::npos || t_at == std::string::npos || t_at < what_at)
    return std::nullopt;
  LogEvent e;
  int64_t r = to_integer(rank, "rank", number);
  if (r < 0 || r >= kMaxRanks)
    throw std::invalid_argument("message log line " + std::to_string(number) + ": rank=" + rank +
                                " is outside [0, " + std::to_string(kMaxRanks) + ")");
  e.rank = static_cast<int>(r);
  const int64_t step_number = to_integer(step, "step", number);
  if (step_number < 0)
    throw std::invalid_argument("message log line " + std::to_string(number) + ": step=" + step +
                                " is negative (steps count from 1; is the log damaged?)");
  e.step = static_cast<uint64_t>(step_number);
  e.event = event;
  e.what = line.substr(what_at + 6, t_at - what_at - 6);
  e.t_us = to_integer(t_us, "t_us", number);
  return e;
}

/// A clock line's offset holds from it on; the first one of a run also before it, for lines
/// logged before init had measured it (the offset is the process's, not the line's).
void apply_clock_offsets(std::vector<LogEvent>& events,
                         const std::vector<std::pair<size_t, int64_t>>& marks) {
  for (size_t k = 0; k < marks.size(); ++k) {
    size_t begin = k == 0 ? 0 : marks[k].first;
    size_t end = k + 1 < marks.size() ? marks[k + 1].first : events.size();
    for (size_t i = begin; i < end; ++i) events[i].t_us += marks[k].second;
  }
}

}  // namespace

std::vector<LogRun> parse_log_runs(std::istream& in) {
  std::vector<LogRun> runs;
  // Per run: index of each clock line's event, its offset.
  std::vector<std::vector<std::pair<size_t, int64_t>>> clocks;
  std::string line;
  size_t number = 0;
  while (std::getline(in, line)) {
    std::optional<LogEvent> e = parse_event_line(line, ++number);
    if (!e) continue;
    if (e->event == "run") {
      RunHeader header = run_header(e->what, number);
      header.rank = e->rank;
      // The same process again (init naming its job after the first event): one run.
      if (!runs.empty() && runs.back().has_header && runs.back().header.run_id == header.run_id) {
        runs.back().header = std::move(header);
      } else {
        runs.push_back({true, std::move(header), {}});
        clocks.emplace_back();
      }
      continue;
    }
    if (runs.empty()) {  // lines of a log written before run headers
      runs.push_back({});
      clocks.emplace_back();
    }
    std::vector<LogEvent>& events = runs.back().events;
    if (e->event == "clock")
      clocks.back().emplace_back(events.size(), clock_offset(e->what, number));
    events.push_back(std::move(*e));
  }
  for (size_t run = 0; run < runs.size(); ++run) apply_clock_offsets(runs[run].events, clocks[run]);
  return runs;
}

std::vector<LogEvent> parse_message_log(std::istream& in) {
  std::vector<LogEvent> events;
  for (LogRun& run : parse_log_runs(in))
    events.insert(events.end(), std::make_move_iterator(run.events.begin()),
                  std::make_move_iterator(run.events.end()));
  return events;
}

std::vector<LogEvent> merge_message_logs(const std::vector<MessageLogFile>& logs) {
  std::map<int, size_t> file_of_rank;  // the log each rank was first seen in
  std::vector<LogEvent> events;
  for (size_t f = 0; f < logs.size(); ++f) {
    for (const LogEvent& e : logs[f].events) {
      auto [it, first] = file_of_rank.emplace(e.rank, f);
      if (first || it->second == f) continue;
      const std::string& other = logs[it->second].name;
      if (other == logs[f].name)
        throw std::invalid_argument("message log '" + other +
                                    "' is passed twice; pass each process's log once");
      throw std::invalid_argument(
          "message logs: rank " + std::to_string(e.rank) + " is in both '" + other + "' and '" +
          logs[f].name +
          "'; each rank's events must come from one process's log (the same log copied, or logs "
          "of two runs? pass one run's logs)");
    }
    events.insert(events.end(), logs[f].events.begin(), logs[f].events.end());
  }
  return events;
}

namespace {

// "steps 3 to 9", "step 3" or "no steps" for the events of one run.
std::string describe_steps(const std::vector<LogEvent>& events) {
  std::vector<uint64_t> steps = logged_steps(events);
  if (steps.empty()) return "no steps";
  if (steps.size() == 1) return "step " + std::to_string(steps.front());
  return "steps " + std::to_string(steps.front()) + " to " + std::to_string(steps.back());
}

// "run 2 (job J, attempt 0, steps 1 to 9)".
std::string describe_run(const LogRun& run, size_t number) {
  std::string out = "run " + std::to_string(number) + " (";
  if (run.has_header)
    out += "job " + run.header.job_id + ", attempt " + std::to_string(run.header.attempt) + ", ";
  else
    out += "no header, ";
  return out + describe_steps(run.events) + ")";
}

// How an error names the run read from a file: "'f'", or "run 2 of 'f'" when it holds several.
std::string name_run(const MessageLogRuns& file, size_t number) {
  return file.runs.size() > 1 ? "run " + std::to_string(number) + " of '" + file.name + "'"
                              : "'" + file.name + "'";
}

std::string join(const std::vector<std::string>& parts, const std::string& separator) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? separator : "") + parts[i];
  return out;
}

// The run read from one file, when it has a run header.
struct Header {
  const MessageLogRuns* file;
  size_t number;
  const LogRun* run;
};

// What picking one run of each file gave: the runs' events, those with headers, and the notes on
// files holding several runs (the runs' text, and the files holding them).
struct PickedRuns {
  std::vector<MessageLogFile> picked;
  std::vector<Header> headed;
  std::vector<std::pair<std::string, std::vector<std::string>>> appended;
};

// Picks run `run` of `file` (0: its newest) into `out`, noting what the log holds.
void pick_run(const MessageLogRuns& file, int run, JobLog& log, PickedRuns& out) {
  if (file.runs.empty()) {
    log.empty_files.push_back(file.name);
    return;
  }
  log.most_runs = std::max(log.most_runs, file.runs.size());
  std::vector<std::string> listed;
  for (size_t k = 0; k < file.runs.size(); ++k) listed.push_back(describe_run(file.runs[k], k + 1));
  const size_t number = run == 0 ? file.runs.size() : static_cast<size_t>(run);
  if (number > file.runs.size())
    throw std::invalid_argument("there is no run " + std::to_string(run) + " in '" + file.name +
                                "': it holds " + std::to_string(file.runs.size()) + " (" +
                                join(listed, ", ") + "); pick one of 1 to " +
                                std::to_string(file.runs.size()));
  if (file.runs.size() > 1) {
    // Files holding the same runs (a launch's ranks, restarted together) share one note.
    const std::string runs_read =
        " " + std::to_string(file.runs.size()) +
        " runs (processes started again with the same log): " + join(listed, ", ") +
        "; reading run " + std::to_string(number) + (run == 0 ? ", the newest" : "");
    auto same = std::find_if(out.appended.begin(), out.appended.end(),
                             [&](const auto& a) { return a.first == runs_read; });
    if (same == out.appended.end()) same = out.appended.insert(out.appended.end(), {runs_read, {}});
    same->second.push_back("'" + file.name + "'");
  }
  const LogRun& chosen = file.runs[number - 1];
  if (chosen.has_header) {
    out.headed.push_back({&file, number, &chosen});
    for (const LogEvent& e : chosen.events) log.checked_ranks.insert(e.rank);
  } else {
    log.notes.push_back("warning: " + name_run(file, number) +
                        " has no run header (a log written before logs recorded job and run "
                        "ids): it cannot be checked for another job's logs, appended runs or "
                        "missing ranks");
  }
  out.picked.push_back({file.name, chosen.events});
}

// One note per set of files holding the same appended runs, before the other notes.
void note_appended_runs(const PickedRuns& runs, JobLog& log) {
  for (auto it = runs.appended.rbegin(); it != runs.appended.rend(); ++it) {
    const auto& [runs_read, names] = *it;
    const std::string who =
        names.size() == 1 ? names[0] + " holds"
        : names.size() == 2
            ? names[0] + " and " + names[1] + " each hold"
            : names[0] + " and " + std::to_string(names.size() - 1) + " other logs each hold";
    log.notes.insert(log.notes.begin(), who + runs_read);
  }
}

// Checks that the headers name one job, one attempt and one size (the first header read is the
// reference); returns that size, or 0 when no header was read or the logs are not the whole job
// (some process logs ranks other than its own: an embedded run, or a pipeline in a device mesh).
int check_headers(const std::vector<Header>& headed) {
  int world = 0;
  bool whole_world = !headed.empty();
  for (const Header& h : headed) {
    const Header& first = headed.front();
    const RunHeader& a = first.run->header;
    const RunHeader& b = h.run->header;
    const std::string name_a = name_run(*first.file, first.number);
    const std::string name_b = name_run(*h.file, h.number);
    if (a.job_id != b.job_id)
      throw std::invalid_argument(
          "message logs of two jobs: " + name_a + " is job " + a.job_id + ", " + name_b +
          " is job " + b.job_id +
          "; pass the logs of one job (a log directory used by two launches? give each its own)");
    if (a.attempt != b.attempt)
      throw std::invalid_argument(
          "message logs of two attempts of job " + a.job_id + ": " + name_a + " is attempt " +
          std::to_string(a.attempt) + ", " + name_b + " is attempt " + std::to_string(b.attempt) +
          " (a restart that one rank did not log?); pass the logs of one attempt, picking the "
          "run of each log");
    if (a.world_size != b.world_size)
      throw std::invalid_argument("message logs of job " + a.job_id +
                                  " disagree on its size: " + name_a + " says " +
                                  std::to_string(a.world_size) + " processes, " + name_b +
                                  " says " + std::to_string(b.world_size) + "; is a log damaged?");
    world = b.world_size;
    for (const LogEvent& e : h.run->events)
      if (e.rank != b.rank) whole_world = false;
  }
  return whole_world ? world : 0;
}

// Merges the picked runs into `log`: events, each rank's file, the steps each rank logged and
// finished, and the ranks a step needs (every process of a launched pipeline of `world` > 1).
void index_events(const PickedRuns& runs, int world, JobLog& log) {
  log.events = merge_message_logs(runs.picked);
  for (const MessageLogFile& f : runs.picked)
    for (const LogEvent& e : f.events) log.file_of_rank.emplace(e.rank, f.name);
  std::set<int> expected;
  for (const LogEvent& e : log.events) {
    expected.insert(e.rank);
    if (e.event == "clock") continue;
    log.logged[e.rank].insert(e.step);
    if (e.event == "done") log.done[e.rank].insert(e.step);
  }
  // A launched pipeline (each process logs its own rank) needs every process's log; an embedded
  // run, or a pipeline in a part of the job (a device mesh), the ranks its logs name.
  if (world > 1) {
    for (int r = 0; r < world; ++r) expected.insert(r);
    // A process that logged its header and nothing else still has its log.
    for (const Header& h : runs.headed) log.file_of_rank.emplace(h.run->header.rank, h.file->name);
    const Header& first = runs.headed.front();
    log.expected_why = "the job has " + std::to_string(world) + " processes, says the header of " +
                       name_run(*first.file, first.number);
  }
  log.expected_ranks.assign(expected.begin(), expected.end());
}

}  // namespace

JobLog read_job_log(const std::vector<MessageLogRuns>& files, int run) {
  if (run < 0)
    throw std::invalid_argument("run " + std::to_string(run) +
                                " is negative; runs count from 1 (0 reads each log's newest)");
  JobLog log;
  PickedRuns runs;
  for (const MessageLogRuns& file : files) pick_run(file, run, log, runs);
  note_appended_runs(runs, log);
  index_events(runs, check_headers(runs.headed), log);
  return log;
}

std::string step_gaps(const JobLog& log, uint64_t step) {
  std::vector<std::string> gaps;
  auto file = [&](int rank) { return "'" + log.file_of_rank.at(rank) + "'"; };
  for (int rank : log.expected_ranks) {
    const std::string who = "rank " + std::to_string(rank);
    auto logged = log.logged.find(rank);
    if (log.file_of_rank.count(rank) == 0) {
      gaps.push_back(who + " has no log" +
                     (log.expected_why.empty() ? "" : " (" + log.expected_why + ")"));
    } else if (logged == log.logged.end() || logged->second.empty()) {
      gaps.push_back(who + "'s log " + file(rank) + " ends before its first step");
    } else if (logged->second.count(step) == 0) {
      const uint64_t last = *logged->second.rbegin();
      gaps.push_back(who + "'s log " + file(rank) +
                     (last < step ? " ends at step " + std::to_string(last) +
                                        " (cut short, or the rank stopped early)"
                                  : " has no line of step " + std::to_string(step)));
    } else if (log.checked_ranks.count(rank) &&
               (log.done.count(rank) == 0 || log.done.at(rank).count(step) == 0)) {
      gaps.push_back(who + " logged only part of step " + std::to_string(step) + " in " +
                     file(rank) + " (the log was cut short, or the step failed there)");
    }
  }
  for (const std::string& name : log.empty_files)
    gaps.push_back("'" + name + "' holds no message-log line (empty)");
  return join(gaps, "; ");
}

std::vector<uint64_t> complete_steps(const JobLog& log) {
  std::vector<uint64_t> out;
  for (uint64_t step : logged_steps(log.events))
    if (step_gaps(log, step).empty()) out.push_back(step);
  return out;
}

std::vector<uint64_t> logged_steps(const std::vector<LogEvent>& events) {
  std::set<uint64_t> steps;
  for (const LogEvent& e : events)
    if (e.event != "clock") steps.insert(e.step);
  return {steps.begin(), steps.end()};
}

std::vector<uint64_t> evaluation_steps(const std::vector<LogEvent>& events) {
  std::set<uint64_t> steps;
  for (const LogEvent& e : events)
    if (e.event == "recv" && e.what == "eval") steps.insert(e.step);
  return {steps.begin(), steps.end()};
}

std::vector<TrainingStep> training_steps(const std::vector<LogEvent>& events) {
  const std::vector<uint64_t> evaluations = evaluation_steps(events);
  std::vector<TrainingStep> out;
  for (uint64_t step : logged_steps(events)) {
    if (std::binary_search(evaluations.begin(), evaluations.end(), step)) continue;
    const auto before = std::lower_bound(evaluations.begin(), evaluations.end(), step);
    out.push_back({step - static_cast<uint64_t>(before - evaluations.begin()), step});
  }
  return out;
}

}  // namespace tensorplay::pipelining
