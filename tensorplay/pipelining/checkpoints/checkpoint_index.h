// The index of a layout-free checkpoint (tensorplay/pipelining/checkpoints/named_checkpoint.h): for
// every tensor a writer saved, its kind, name, file, offset, shape, dtype and checksum, as a text
// file written last.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensorplay/core/dtype.h"
#include "tensorplay/core/shape.h"

namespace tensorplay::pipelining {

/// What a tensor of a layout-free checkpoint is.
enum class EntryKind {
  Model,      ///< a parameter or persistent buffer, by the model's qualified name
  Optimizer,  ///< a parameter's optimizer state: `name` the parameter, `key` the state (exp_avg)
  Option,     ///< an optimizer hyper-parameter: `name` the option (lr)
  Generator,  ///< a generator's state (text bytes), by its stage-independent name
};

/// "model", "optim", "option" or "rng" (the index's words).
const char* to_string(EntryKind kind);

/// Bytes of kind Generator entries have this element type (one byte each).
inline constexpr const char* kByteDType = "U8";

/// One tensor in a data file.
struct IndexEntry {
  EntryKind kind = EntryKind::Model;
  std::string name;
  std::string key;  ///< Optimizer entries only ("" otherwise)
  uint64_t offset = 0, bytes = 0;
  std::string dtype;  ///< "F32", "BF16" or kByteDType
  Shape shape;
  uint64_t checksum = 0;  ///< checkpoint_io::word_checksum of the bytes
};

/// One writer's index: what it saved of step `step` and where.
struct CheckpointIndex {
  int64_t step = 0;
  /// Samples of the global data sequence consumed when the step was saved.
  int64_t samples_consumed = 0;
  /// The writer's pipeline: its stage count, the stages this index covers, and a description of
  /// its layout ("pp 2 x dp 2") for messages.
  int num_stages = 0;
  std::vector<int> stages;
  std::string layout;
  std::string optimizer;  ///< Optimizer::type_name()
  std::string data_file;  ///< beside the index
  uint64_t data_bytes = 0;
  std::vector<IndexEntry> entries;
};

/// The index as text: a header line, one line per field and entry, and a last line holding the
/// entry count and a checksum of every byte before it (so a truncated index is recognised).
std::string format_index(const CheckpointIndex& index);

/// Parses format_index's text; throws CheckpointError naming `path` and the line when the text
/// is truncated, damaged or not an index.
CheckpointIndex parse_index(const std::string& text, const std::string& path);

/// "F32"/"BF16" of a dtype, and back (throws CheckpointError naming `what` for another word).
const char* dtype_word(DType dtype);
DType dtype_of_word(const std::string& word, const std::string& what);

}  // namespace tensorplay::pipelining
