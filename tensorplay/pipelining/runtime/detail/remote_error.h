// An error that crosses processes keeps its type: a rank's exception travels as its type's name
// and message, and the receiving ranks throw the same type with the sender's name in front.
#pragma once

#include <exception>
#include <string>

#include "tensorplay/wire/protocol.h"

namespace tensorplay::pipelining::detail {

/// `e` for other ranks (a message of the protocol): the name of its type (the library's own error
/// types, else the standard type it derives from) and its message.
RemoteError encode_error(const std::exception& e);

/// Throws what `error` (from encode_error) describes, of the same type, its message prefixed
/// with `who` and ": " (e.g. "rank 0 (127.0.0.1)"). An error of no known type throws
/// std::runtime_error.
[[noreturn]] void throw_remote_error(const std::string& who, const RemoteError& error);

}  // namespace tensorplay::pipelining::detail
