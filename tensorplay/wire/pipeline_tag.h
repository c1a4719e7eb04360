// The pipeline's transfer keys: how a boundary value of one microbatch of one step is named on a
// channel (step window, receiving stage, direction, microbatch), with the limits, in one place.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "tensorplay/transport/collective_key.h"
#include "tensorplay/transport/transfer_key.h"

namespace tensorplay::pipelining {

/// Which way a transfer goes through the pipeline.
enum class Direction : uint8_t { Forward, Backward };

/// Bits of the step a key keeps: a transfer left over from a failed step matches again only
/// kStepWindow steps later.
inline constexpr int kStepWindowBits = 12;
inline constexpr uint64_t kStepWindow = uint64_t{1} << kStepWindowBits;
/// Bits of the stream above the channel's transport::kStreamBits a key keeps: a stream's group id
/// (GroupRuntime::group_id), so that schedules of two groups never share keys.
inline constexpr int kPipelineGroupBits = 8;
/// Bits of the receiving stage.
inline constexpr int kStageBits = 10;
/// The most stages a schedule across processes holds (stages 0 to kMaxPipelineStages - 1).
inline constexpr int kMaxPipelineStages = (1 << kStageBits) - 1;
/// Bits of the microbatch.
inline constexpr int kMicrobatchBits = 13;
/// The most microbatches a step of a schedule across processes holds.
inline constexpr int kMaxMicrobatches = 1 << kMicrobatchBits;

static_assert(kStepWindowBits + kPipelineGroupBits + kStageBits + 1 + kMicrobatchBits ==
                  transport::kCollectiveSpaceBit,
              "a pipeline key's fields fill the key below the collectives' space bit");
static_assert(kMaxPipelineStages <= (1 << kStageBits), "every stage fits its bits");

/// The fields of one pipeline transfer: the boundary value of `microbatch` of `step` that
/// `stage` receives (its input going Forward, its output gradient going Backward).
struct PipelineTag {
  uint64_t step = 0;
  int stage = 0;
  Direction direction = Direction::Forward;
  int microbatch = 0;
  bool operator==(const PipelineTag&) const = default;
};

/// A hash of a tag's fields, for tables of transfers.
struct PipelineTagHash {
  size_t operator()(const PipelineTag& t) const {
    return static_cast<size_t>((t.step * 0x9e3779b97f4a7c15ULL) ^
                               (static_cast<uint64_t>(t.stage) << 40) ^
                               (static_cast<uint64_t>(t.direction) << 32) ^
                               static_cast<uint64_t>(static_cast<uint32_t>(t.microbatch)));
  }
};

/// "step 3 stage 1 forward microbatch 2".
std::string to_string(const PipelineTag& tag);

/// The key of `tag` on `stream` (lane 0 forward, 1 backward). Throws std::invalid_argument
/// naming the limit (kMaxPipelineStages, kMaxMicrobatches) when a field does not fit.
transport::TransferKey pipeline_key(uint32_t stream, const PipelineTag& tag);

/// True for keys pipeline_key makes.
bool is_pipeline_key(uint64_t key);

/// The fields of a key pipeline_key made (the step modulo 2^(kStepWindowBits + 19): the bits
/// above the window only name it).
PipelineTag decode_pipeline_key(const transport::TransferKey& key);

/// Throws std::invalid_argument, starting with `name` (the schedule), when a schedule across
/// processes of `num_stages` stages and `n_microbatches` microbatches does not fit its keys.
void check_pipeline_limits(const std::string& name, int num_stages, int n_microbatches);

}  // namespace tensorplay::pipelining
