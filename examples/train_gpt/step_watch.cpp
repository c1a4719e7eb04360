// The in-memory message-log sink and the per-step figures read from it.
#include "step_watch.h"

#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <mutex>
#include <sstream>

#include "tensorplay/base/logging.h"
#include "tensorplay/observe/message_log.h"
#include "tensorplay/observe/trace_log.h"

namespace train_gpt {

namespace pp = tensorplay::pipelining;

struct StepWatch::Sink : spdlog::sinks::base_sink<std::mutex> {
  std::string take() {
    std::lock_guard<std::mutex> guard(mutex_);
    std::string out;
    out.swap(text_);
    return out;
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    text_.append(msg.payload.data(), msg.payload.size());
    text_.push_back('\n');
  }
  void flush_() override {}

 private:
  std::string text_;
};

StepWatch::StepWatch() : sink_(std::make_shared<Sink>()) {
  auto logger = pp::message_log();
  // The terminal (the logger's first sink) keeps its quiet default unless SPDLOG_LEVEL asks; the
  // watch needs every event whatever the level.
  tensorplay::add_debug_sink(*logger, sink_);
  logger->set_level(spdlog::level::debug);
}

StepWatch::~StepWatch() {
  auto logger = pp::message_log();
  auto& sinks = logger->sinks();
  sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
}

void StepWatch::discard() { sink_->take(); }

std::optional<tensorplay::schedules::SimulationResult> StepWatch::take_step() {
  std::istringstream in(sink_->take());
  const std::vector<pp::LogEvent> events = pp::parse_message_log(in);
  const std::vector<uint64_t> steps = pp::logged_steps(events);
  if (steps.empty()) return std::nullopt;
  try {
    return pp::step_timeline(events, steps.back());
  } catch (const std::invalid_argument&) {
    return std::nullopt;  // a step whose log is cut short (it failed): nothing to show
  }
}

}  // namespace train_gpt
