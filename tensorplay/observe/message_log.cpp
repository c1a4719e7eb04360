// spdlog-backed message log, with a run header at the start of each process's part of a log.
#include "tensorplay/observe/message_log.h"

#include <fmt/compile.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <mutex>
#include <random>
#include <sstream>

#include "tensorplay/base/logging.h"

namespace tensorplay::pipelining {
namespace {

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// 16 hex digits, different for every call in every process: the random device mixed with the
// wall clock and the process id (so a missing device still gives distinct ids).
std::string make_id() {
  uint64_t bits =
      static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  bits ^= static_cast<uint64_t>(::getpid()) << 40;
  try {
    std::random_device random;
    bits ^= (static_cast<uint64_t>(random()) << 32) ^ random();
  } catch (const std::exception&) {
  }
  bits *= 0x9E3779B97F4A7C15ULL;  // spread the clock's low bits over the whole word
  bits ^= bits >> 29;
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(bits));
  return text;
}

// A job id as one token of the header: blanks and control characters become '_'.
std::string header_token(const std::string& id) {
  std::string out = id.empty() ? "_" : id;
  for (char& c : out)
    if (std::isspace(static_cast<unsigned char>(c)) || std::iscntrl(static_cast<unsigned char>(c)))
      c = '_';
  return out;
}

// What run headers say, and whether this process's header is in the log yet.
struct RunIdentity {
  std::mutex mutex;
  std::string job_id = make_id();
  int rank = 0;
  int world_size = 1;
  int attempt = 0;
  std::atomic<bool> header_written{false};
};

RunIdentity& identity() {
  static RunIdentity id;
  return id;
}

// Writes the header with what `id` holds now; the caller holds id.mutex.
void write_header_locked(RunIdentity& id) {
  message_log()->debug("rank={} step=0 event=run what=job:{} run:{} attempt:{} world:{} t_us={}",
                       id.rank, header_token(id.job_id), log_run_id(), id.attempt, id.world_size,
                       now_us());
  id.header_written.store(true, std::memory_order_release);
}

// The header once per process before its first event: every line of the run comes after it.
void ensure_header() {
  RunIdentity& id = identity();
  if (id.header_written.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(id.mutex);
  if (!id.header_written.load(std::memory_order_relaxed)) write_header_locked(id);
}

// A log cut mid-line (its writer killed) gets its newline back, so the next run's header starts
// a line of its own.
void end_last_line(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in || in.tellg() <= 0) return;
  in.seekg(-1, std::ios::end);
  char last = '\n';
  in.get(last);
  in.close();
  if (last != '\n') std::ofstream(path, std::ios::binary | std::ios::app) << '\n';
}

}  // namespace

std::shared_ptr<spdlog::logger> message_log() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    return configure_logger("tensorplay");  // SPDLOG_LEVEL=debug turns the log on
  }();
  return logger;
}

void log_to_file(const std::string& path) {
  auto logger = message_log();
  end_last_line(path);
  // The file gets every event; the terminal keeps its quiet default (unless SPDLOG_LEVEL asks).
  add_debug_sink(*logger,
                 std::make_shared<spdlog::sinks::basic_file_sink_mt>(path, /*truncate=*/false));
  logger->flush_on(spdlog::level::debug);
  if (logger->should_log(spdlog::level::debug)) {
    RunIdentity& id = identity();
    std::lock_guard<std::mutex> lock(id.mutex);
    write_header_locked(id);  // the file's part of this run starts with it
  }
}

bool message_log_enabled() {
  static const auto& logger = message_log();
  return logger->should_log(spdlog::level::debug);
}

void set_log_job(const std::string& job_id, int rank, int world_size, int attempt) {
  RunIdentity& id = identity();
  std::lock_guard<std::mutex> lock(id.mutex);
  if (!job_id.empty()) id.job_id = job_id;
  id.rank = rank;
  id.world_size = world_size;
  id.attempt = attempt;
  if (message_log_enabled()) write_header_locked(id);
}

std::string log_job_id() {
  RunIdentity& id = identity();
  std::lock_guard<std::mutex> lock(id.mutex);
  return header_token(id.job_id);
}

const std::string& log_run_id() {
  static const std::string id = make_id();
  return id;
}

void log_event(int rank, unsigned long long step, const char* event, const std::string& what) {
  log_event_at(rank, step, event, what, now_us());
}

long long message_log_now_us() { return now_us(); }

void log_event_at(int rank, unsigned long long step, const char* event, const std::string& what,
                  long long t_us) {
  static const auto& logger = message_log();
  if (!logger->should_log(spdlog::level::debug)) return;
  ensure_header();
  // Formatted here with a format compiled ahead, then handed over whole: a line costs a few
  // hundred nanoseconds on a stage's path, where it sits between two actions.
  fmt::memory_buffer line;
  fmt::format_to(std::back_inserter(line), FMT_COMPILE("rank={} step={} event={} what={} t_us={}"),
                 rank, step, event, what, t_us);
  logger->log(spdlog::level::debug, spdlog::string_view_t(line.data(), line.size()));
}

namespace {
std::atomic<unsigned long long> rejected{0};
}  // namespace

void note_rejected_message(int rank, const std::string& why) {
  const unsigned long long n = ++rejected;
  log_event(rank, 0, "rejected", why);
  if (n <= 10 || n % 10000 == 0)
    std::fprintf(stderr, "tensorplay: rank %d rejected a message (%llu so far): %s\n", rank, n,
                 why.c_str());
}

unsigned long long rejected_message_count() { return rejected.load(); }

std::string capture_message_log(const std::function<void()>& body, bool debug) {
  auto logger = message_log();
  const auto sinks = logger->sinks();
  const auto level = logger->level();
  std::ostringstream out;
  logger->sinks() = {std::make_shared<spdlog::sinks::ostream_sink_mt>(out)};
  if (debug) logger->set_level(spdlog::level::debug);
  auto restore = [&] {
    logger->flush();
    logger->sinks() = sinks;
    logger->set_level(level);
  };
  try {
    body();
  } catch (...) {
    restore();
    throw;
  }
  restore();
  return out.str();
}

}  // namespace tensorplay::pipelining
