// Parsing and printing of devices.
#include "tensorplay/core/device.h"

#include <charconv>
#include <stdexcept>

namespace tensorplay {

Device::Device(std::string_view text) {
  if (text == "cpu") return;
  if (text.starts_with("cuda")) {
    type = DeviceType::CUDA;
    std::string_view rest = text.substr(4);
    if (rest.empty()) return;
    if (rest.front() == ':') {
      rest.remove_prefix(1);
      auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), index);
      if (ec == std::errc() && ptr == rest.data() + rest.size() && !rest.empty() && index >= 0)
        return;
    }
  }
  throw std::invalid_argument("unknown device '" + std::string(text) +
                              "': use \"cpu\", \"cuda\" or \"cuda:N\"");
}

std::string to_string(const Device& device) {
  return device.is_cpu() ? "cpu" : "cuda:" + std::to_string(device.index);
}

}  // namespace tensorplay
