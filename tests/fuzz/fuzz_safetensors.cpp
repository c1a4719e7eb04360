// libFuzzer target for the safetensors reader (tensorplay/core/detail/safetensors_format.h), which
// reads files from anywhere. Properties: parsing never crashes or reads out of bounds (ASan,
// UBSan); what parses lies inside the file, every tensor's bytes decode, and the header written
// back for the parsed layout parses to the same layout. Half of the inputs are taken as raw files;
// the other half build a valid file from the next bytes and then corrupt it at the positions the
// rest names, so the fuzzer reaches the layout checks quickly.
#include <cstdint>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensorplay/core/detail/safetensors_format.h"

namespace st = tensorplay::detail;

namespace {

void check(const std::string& bytes) {
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  st::StLayout layout;
  try {
    layout = st::parse_safetensors(data, bytes.size(), "fuzz");
  } catch (const std::runtime_error&) {
    return;  // refused; anything else escapes and is reported
  }
  if (layout.data_start + layout.data_size != bytes.size()) std::abort();
  std::vector<float> values;
  for (const st::StEntry& e : layout.entries) {
    if (e.begin > e.end || e.end > layout.data_size) std::abort();
    values.resize((e.end - e.begin) / st::st_element_size(e.dtype));
    st::st_decode_to_float(e.dtype, data + layout.data_start + e.begin, values.size(),
                           values.data());
  }
  // The same layout, written back, reads back the same.
  const std::string again = st::encode_safetensors_header(layout.entries, layout.metadata) +
                            bytes.substr(static_cast<size_t>(layout.data_start));
  st::StLayout back = st::parse_safetensors(reinterpret_cast<const unsigned char*>(again.data()),
                                            again.size(), "fuzz again");
  if (back.metadata != layout.metadata || back.entries.size() != layout.entries.size())
    std::abort();
  for (size_t i = 0; i < back.entries.size(); ++i) {
    const st::StEntry &a = layout.entries[i], &b = back.entries[i];
    if (a.name != b.name || a.dtype != b.dtype || a.shape != b.shape || a.begin != b.begin ||
        a.end != b.end)
      std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    check(rest);
    return 0;
  }
  size_t at = 0;
  auto take = [&](size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < n && at < rest.size(); ++i)
      v = (v << 8) | static_cast<uint8_t>(rest[at++]);
    return v;
  };
  // A valid file: up to four tensors of rank up to 3, dims up to 4.
  std::vector<st::StEntry> entries;
  const int tensors = static_cast<int>(take(1) % 5);
  for (int t = 0; t < tensors; ++t) {
    st::StEntry e;
    e.name = std::string(1, static_cast<char>('a' + take(1) % 26)) + std::to_string(t);
    e.dtype = static_cast<st::StDType>(take(1) % 3);
    const int rank = static_cast<int>(take(1) % 4);
    for (int k = 0; k < rank; ++k) e.shape.push_back(static_cast<int64_t>(take(1) % 5));
    entries.push_back(e);
  }
  st::st_assign_offsets(entries);
  std::map<std::string, std::string> metadata;
  if (take(1) % 2) metadata["format"] = "pt";
  std::string bytes = st::encode_safetensors_header(entries, metadata);
  if (!entries.empty()) bytes.append(entries.back().end, '\x3f');
  check(bytes);
  // Then corrupted: each 3 bytes name a position and an operation.
  while (rest.size() - at >= 3 && !bytes.empty()) {
    const size_t pos = take(2) % (bytes.size() + 1);
    const auto op = static_cast<uint8_t>(take(1));
    if (op % 3 == 0 && pos < bytes.size())
      bytes[pos] = static_cast<char>(op);
    else if (op % 3 == 1)
      bytes.resize(pos);
    else
      bytes.insert(pos, 1, static_cast<char>(op));
    check(bytes);
  }
  return 0;
}
