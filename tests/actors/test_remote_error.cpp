// Tests for detail/remote_error.h: an error that crosses ranks keeps its type and message, with
// the sending rank's name in front.
#include <catch2/catch.hpp>
#include <functional>
#include <stdexcept>
#include <string>
#include <typeinfo>

#include "tensorplay/distributed/process_group.h"
#include "tensorplay/pipelining/checkpoints/checkpoint.h"
#include "tensorplay/pipelining/pipeline_stage.h"
#include "tensorplay/pipelining/runtime/detail/remote_error.h"
#include "tensorplay/pipelining/runtime/schedule.h"
#include "tensorplay/schedules/errors.h"
#include "tensorplay/transport/channel.h"

namespace pp = tensorplay::pipelining;

namespace {

const std::string kWho = "rank 0 (127.0.0.1)";

/// Sends `e` through encode_error and throw_remote_error and checks what comes out.
template <typename Received>
void crosses_as(const std::exception& e) {
  // Through the protocol's bytes, as between ranks.
  const pp::RemoteError sent = pp::detail::encode_error(e);
  const auto error = pp::decode_as<pp::RemoteError>(pp::encode_message(sent), "an error");
  try {
    pp::detail::throw_remote_error(kWho, error);
    FAIL("throw_remote_error returned");
  } catch (const Received& got) {
    CHECK(std::string(got.what()) == kWho + ": " + e.what());
  } catch (const std::exception& got) {
    FAIL("expected " << typeid(Received).name() << ", got " << typeid(got).name() << ": "
                     << got.what());
  }
}

}  // namespace

TEST_CASE("errors of the library's own types cross ranks with their type", "[remote_error]") {
  crosses_as<tensorplay::schedules::ScheduleError>(
      tensorplay::schedules::ScheduleError("1F1B: the given order cannot run\nstep | rank 0"));
  crosses_as<pp::CheckpointError>(pp::CheckpointError("checkpoint: no complete step"));
  crosses_as<pp::PipelineError>(pp::PipelineError("step 3 failed"));
  crosses_as<pp::StageInputError>(pp::StageInputError("stage 0 input 0: expected [2, 8]"));
  crosses_as<tensorplay::distributed::DistributedError>(
      tensorplay::distributed::DistributedError("rendezvous timed out"));
  crosses_as<tensorplay::transport::TransferError>(
      tensorplay::transport::TransferError("receive timed out"));
}

TEST_CASE("standard errors cross ranks as the standard type they derive from", "[remote_error]") {
  crosses_as<std::invalid_argument>(std::invalid_argument("n_microbatches must be at least 1"));
  crosses_as<std::out_of_range>(std::out_of_range("index 9 of 4"));
  crosses_as<std::logic_error>(std::domain_error("a logic error"));
  crosses_as<std::runtime_error>(std::overflow_error("a runtime error"));
  // A StageInputError is an invalid_argument: it must still arrive as the narrower type.
  CHECK_THROWS_AS(pp::detail::throw_remote_error(
                      kWho, pp::detail::encode_error(pp::StageInputError("wrong shape"))),
                  pp::StageInputError);
}

TEST_CASE("an error of no known type arrives as a runtime_error holding it", "[remote_error]") {
  try {
    pp::detail::throw_remote_error(kWho, {"FutureError", "a reason from an older version"});
    FAIL("throw_remote_error returned");
  } catch (const std::exception& e) {
    CHECK(typeid(e) == typeid(std::runtime_error));
    CHECK(std::string(e.what()) == kWho + ": a reason from an older version");
  }
}
