// CheckpointError: what every checkpoint reader and writer throws when a checkpoint cannot be
// written or read.
#pragma once

#include <stdexcept>

namespace tensorplay::pipelining {

/// A checkpoint that cannot be written or read: missing, incomplete, truncated, corrupted, or
/// made for other stages. The message names the file and what to do.
class CheckpointError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace tensorplay::pipelining
