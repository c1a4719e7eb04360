// The pipeline's key layout, within the kKeyBits a channel tells apart:
//   bit  44      0 (the collectives' space bit, clear)
//   bits 43..32  step modulo kStepWindow
//   bits 31..24  the stream's bits above transport::kStreamBits (its group's id)
//   bits 23..14  receiving stage (< kMaxPipelineStages)
//   bit  13      direction (1: backward)
//   bits 12..0   microbatch (< kMaxMicrobatches)
// and above them (naming only) the step's higher bits. A stage receives forward values from one
// neighbour and gradients from the other, so stage and direction stand in for the sender.
#include "tensorplay/wire/pipeline_tag.h"

#include <stdexcept>

namespace tensorplay::pipelining {
namespace {

constexpr int kMicrobatchShift = 0;
constexpr int kDirectionShift = kMicrobatchShift + kMicrobatchBits;
constexpr int kStageShift = kDirectionShift + 1;
constexpr int kGroupShift = kStageShift + kStageBits;
constexpr int kStepShift = kGroupShift + kPipelineGroupBits;
static_assert(kStepShift + kStepWindowBits == transport::kCollectiveSpaceBit);

constexpr uint64_t mask(int bits) { return (uint64_t{1} << bits) - 1; }

std::string name_pipeline(const transport::TransferKey& key) {
  return to_string(decode_pipeline_key(key));
}

}  // namespace

std::string to_string(const PipelineTag& tag) {
  return "step " + std::to_string(tag.step) + " stage " + std::to_string(tag.stage) +
         (tag.direction == Direction::Forward ? " forward" : " backward") + " microbatch " +
         std::to_string(tag.microbatch);
}

transport::TransferKey pipeline_key(uint32_t stream, const PipelineTag& tag) {
  if (tag.stage < 0 || tag.stage >= kMaxPipelineStages)
    throw std::invalid_argument("pipeline key: stage " + std::to_string(tag.stage) + " of " +
                                to_string(tag) + " is not in 0 to " +
                                std::to_string(kMaxPipelineStages - 1) + " (kMaxPipelineStages)");
  if (tag.microbatch < 0 || tag.microbatch >= kMaxMicrobatches)
    throw std::invalid_argument("pipeline key: microbatch " + std::to_string(tag.microbatch) +
                                " of " + to_string(tag) + " is not in 0 to " +
                                std::to_string(kMaxMicrobatches - 1) + " (kMaxMicrobatches)");
  const uint64_t backward = tag.direction == Direction::Backward ? 1 : 0;
  uint64_t key = (tag.step & mask(kStepWindowBits)) << kStepShift |
                 static_cast<uint64_t>(tag.stage) << kStageShift | backward << kDirectionShift |
                 static_cast<uint64_t>(tag.microbatch) << kMicrobatchShift;
  key |= (stream >> transport::kStreamBits & mask(kPipelineGroupBits)) << kGroupShift;
  key |= (tag.step >> kStepWindowBits) << transport::kKeyBits;  // names the step only
  return {stream, key, static_cast<uint8_t>(backward), &name_pipeline};
}

bool is_pipeline_key(uint64_t key) { return (key >> transport::kCollectiveSpaceBit & 1) == 0; }

PipelineTag decode_pipeline_key(const transport::TransferKey& key) {
  PipelineTag tag;
  tag.step = (key.key >> kStepShift & mask(kStepWindowBits)) | (key.key >> transport::kKeyBits)
                                                                   << kStepWindowBits;
  tag.stage = static_cast<int>(key.key >> kStageShift & mask(kStageBits));
  tag.direction = (key.key >> kDirectionShift & 1) != 0 ? Direction::Backward : Direction::Forward;
  tag.microbatch = static_cast<int>(key.key >> kMicrobatchShift & mask(kMicrobatchBits));
  return tag;
}

void check_pipeline_limits(const std::string& name, int num_stages, int n_microbatches) {
  if (num_stages > kMaxPipelineStages)
    throw std::invalid_argument(name + ": " + std::to_string(num_stages) +
                                " stages; a schedule across processes holds at most " +
                                std::to_string(kMaxPipelineStages) +
                                " (kMaxPipelineStages: transfer keys number the " + "stages in " +
                                std::to_string(kStageBits) + " bits)");
  if (n_microbatches > kMaxMicrobatches)
    throw std::invalid_argument(
        name + ": " + std::to_string(n_microbatches) +
        " microbatches; a step of a schedule across processes holds at most " +
        std::to_string(kMaxMicrobatches) + " (kMaxMicrobatches: transfer keys number the " +
        "microbatches in " + std::to_string(kMicrobatchBits) + " bits)");
}

}  // namespace tensorplay::pipelining
