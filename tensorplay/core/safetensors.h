// safetensors files, the format Hugging Face checkpoints travel in: saving a StateDict as one file
// or as shards with a `model.safetensors.index.json`, and loading them back through a memory map.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "tensorplay/core/state_dict.h"

namespace tensorplay {

/// The string-to-string "__metadata__" object of a safetensors file (transformers writes
/// {"format": "pt"}).
using SafetensorsMetadata = std::map<std::string, std::string>;

/// The format. Every integer is little-endian.
///
///   8 bytes (u64)  N, the header length (at most 100,000,000)
///   N bytes        the header: a UTF-8 JSON object mapping each tensor's name to
///                  {"dtype": "F32" | "BF16" | "F16", "shape": [d0, d1, ...],
///                   "data_offsets": [begin, end]}, plus an optional "__metadata__" object of
///                  strings; padded with spaces to a multiple of 8 bytes
///   the rest       the tensors' bytes, row-major; each tensor's bytes are [begin, end) counted
///                  from the end of the header, and the tensors tile the rest of the file with
///                  no gap, no overlap and nothing after them
///
/// Writing follows the reference writer byte for byte: tensors sorted by dtype (float32 before
/// bfloat16) then by name, compact JSON, "__metadata__" first.
///
/// Reading maps the file and checks every field before using it: the header length against the
/// file and the limit, UTF-8, JSON syntax, a repeated name, each tensor's dtype (F32, BF16 and
/// F16; F16 becomes float32, other dtypes are refused), shape, offsets, that the shape's byte
/// count equals its offsets' and the tiling. A failure is a std::runtime_error starting
/// "safetensors: PATH:" and naming the tensor and what is wrong; nothing is returned unless the
/// whole header checked out.

/// Options for loading.
struct SafetensorsLoadOptions {
  /// When set, only tensors whose name it accepts are read (all are still checked); a pipeline
  /// stage reads its own tensors this way.
  std::function<bool(const std::string& name)> select;
  /// When not null, receives the file's "__metadata__" (empty when it has none).
  SafetensorsMetadata* metadata = nullptr;
};

/// Writes `tensors` (float32 or bfloat16, on any device; copied to the host to be written) to
/// `path`, created or truncated. Throws std::invalid_argument for an undefined tensor, a name
/// that is not UTF-8 or is "__metadata__"; std::runtime_error naming the path on I/O failure.
void save_safetensors(const StateDict& tensors, const std::string& path,
                      const SafetensorsMetadata& metadata = {});

/// Reads a safetensors file into host tensors, in the order of their bytes in the file
/// (float32 and bfloat16 as stored; float16 widened to float32). Throws std::runtime_error
/// naming the path and what is wrong (see above).
StateDict load_safetensors(const std::string& path, const SafetensorsLoadOptions& options = {});

/// The index file of a sharded checkpoint.
inline constexpr const char* kSafetensorsIndexName = "model.safetensors.index.json";
/// The single-file checkpoint's name in a model folder.
inline constexpr const char* kSafetensorsSingleName = "model.safetensors";

/// Writes `tensors` into `folder` (created if missing) as transformers' save_pretrained does:
/// one `model.safetensors` when they fit in `max_shard_bytes`, else shards
/// `model-00001-of-0000K.safetensors` (tensors in order, a new shard when the next tensor would
/// pass the limit; a tensor larger than the limit gets a shard of its own) and
/// `model.safetensors.index.json` with {"metadata": {"total_size": bytes}, "weight_map": {name:
/// shard}}. Each file's metadata is `metadata`.
void save_safetensors_folder(const StateDict& tensors, const std::string& folder,
                             uint64_t max_shard_bytes = uint64_t{5} << 30,
                             const SafetensorsMetadata& metadata = {{"format", "pt"}});

/// Reads a sharded checkpoint through its index (`model.safetensors.index.json`): every shard
/// named in the weight map (a shard name is a file beside the index), each tensor from the shard
/// the map names. Throws std::runtime_error naming a missing shard and the tensors it should
/// hold, a tensor the map names but its shard lacks, or one a shard holds that the map does not
/// list. With options.select, only the shards holding selected tensors are opened.
/// options.metadata receives the index's "metadata" entries that are strings or numbers.
StateDict load_safetensors_index(const std::string& index_path,
                                 const SafetensorsLoadOptions& options = {});

/// Reads a model folder's weights: `model.safetensors`, else the sharded index; throws
/// std::runtime_error naming the folder when it holds neither.
StateDict load_safetensors_folder(const std::string& folder,
                                  const SafetensorsLoadOptions& options = {});

}  // namespace tensorplay
