// Tests for logging.h: a configured logger is quiet by default, its lines follow kLogPattern, and a
// sink added for every event gets them while the terminal stays quiet.
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <catch2/catch.hpp>
#include <memory>
#include <regex>
#include <sstream>
#include <string>

#include "tensorplay/base/base_knobs.h"
#include "tensorplay/base/knobs.h"
#include "tensorplay/base/logging.h"

namespace tp = tensorplay;

TEST_CASE("a configured logger is off unless SPDLOG_LEVEL sets it", "[logging]") {
  auto logger = tp::configure_logger("tp_test_quiet");
  REQUIRE(logger != nullptr);
  CHECK(logger->name() == "tp_test_quiet");
  CHECK(spdlog::get("tp_test_quiet") == logger);
  CHECK(tp::configure_logger("tp_test_quiet") == logger);  // the same logger, set up again
  REQUIRE(logger->sinks().size() == 1);                    // the terminal
  if (tp::knob_is_set(tp::kSpdlogLevelKnob)) {
    WARN("SPDLOG_LEVEL is set: the default level cannot be checked");
    return;
  }
  CHECK(logger->level() == spdlog::level::off);
  CHECK_FALSE(logger->should_log(spdlog::level::critical));
}

TEST_CASE("a sink added for every event gets them with the pattern", "[logging]") {
  auto logger = tp::configure_logger("tp_test_sink");
  std::ostringstream out;
  tp::add_debug_sink(*logger, std::make_shared<spdlog::sinks::ostream_sink_mt>(out));
  REQUIRE(logger->sinks().size() == 2);
  logger->debug("hello {}", 7);
  logger->flush();
  INFO(out.str());
  if (tp::knob_is_set(tp::kSpdlogLevelKnob)) {
    WARN("SPDLOG_LEVEL is set: its level rules the sink");
    return;
  }
  // `[12:34:56.789012] [name] text`: kLogPattern.
  CHECK(std::regex_match(out.str(),
                         std::regex(R"(\[\d\d:\d\d:\d\d\.\d{6}\] \[tp_test_sink\] hello 7\n)")));
  CHECK(logger->level() == spdlog::level::debug);
  CHECK(logger->sinks().front()->level() == spdlog::level::off);  // the terminal stays quiet
  spdlog::drop("tp_test_sink");
}
