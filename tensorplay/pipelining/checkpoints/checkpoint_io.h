// File handling shared by the checkpoint formats: step folders, atomic writes (temporary file,
// fsync, rename), the temporary files of writers that died, and the checksums of checkpoint bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tensorplay/core/random.h"

namespace tensorplay::pipelining::checkpoint_io {

/// "dir/step_00000120".
std::string step_folder(const std::string& dir, int64_t step);
/// Parses a folder name "step_<digits>" into `step`; false for any other name.
bool parse_step_name(const std::string& name, int64_t& step);

/// FNV-1a, 64 bits, one byte at a time (the version-2 markers' checksum).
uint64_t fnv1a64(const std::string& bytes);
/// An FNV-1a-style hash over 64-bit little-endian words in four lanes (the tail bytewise): many
/// times faster than fnv1a64, and enough to tell a damaged tensor from a whole one (not an
/// adversary).
uint64_t word_checksum(const void* data, size_t bytes);

/// Throws CheckpointError for errno after `what` failed on `path` (with what to do when the disk
/// or the file-size limit is full).
[[noreturn]] void throw_errno(const std::string& what, const std::string& path);

/// Flushes a folder's entries to disk.
void fsync_folder(const std::string& folder);

/// Writes the concatenation of `parts` (pointer, length) to `path` all or nothing: a temporary
/// file "<path>.tmp.<host>.<pid>", fsync, rename over `path`, fsync of the folder. A write that
/// fails (a full disk, the file-size limit) removes its temporary file and throws
/// CheckpointError naming `path`.
void write_atomically(const std::string& path,
                      const std::vector<std::pair<const void*, size_t>>& parts);
inline void write_atomically(const std::string& path, const std::string& bytes) {
  write_atomically(path, {{bytes.data(), bytes.size()}});
}

/// The whole file; throws CheckpointError naming it when it cannot be opened.
std::string read_whole(const std::string& path);

/// A generator's state as text (under its lock).
std::string generator_state(Generator& generator);
/// Sets `generator` to a state generator_state wrote; false (and no change) when it does not
/// parse.
bool restore_generator_state(Generator& generator, const std::string& state);

/// Removes the temporary files of writers that died (a process of this host that no longer
/// exists) under `dir` and its step folders. Best effort.
void remove_dead_writers_files(const std::string& dir);

}  // namespace tensorplay::pipelining::checkpoint_io
