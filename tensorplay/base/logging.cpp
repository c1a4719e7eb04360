// spdlog's setup for every tensorplay program (logging.h).
#include "tensorplay/base/logging.h"

#include <spdlog/cfg/env.h>
#include <spdlog/sinks/sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "tensorplay/base/base_knobs.h"
#include "tensorplay/base/knobs.h"

namespace tensorplay::inline base {

std::shared_ptr<spdlog::logger> configure_logger(const std::string& name) {
  auto logger = spdlog::get(name);
  if (!logger) logger = spdlog::stderr_color_mt(name);
  logger->set_level(spdlog::level::off);
  logger->set_pattern(kLogPattern);
  // spdlog's own reader of SPDLOG_LEVEL: its syntax (`debug`, `name=debug,other=info`) is its own.
  // The row kSpdlogLevelKnob declares the variable; reading it here keeps spdlog's meaning.
  spdlog::cfg::load_env_levels();
  return logger;
}

void add_debug_sink(spdlog::logger& logger, std::shared_ptr<spdlog::sinks::sink> sink) {
  sink->set_pattern(kLogPattern);
  logger.sinks().push_back(std::move(sink));
  if (!knob_is_set(kSpdlogLevelKnob)) {
    // The new sink gets every event; the terminal keeps its quiet default.
    if (logger.sinks().size() > 1) logger.sinks().front()->set_level(spdlog::level::off);
    logger.set_level(spdlog::level::debug);
  }
}

}  // namespace tensorplay::inline base
