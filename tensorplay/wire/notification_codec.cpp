// Notifications as bytes: writer and checked reader.
#include "tensorplay/wire/notification_codec.h"

#include <cstring>
#include <limits>

namespace tensorplay::pipelining {
namespace {

constexpr uint8_t kVersion = 1;

template <typename T>
void put(std::string& out, T value) {
  char raw[sizeof(T)];
  std::memcpy(raw, &value, sizeof(T));
  out.append(raw, sizeof(T));
}

/// Reads fixed-size values from the front of a byte view; remembers the first overrun.
struct Reader {
  std::string_view rest;
  bool overrun = false;
  template <typename T>
  T get() {
    T value{};
    if (rest.size() < sizeof(T)) {
      overrun = true;
      rest = {};
      return value;
    }
    std::memcpy(&value, rest.data(), sizeof(T));
    rest.remove_prefix(sizeof(T));
    return value;
  }
};

}  // namespace

std::string encode_notification(const Notification& note) {
  std::string out;
  out.reserve(32 + note.tensors.size() * 40);
  put<uint8_t>(out, kVersion);
  put<uint8_t>(out, note.direction == Direction::Backward ? 1 : 0);
  put<uint64_t>(out, note.step);
  put<int32_t>(out, note.stage);
  put<int32_t>(out, note.microbatch);
  put<int32_t>(out, note.source);
  put<uint32_t>(out, static_cast<uint32_t>(note.tensors.size()));
  for (const transport::TensorDescriptor& d : note.tensors) {
    put<uint8_t>(out, d.defined ? 1 : 0);
    put<uint8_t>(out, static_cast<uint8_t>(d.dtype));
    put<uint8_t>(out, static_cast<uint8_t>(d.shape.size()));
    put<uint64_t>(out, d.bytes);
    for (int64_t dim : d.shape) put<int64_t>(out, dim);
  }
  return out;
}

std::string decode_notification(std::string_view bytes, Notification& note) {
  Reader in{bytes};
  const auto version = in.get<uint8_t>();
  const auto direction = in.get<uint8_t>();
  note.step = in.get<uint64_t>();
  note.stage = in.get<int32_t>();
  note.microbatch = in.get<int32_t>();
  note.source = in.get<int32_t>();
  const auto count = in.get<uint32_t>();
  if (in.overrun) return "truncated header (" + std::to_string(bytes.size()) + " bytes)";
  if (version != kVersion) return "version " + std::to_string(version) + ", expected 1";
  if (direction > 1) return "direction " + std::to_string(direction) + " is neither 0 nor 1";
  if (note.stage < 0 || note.microbatch < 0 || note.source < 0)
    return "negative stage, microbatch or source";
  if (count > kMaxWireTensors) return std::to_string(count) + " tensors (limit 4096)";
  note.direction = direction ? Direction::Backward : Direction::Forward;
  note.tensors.assign(count, {});
  for (transport::TensorDescriptor& d : note.tensors) {
    const auto defined = in.get<uint8_t>();
    const auto dtype = in.get<uint8_t>();
    const auto ndim = in.get<uint8_t>();
    d.bytes = in.get<uint64_t>();
    if (in.overrun) return "truncated descriptor";
    if (defined > 1) return "a descriptor's defined flag is " + std::to_string(defined);
    if (dtype > static_cast<uint8_t>(DType::BFloat16))
      return "unknown dtype " + std::to_string(dtype);
    if (ndim > kMaxWireDims) return std::to_string(ndim) + " dimensions (limit 16)";
    d.defined = defined == 1;
    d.dtype = static_cast<DType>(dtype);
    d.shape.resize(ndim);
    uint64_t numel = 1;
    for (int64_t& dim : d.shape) {
      dim = in.get<int64_t>();
      if (in.overrun) return "truncated shape";
      if (dim < 0) return "negative dimension " + std::to_string(dim);
      if (dim != 0 && numel > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(dim))
        return "the shape's element count overflows";
      numel *= static_cast<uint64_t>(dim);
    }
    const uint64_t element = element_size(d.dtype);
    if (d.defined &&
        (numel > std::numeric_limits<uint64_t>::max() / element || numel * element != d.bytes))
      return "a descriptor says " + std::to_string(d.bytes) + " bytes for " +
             std::to_string(numel) + " elements of " + std::to_string(element) + " bytes";
    if (!d.defined && (d.bytes != 0 || ndim != 0)) return "an absent tensor with a shape";
  }
  if (!in.rest.empty()) return std::to_string(in.rest.size()) + " bytes past the end";
  return {};
}

}  // namespace tensorplay::pipelining
