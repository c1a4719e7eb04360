// How the message log names a notification.
#include "tensorplay/wire/notification.h"

namespace tensorplay::pipelining {

std::string describe(const Notification& n) {
  return std::string(n.direction == Direction::Forward ? "input " : "grad ") +
         std::to_string(n.stage) + ":" + std::to_string(n.microbatch);
}

}  // namespace tensorplay::pipelining
