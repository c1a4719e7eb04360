// spdlog-backed message log.
#include "actors/message_log.h"

#include <spdlog/cfg/env.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <cstdio>

#include "tensors/knobs.h"

namespace tensorplay::pipelining {

std::shared_ptr<spdlog::logger> message_log() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto l = spdlog::get("tensorplay");
    if (!l) l = spdlog::stderr_color_mt("tensorplay");
    l->set_level(spdlog::level::off);
    l->set_pattern("[%H:%M:%S.%f] [%n] %v");
    spdlog::cfg::load_env_levels();  // SPDLOG_LEVEL=debug turns the log on
    return l;
  }();
  return logger;
}

void log_to_file(const std::string& path) {
  auto logger = message_log();
  auto sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(path, /*truncate=*/true);
  sink->set_pattern("[%H:%M:%S.%f] [%n] %v");
  logger->sinks().push_back(sink);
  if (!knob_is_set(Knob::SpdlogLevel)) {
    // The file gets every event; the terminal keeps its quiet default.
    logger->sinks().front()->set_level(spdlog::level::off);
    logger->set_level(spdlog::level::debug);
  }
  logger->flush_on(spdlog::level::debug);
}

bool message_log_enabled() {
  static const auto& logger = message_log();
  return logger->should_log(spdlog::level::debug);
}

void log_event(int rank, unsigned long long step, const char* event, const std::string& what) {
  static const auto& logger = message_log();
  if (!logger->should_log(spdlog::level::debug)) return;
  auto t_us = std::chrono::duration_cast<std::chrono::microseconds>(
                  std::chrono::steady_clock::now().time_since_epoch())
                  .count();
  logger->debug("rank={} step={} event={} what={} t_us={}", rank, step, event, what, t_us);
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

}  // namespace tensorplay::pipelining
