// TensorBoard's event files, written without TensorFlow or a protocol-buffer library: TFRecord
// framing (the record's length, a masked CRC32C of the length, the record, a masked CRC32C of the
// record) around Event messages encoded here (wall time, step, and a Summary of scalar values),
// so that `tensorboard --logdir DIR` shows train_gpt's scalars.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace train_gpt {

/// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) of `n` bytes: "123456789" gives
/// 0xE3069283.
uint32_t crc32c(const void* data, size_t n);

/// TFRecord's masked CRC: the CRC rotated right by 15 bits plus 0xA282EAD8.
uint32_t masked_crc32c(const void* data, size_t n);

/// One TFRecord: the framing around `record`.
std::string tfrecord(const std::string& record);

/// An Event message (tensorflow/core/util/event.proto) holding `scalars` as simple values of
/// step `step`, written at `wall_time` (seconds since the epoch).
std::string scalar_event(double wall_time, int64_t step,
                         const std::vector<std::pair<std::string, double>>& scalars);

/// An events file in `dir` (events.out.tfevents.SECONDS.HOST.PID), begun with the file-version
/// event TensorBoard expects; each add_scalars appends one event and flushes it.
class EventFile {
 public:
  explicit EventFile(const std::string& dir);
  /// Appends step `step`'s scalars (tag, value). Throws std::runtime_error when the file cannot
  /// be written.
  void add_scalars(int64_t step, const std::vector<std::pair<std::string, double>>& scalars);
  const std::string& path() const { return path_; }

 private:
  void append(const std::string& record);
  std::string path_;
};

}  // namespace train_gpt
