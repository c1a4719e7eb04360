// Where a tensor's storage lives: the host (`cpu`) or one CUDA device (`cuda:N`).
// A small value type, parsed from and printed as the strings users write.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tensorplay {

/// Kind of memory a tensor lives in.
enum class DeviceType : uint8_t { CPU, CUDA };

/// A device: `cpu` or `cuda:N`.
struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  Device() = default;
  Device(DeviceType t, int i = 0) : type(t), index(i) {}
  /// Parses "cpu", "cuda" (device 0) or "cuda:N"; throws std::invalid_argument otherwise.
  Device(std::string_view text);  // NOLINT(google-explicit-constructor): devices read as strings
  Device(const char* text) : Device(std::string_view(text)) {}  // NOLINT

  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  bool operator==(const Device&) const = default;
};

/// "cpu" or "cuda:N".
std::string to_string(const Device& device);

/// The host device.
inline Device cpu() { return Device(DeviceType::CPU, 0); }

}  // namespace tensorplay
