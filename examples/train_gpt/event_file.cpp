// TensorBoard event files (event_file.h).
#include "event_file.h"

#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace train_gpt {
namespace {

// The byte-at-a-time table of the reflected Castagnoli polynomial.
const std::array<uint32_t, 256>& crc32c_table() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  return table;
}

void put_le(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

// Protocol-buffer wire format: a varint, a field's key, a length-delimited field.
void put_varint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

void put_key(std::string& out, int field, int wire_type) {
  put_varint(out, static_cast<uint64_t>(field) << 3 | static_cast<uint64_t>(wire_type));
}

void put_bytes(std::string& out, int field, const std::string& bytes) {
  put_key(out, field, 2);
  put_varint(out, bytes.size());
  out += bytes;
}

void put_double(std::string& out, int field, double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  put_key(out, field, 1);
  put_le(out, bits, 8);
}

void put_float(std::string& out, int field, float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  put_key(out, field, 5);
  put_le(out, bits, 4);
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

}  // namespace

uint32_t crc32c(const void* data, size_t n) {
  const auto& table = crc32c_table();
  const auto* bytes = static_cast<const unsigned char*>(data);
  uint32_t crc = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) crc = table[(crc ^ bytes[i]) & 0xff] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(const void* data, size_t n) {
  const uint32_t crc = crc32c(data, n);
  return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u;
}

std::string tfrecord(const std::string& record) {
  std::string out;
  std::string length;
  put_le(length, record.size(), 8);
  out += length;
  put_le(out, masked_crc32c(length.data(), length.size()), 4);
  out += record;
  put_le(out, masked_crc32c(record.data(), record.size()), 4);
  return out;
}

std::string scalar_event(double wall_time, int64_t step,
                         const std::vector<std::pair<std::string, double>>& scalars) {
  // Event { double wall_time = 1; int64 step = 2; Summary summary = 5; }
  // Summary { repeated Value value = 1; }  Value { string tag = 1; float simple_value = 2; }
  std::string summary;
  for (const auto& [tag, value] : scalars) {
    std::string v;
    put_bytes(v, 1, tag);
    put_float(v, 2, static_cast<float>(value));
    put_bytes(summary, 1, v);
  }
  std::string event;
  put_double(event, 1, wall_time);
  put_key(event, 2, 0);
  put_varint(event, static_cast<uint64_t>(step));
  put_bytes(event, 5, summary);
  return event;
}

EventFile::EventFile(const std::string& dir) {
  const double now = now_seconds();
  path_ = (std::filesystem::path(dir) /
           ("events.out.tfevents." + std::to_string(static_cast<long long>(now)) + "." +
            host_name() + "." + std::to_string(::getpid())))
              .string();
  std::ofstream(path_, std::ios::binary | std::ios::trunc);
  // Event { wall_time = 1; string file_version = 3; }: TensorBoard reads "brain.Event:2" files.
  std::string version;
  put_double(version, 1, now);
  put_bytes(version, 3, "brain.Event:2");
  append(version);
}

void EventFile::add_scalars(int64_t step,
                            const std::vector<std::pair<std::string, double>>& scalars) {
  append(scalar_event(now_seconds(), step, scalars));
}

void EventFile::append(const std::string& record) {
  std::ofstream out(path_, std::ios::binary | std::ios::app);
  out << tfrecord(record);
  out.flush();
  if (!out) throw std::runtime_error("cannot write '" + path_ + "'");
}

}  // namespace train_gpt
