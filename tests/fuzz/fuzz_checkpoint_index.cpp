// libFuzzer target for the layout-free checkpoint index
// (tensorplay/pipelining/checkpoints/checkpoint_index.h), which a loader reads from a shared
// folder. Properties: parsing never crashes or reads out of bounds (ASan, UBSan); what parses names
// only bytes inside its data file and formats back to the same index. Half of the inputs are raw
// text; the other half corrupt a valid index at the positions the bytes name (and fix its checksum
// line half of those times), so the field checks are reached.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "tensorplay/pipelining/checkpoints/checkpoint.h"
#include "tensorplay/pipelining/checkpoints/checkpoint_index.h"
#include "tensorplay/pipelining/checkpoints/checkpoint_io.h"

namespace pp = tensorplay::pipelining;

namespace {

void check(const std::string& text) {
  pp::CheckpointIndex index;
  try {
    index = pp::parse_index(text, "fuzz");
  } catch (const pp::CheckpointError&) {
    return;  // refused; anything else escapes and is reported
  }
  for (const pp::IndexEntry& e : index.entries)
    if (e.offset > index.data_bytes || e.bytes > index.data_bytes - e.offset) std::abort();
  try {
    if (pp::parse_index(pp::format_index(index), "again").entries.size() != index.entries.size())
      std::abort();
  } catch (const pp::CheckpointError&) {
    // a name the parser took but the writer refuses (a control byte) is fine to refuse
  }
}

std::string valid_index() {
  pp::CheckpointIndex index;
  index.step = 7;
  index.num_stages = 2;
  index.stages = {0};
  index.layout = "pp 2 x dp 1";
  index.optimizer = "AdamW";
  index.data_file = "data_s0.bin";
  index.data_bytes = 128;
  pp::IndexEntry e;
  e.name = "blocks.0.weight";
  e.bytes = 64;
  e.dtype = "F32";
  e.shape = {4, 4};
  index.entries = {e};
  e.kind = pp::EntryKind::Optimizer;
  e.key = "exp_avg";
  e.offset = 64;
  index.entries.push_back(e);
  return pp::format_index(index);
}

// The end line's checksum recomputed for the text before it, so a corruption reaches the fields.
std::string with_fixed_checksum(const std::string& text) {
  const size_t end = text.rfind("\nend ");
  if (end == std::string::npos) return text;
  const std::string body = text.substr(0, end + 1);
  const size_t space = text.find(' ', end + 5);
  if (space == std::string::npos) return text;
  char sum[20];
  std::snprintf(sum, sizeof(sum), "%016llx",
                static_cast<unsigned long long>(pp::checkpoint_io::fnv1a64(body)));
  return text.substr(0, space + 1) + sum + "\n";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  if (size == 0 || data[0] % 2 == 0) {
    check(input);
    return 0;
  }
  std::string text = valid_index();
  for (size_t i = 1; i + 1 < size; i += 2)
    text[data[i] * 7919u % text.size()] = static_cast<char>(data[i + 1]);
  check(text);
  check(with_fixed_checksum(text));
  return 0;
}
