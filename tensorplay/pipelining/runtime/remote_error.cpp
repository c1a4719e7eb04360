// Errors that cross processes, by type name: the library's own types and the standard ones.
#include "tensorplay/pipelining/runtime/detail/remote_error.h"

#include <stdexcept>

#include "tensorplay/distributed/process_group.h"
#include "tensorplay/pipelining/checkpoints/checkpoint.h"
#include "tensorplay/pipelining/pipeline_stage.h"
#include "tensorplay/pipelining/runtime/schedule_options.h"
#include "tensorplay/schedules/errors.h"
#include "tensorplay/transport/channel.h"

namespace tensorplay::pipelining::detail {
namespace {

template <typename E>
bool is(const std::exception& e) {
  return dynamic_cast<const E*>(&e) != nullptr;
}

}  // namespace

RemoteError encode_error(const std::exception& e) {
  // Derived types first: StageInputError is an invalid_argument, the others runtime_errors.
  const char* type = is<StageInputError>(e)                 ? "StageInputError"
                     : is<schedules::ScheduleError>(e)      ? "ScheduleError"
                     : is<CheckpointError>(e)               ? "CheckpointError"
                     : is<PipelineError>(e)                 ? "PipelineError"
                     : is<distributed::DistributedError>(e) ? "DistributedError"
                     : is<transport::TransferError>(e)      ? "TransferError"
                     : is<std::invalid_argument>(e)         ? "invalid_argument"
                     : is<std::out_of_range>(e)             ? "out_of_range"
                     : is<std::logic_error>(e)              ? "logic_error"
                                                            : "runtime_error";
  return {type, e.what()};
}

void throw_remote_error(const std::string& who, const RemoteError& error) {
  const std::string& type = error.type;
  const std::string message = who + ": " + error.message;
  if (type == "StageInputError") throw StageInputError(message);
  if (type == "ScheduleError") throw schedules::ScheduleError(message);
  if (type == "CheckpointError") throw CheckpointError(message);
  if (type == "PipelineError") throw PipelineError(message);
  if (type == "DistributedError") throw distributed::DistributedError(message);
  if (type == "TransferError") throw transport::TransferError(message);
  if (type == "invalid_argument") throw std::invalid_argument(message);
  if (type == "out_of_range") throw std::out_of_range(message);
  if (type == "logic_error") throw std::logic_error(message);
  throw std::runtime_error(message);
}

}  // namespace tensorplay::pipelining::detail
