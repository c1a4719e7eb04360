// StepReader: one layout-free checkpoint step's entries by (kind, name, key), and reading them
// from the data files, each checked against its checksum. Used by the loading side only.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "tensorplay/pipelining/checkpoints/named_checkpoint_steps.h"

namespace tensorplay::pipelining {

/// One step's entries by (kind, name, key), the lowest stage's writer first when several saved
/// one (optimizer options, generators), and reads from the data files.
class StepReader {
 public:
  /// An entry and the index (into step.indexes) that names it.
  struct Located {
    size_t index = 0;
    const IndexEntry* entry = nullptr;
  };
  explicit StepReader(const NamedStep& step);
  ~StepReader();
  StepReader(const StepReader&) = delete;
  StepReader& operator=(const StepReader&) = delete;

  /// The entry of (kind, name, key), or null.
  const Located* find(EntryKind kind, const std::string& name, const std::string& key = "") const;
  /// Every entry of `kind`, ordered by (name, key).
  std::vector<const Located*> of_kind(EntryKind kind) const;
  /// The optimizer state entries of `parameter` (none: empty).
  const std::vector<const Located*>& state_of(const std::string& parameter) const;
  bool has_optimizer_state() const { return !by_parameter_.empty(); }

  /// The entry's tensor on the host. Throws CheckpointError naming the tensor and file when the
  /// bytes cannot be read or their checksum differs from the index's.
  Tensor read(const Located& at);
  /// The entry's raw bytes, checked as read() checks them.
  std::string read_bytes(const Located& at);
  /// Bytes read from the data files so far.
  uint64_t bytes_read() const { return bytes_read_; }
  /// "'<data file>'" of the entry, for messages.
  std::string where(const Located& at) const;

 private:
  std::string data_path(size_t i) const;
  int open_data(size_t i);
  void fill(const Located& at, void* out);

  const NamedStep& step_;
  std::map<std::tuple<EntryKind, std::string, std::string>, Located> entries_;
  std::map<std::string, std::vector<const Located*>> by_parameter_;
  std::vector<int> fds_;
  uint64_t bytes_read_ = 0;
};

}  // namespace tensorplay::pipelining
