// Captures the message log of a piece of test code: the log goes only to a string while it runs.
#pragma once

#include <functional>
#include <string>

#include "tensorplay/observe/message_log.h"

namespace log_capture {

/// Runs `body` with the message log written only to the returned string (message_log.h).
inline std::string capture_message_log(const std::function<void()>& body, bool debug) {
  return tensorplay::pipelining::capture_message_log(body, debug);
}

}  // namespace log_capture
