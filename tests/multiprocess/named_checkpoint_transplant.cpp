// Sets the tensors of a layout-free checkpoint
// (tensorplay/pipelining/checkpoints/named_checkpoint.h) to another one's, by kind and name,
// keeping the target's writers, files and layout: the reshard matrix's reference resumes layout B
// from a checkpoint that B itself wrote, holding layout A's state exactly, without the loader
// mapping one layout onto another. Prints how many tensors changed, by kind. Usage:
// named_checkpoint_transplant FROM_DIR TO_DIR STEP
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "tensorplay/pipelining/checkpoints/checkpoint.h"
#include "tensorplay/pipelining/checkpoints/checkpoint_index.h"
#include "tensorplay/pipelining/checkpoints/checkpoint_io.h"

namespace fs = std::filesystem;
namespace pp = tensorplay::pipelining;
namespace io = tensorplay::pipelining::checkpoint_io;

namespace {

using Key = std::tuple<pp::EntryKind, std::string, std::string>;

struct Writer {
  fs::path index_path;
  pp::CheckpointIndex index;
  std::string data;
};

std::vector<Writer> read_writers(const std::string& dir, int64_t step) {
  std::vector<Writer> all;
  const fs::path folder = io::step_folder(dir, step);
  for (const auto& file : fs::directory_iterator(folder)) {
    const std::string name = file.path().filename().string();
    if (name.rfind("index_s", 0) != 0 || file.path().extension() != ".txt") continue;
    Writer w{file.path(), pp::parse_index(io::read_whole(file.path().string()), name), {}};
    w.data = io::read_whole((folder / w.index.data_file).string());
    all.push_back(std::move(w));
  }
  if (all.empty()) throw std::runtime_error("no index under " + folder.string());
  std::sort(all.begin(), all.end(), [](const Writer& a, const Writer& b) {
    return a.index.stages.front() < b.index.stages.front();
  });
  return all;
}

// Every entry of `writers` by kind and name, with its bytes: the lowest stage's writer's where
// several saved one (optimizer options, generators), as load_named_checkpoint reads them.
std::map<Key, std::pair<pp::IndexEntry, std::string>> entries(const std::vector<Writer>& writers) {
  std::map<Key, std::pair<pp::IndexEntry, std::string>> all;
  for (const Writer& w : writers)
    for (const pp::IndexEntry& e : w.index.entries)
      all.try_emplace({e.kind, e.name, e.key}, e, w.data.substr(e.offset, e.bytes));
  return all;
}

// Rewrites one writer of the target with the source's bytes of each of its entries; counts the
// entries that changed in `changed` by kind.
void transplant(Writer& to, const std::map<Key, std::pair<pp::IndexEntry, std::string>>& from,
                std::map<std::string, int>& changed) {
  std::string data;
  for (pp::IndexEntry& e : to.index.entries) {
    const auto it = from.find({e.kind, e.name, e.key});
    if (it == from.end())
      throw std::runtime_error(std::string(pp::to_string(e.kind)) + " '" + e.name + " " + e.key +
                               "' is missing in the source checkpoint");
    const auto& [source, bytes] = it->second;
    if (source.dtype != e.dtype || (e.dtype != pp::kByteDType && source.shape != e.shape))
      throw std::runtime_error("'" + e.name + " " + e.key + "' has another shape or dtype");
    if (to.data.compare(e.offset, e.bytes, bytes) != 0) ++changed[pp::to_string(e.kind)];
    data.resize((data.size() + 63) / 64 * 64, '\0');
    e.offset = data.size();
    e.bytes = bytes.size();
    e.shape = source.shape;
    e.checksum = io::word_checksum(bytes.data(), bytes.size());
    data += bytes;
  }
  to.index.data_bytes = data.size();
  io::write_atomically((to.index_path.parent_path() / to.index.data_file).string(), data);
  io::write_atomically(to.index_path.string(), pp::format_index(to.index));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: named_checkpoint_transplant FROM_DIR TO_DIR STEP\n");
    return 2;
  }
  try {
    const int64_t step = std::stoll(argv[3]);
    const auto from_writers = read_writers(argv[1], step);
    const auto from = entries(from_writers);
    auto to = read_writers(argv[2], step);
    const size_t count = entries(to).size();
    if (count != from.size())
      throw std::runtime_error("the checkpoints hold " + std::to_string(from.size()) + " and " +
                               std::to_string(count) + " distinct tensors");
    std::map<std::string, int> changed;
    for (Writer& w : to) {
      if (w.index.samples_consumed != from_writers.front().index.samples_consumed)
        throw std::runtime_error("the checkpoints consumed different numbers of samples");
      transplant(w, from, changed);
    }
    std::string kinds;
    for (const auto& [kind, n] : changed) kinds += " " + kind + " " + std::to_string(n);
    std::printf("%zu tensors (%zu writers to %zu) set to the source's; changed:%s\n", count,
                from_writers.size(), to.size(), kinds.empty() ? " none" : kinds.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
}
