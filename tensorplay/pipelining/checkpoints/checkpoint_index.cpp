// Layout-free checkpoint index: formatting and strict parsing of the text file.
#include "tensorplay/pipelining/checkpoints/checkpoint_index.h"

#include <cstdio>
#include <limits>
#include <sstream>

#include "tensorplay/pipelining/checkpoints/checkpoint_error.h"
#include "tensorplay/pipelining/checkpoints/checkpoint_io.h"

namespace tensorplay::pipelining {
namespace {

constexpr const char* kMagic = "tensorplay-checkpoint 3";
constexpr size_t kMaxRank = 64;
constexpr size_t kMaxStages = 1 << 16;

std::string hex(uint64_t value) {
  char text[20];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(value));
  return text;
}

bool is_word(const std::string& text) {
  if (text.empty()) return false;
  for (unsigned char c : text)
    if (c <= ' ' || c == 0x7f) return false;
  return true;
}

void check_word(const std::string& text, const char* what) {
  if (!is_word(text))
    throw CheckpointError(std::string("checkpoint: ") + what + " '" + text +
                          "' is empty or holds a space or control character; a layout-free "
                          "checkpoint names tensors and generators by single words");
}

EntryKind kind_of_word(const std::string& word, const std::string& where) {
  for (EntryKind kind :
       {EntryKind::Model, EntryKind::Optimizer, EntryKind::Option, EntryKind::Generator})
    if (word == to_string(kind)) return kind;
  throw CheckpointError(where + ": unknown entry kind '" + word + "'");
}

// Reads the fields of one line, throwing a message that names the index and line on failure.
struct LineReader {
  std::istringstream in;
  std::string where;
  LineReader(const std::string& line, std::string at) : in(line), where(std::move(at)) {}
  std::string word(const char* what) {
    std::string w;
    if (!(in >> w)) throw CheckpointError(where + ": no " + what);
    return w;
  }
  uint64_t number(const char* what) {
    const std::string w = word(what);
    if (w.find_first_not_of("0123456789") != std::string::npos || w.size() > 19)
      throw CheckpointError(where + ": " + what + " '" + w + "' is not a whole number");
    return std::stoull(w);
  }
  uint64_t hex_number(const char* what) {
    const std::string w = word(what);
    if (w.size() != 16 || w.find_first_not_of("0123456789abcdef") != std::string::npos)
      throw CheckpointError(where + ": " + what + " '" + w + "' is not 16 hex digits");
    return std::stoull(w, nullptr, 16);
  }
  std::string rest() {
    std::string text;
    std::getline(in >> std::ws, text);
    return text;
  }
  void expect(const char* key) {
    if (word(key) != key) throw CheckpointError(where + ": expected '" + key + "'");
  }
};

IndexEntry parse_entry(LineReader& r) {
  IndexEntry e;
  e.kind = kind_of_word(r.word("kind"), r.where);
  e.name = r.word("name");
  e.key = r.word("key");
  if (e.key == "-") e.key.clear();
  e.offset = r.number("offset");
  e.bytes = r.number("byte count");
  e.dtype = r.word("dtype");
  const uint64_t rank = r.number("rank");
  if (rank > kMaxRank) throw CheckpointError(r.where + ": rank " + std::to_string(rank));
  for (uint64_t d = 0; d < rank; ++d) {
    const uint64_t dim = r.number("dimension");
    if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max() / 2))
      throw CheckpointError(r.where + ": dimension " + std::to_string(dim) + " is too large");
    e.shape.push_back(static_cast<int64_t>(dim));
  }
  e.checksum = r.hex_number("checksum");
  const uint64_t element =
      e.dtype == kByteDType ? 1 : element_size(dtype_of_word(e.dtype, r.where));
  if (e.bytes != static_cast<uint64_t>(numel(e.shape)) * element)
    throw CheckpointError(r.where + ": tensor '" + e.name + "' has " + std::to_string(e.bytes) +
                          " bytes, its shape " + tensorplay::to_string(e.shape) + " needs " +
                          std::to_string(numel(e.shape) * element));
  return e;
}

}  // namespace

const char* to_string(EntryKind kind) {
  switch (kind) {
    case EntryKind::Model:
      return "model";
    case EntryKind::Optimizer:
      return "optim";
    case EntryKind::Option:
      return "option";
    case EntryKind::Generator:
      return "rng";
  }
  return "?";
}

const char* dtype_word(DType dtype) { return dtype == DType::Float32 ? "F32" : "BF16"; }

DType dtype_of_word(const std::string& word, const std::string& what) {
  if (word == "F32") return DType::Float32;
  if (word == "BF16") return DType::BFloat16;
  throw CheckpointError(what + ": unknown dtype '" + word + "' (F32 and BF16 are known)");
}

