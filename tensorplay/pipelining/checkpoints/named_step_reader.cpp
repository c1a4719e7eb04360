// StepReader: a step's entries by name, read with pread from the writers' data files and checked
// against the index's checksums.
#include "tensorplay/pipelining/checkpoints/named_step_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "tensorplay/pipelining/checkpoints/checkpoint_error.h"
#include "tensorplay/pipelining/checkpoints/checkpoint_io.h"

namespace tensorplay::pipelining {

namespace fs = std::filesystem;

StepReader::StepReader(const NamedStep& step) : step_(step), fds_(step.indexes.size(), -1) {
  for (size_t i = 0; i < step.indexes.size(); ++i)
    for (const IndexEntry& e : step.indexes[i].entries)
      entries_.try_emplace({e.kind, e.name, e.key}, Located{i, &e});
  for (const auto& [key, at] : entries_)
    if (std::get<0>(key) == EntryKind::Optimizer) by_parameter_[at.entry->name].push_back(&at);
}

StepReader::~StepReader() {
  for (int fd : fds_)
    if (fd >= 0) ::close(fd);
}

const StepReader::Located* StepReader::find(EntryKind kind, const std::string& name,
                                            const std::string& key) const {
  auto it = entries_.find({kind, name, key});
  return it == entries_.end() ? nullptr : &it->second;
}

std::vector<const StepReader::Located*> StepReader::of_kind(EntryKind kind) const {
  std::vector<const Located*> all;
  for (const auto& [key, at] : entries_)
    if (std::get<0>(key) == kind) all.push_back(&at);
  return all;
}

const std::vector<const StepReader::Located*>& StepReader::state_of(
    const std::string& parameter) const {
  static const std::vector<const Located*> none;
  auto it = by_parameter_.find(parameter);
  return it == by_parameter_.end() ? none : it->second;
}

Tensor StepReader::read(const Located& at) {
  const IndexEntry& e = *at.entry;
  Tensor host = empty(e.shape, {.dtype = dtype_of_word(e.dtype, where(at)), .device = cpu()});
  fill(at, host.raw_data());
  return host;
}

std::string StepReader::read_bytes(const Located& at) {
  std::string bytes(at.entry->bytes, '\0');
  fill(at, bytes.data());
  return bytes;
}

std::string StepReader::where(const Located& at) const {
  std::string text(1, '\'');
  text += data_path(at.index);
  text += '\'';
  return text;
}

std::string StepReader::data_path(size_t i) const {
  return (fs::path(step_.folder) / step_.indexes[i].data_file).string();
}

int StepReader::open_data(size_t i) {
  if (fds_[i] >= 0) return fds_[i];
  const std::string path = data_path(i);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) checkpoint_io::throw_errno("open", path);
  fds_[i] = fd;
  struct stat st {};
  if (::fstat(fd, &st) != 0) checkpoint_io::throw_errno("inspect", path);
  if (static_cast<uint64_t>(st.st_size) != step_.indexes[i].data_bytes)
    throw CheckpointError("checkpoint data file '" + path + "' is truncated or damaged: " +
                          std::to_string(st.st_size) + " bytes, its index '" + step_.paths[i] +
                          "' says " + std::to_string(step_.indexes[i].data_bytes) +
                          " (pass an earlier step to resume)");
  return fd;
}

void StepReader::fill(const Located& at, void* out) {
  const IndexEntry& e = *at.entry;
  const int fd = open_data(at.index);
  uint64_t done = 0;
  while (done < e.bytes) {
    const ssize_t n = ::pread(fd, static_cast<char*>(out) + done, e.bytes - done,
                              static_cast<off_t>(e.offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      checkpoint_io::throw_errno("read tensor '" + e.name + "' from", data_path(at.index));
    done += static_cast<uint64_t>(n);
  }
  bytes_read_ += e.bytes;
  if (checkpoint_io::word_checksum(out, e.bytes) != e.checksum)
    throw CheckpointError("checkpoint: tensor '" + e.name + (e.key.empty() ? "" : "." + e.key) +
                          "' in " + where(at) +
                          " is corrupted: its checksum differs from its index's (pass an "
                          "earlier step to resume)");
}

}  // namespace tensorplay::pipelining
