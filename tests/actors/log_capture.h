// Captures the message log of a piece of test code: the log goes only to a string while it runs.
#pragma once

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <functional>
#include <sstream>
#include <string>

#include "actors/message_log.h"

namespace log_capture {

/// Runs `body` with the message log written only to the returned string, at debug level when
/// `debug` is set (else at the level the logger has); restores sinks and level afterwards.
inline std::string capture_message_log(const std::function<void()>& body, bool debug) {
  auto logger = tensorplay::pipelining::message_log();
  auto sinks = logger->sinks();
  auto level = logger->level();
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

}  // namespace log_capture