std::string format_index(const CheckpointIndex& index) {
  std::ostringstream out;
  out << kMagic << "\nstep " << index.step << "\nsamples " << index.samples_consumed
      << "\nnum_stages " << index.num_stages << "\nstages";
  for (int s : index.stages) out << ' ' << s;
  check_word(index.optimizer, "optimizer type");
  check_word(index.data_file, "data file");
  if (index.layout.find('\n') != std::string::npos)
    throw CheckpointError("checkpoint: the layout description holds a line break");
  out << "\nlayout " << (index.layout.empty() ? "-" : index.layout) << "\noptimizer "
      << index.optimizer << "\ndata " << index.data_file << ' ' << index.data_bytes << "\nentries "
      << index.entries.size() << '\n';
  for (const IndexEntry& e : index.entries) {
    check_word(e.name, "tensor name");
    if (!e.key.empty()) check_word(e.key, "state name");
    out << "e " << to_string(e.kind) << ' ' << e.name << ' ' << (e.key.empty() ? "-" : e.key) << ' '
        << e.offset << ' ' << e.bytes << ' ' << e.dtype << ' ' << e.shape.size();
    for (int64_t d : e.shape) out << ' ' << d;
    out << ' ' << hex(e.checksum) << '\n';
  }
  std::string text = out.str();
  return text + "end " + std::to_string(index.entries.size()) + ' ' +
         hex(checkpoint_io::fnv1a64(text)) + '\n';
}

namespace {

// The index's lines before its end line, once the header and the end line's checksum check out;
// `count` gets the end line's entry count. `damaged` names the index in errors.
std::string checked_body(const std::string& text, const std::string& damaged, uint64_t& count) {
  if (text.rfind(kMagic, 0) != 0)
    throw CheckpointError(damaged + " is not a layout-free checkpoint index (no '" + kMagic +
                          "' header)");
  const size_t end = text.rfind("\nend ");
  if (end == std::string::npos || text.empty() || text.back() != '\n')
    throw CheckpointError(damaged + " is truncated (no end line): pass an earlier step");
  LineReader last(text.substr(end + 1), damaged + ", end line");
  last.expect("end");
  count = last.number("entry count");
  std::string body = text.substr(0, end + 1);
  if (last.hex_number("checksum") != checkpoint_io::fnv1a64(body))
    throw CheckpointError(damaged + " is damaged: its checksum differs (pass an earlier step)");
  return body;
}

}  // namespace

CheckpointIndex parse_index(const std::string& text, const std::string& path) {
  const std::string damaged = "checkpoint index '" + path + "'";
  uint64_t count = 0;
  std::istringstream lines(checked_body(text, damaged, count));
  std::string line;
  std::getline(lines, line);  // the magic
  CheckpointIndex index;
  int number = 1;
  auto next = [&](const char* key) {
    ++number;
    if (!std::getline(lines, line)) throw CheckpointError(damaged + ": no '" + key + "' line");
    LineReader r(line, damaged + ", line " + std::to_string(number));
    r.expect(key);
    return r;
  };
  index.step = static_cast<int64_t>(next("step").number("step"));
  index.samples_consumed = static_cast<int64_t>(next("samples").number("sample count"));
  const uint64_t num_stages = next("num_stages").number("stage count");
  if (num_stages < 1 || num_stages > kMaxStages)
    throw CheckpointError(damaged + ": stage count " + std::to_string(num_stages) +
                          " is out of range");
  index.num_stages = static_cast<int>(num_stages);
  {
    LineReader r = next("stages");
    while (!(r.in >> std::ws).eof() && index.stages.size() < kMaxStages)
      index.stages.push_back(static_cast<int>(r.number("stage")));
    if (index.stages.empty()) throw CheckpointError(r.where + ": no stage");
  }
  index.layout = next("layout").rest();
  index.optimizer = next("optimizer").word("optimizer type");
  {
    LineReader r = next("data");
    index.data_file = r.word("data file");
    index.data_bytes = r.number("data size");
  }
  if (next("entries").number("entry count") != count)
    throw CheckpointError(damaged + ": its entry count differs from its end line's");
  for (uint64_t i = 0; i < count; ++i) {
    LineReader r = next("e");
    index.entries.push_back(parse_entry(r));
    const IndexEntry& e = index.entries.back();
    if (e.offset > index.data_bytes || e.bytes > index.data_bytes - e.offset)
      throw CheckpointError(r.where + ": tensor '" + e.name + "' lies past the data file's " +
                            std::to_string(index.data_bytes) + " bytes");
  }
  for (int s : index.stages)
    if (s < 0 || s >= index.num_stages)
      throw CheckpointError(damaged + ": stage " + std::to_string(s) + " is not in [0, " +
                            std::to_string(index.num_stages) + ")");
  return index;
}

}  // namespace tensorplay::pipelining
