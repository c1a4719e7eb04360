// An error that crosses processes keeps its type: a rank's exception travels as its type's name
// and message, and the receiving ranks throw the same type with the sender's name in front.
#pragma once

#include <exception>
#include <string>
#include <string_view>

namespace tensorplay::pipelining::detail {

/// The bytes of `e` for other ranks: the name of its type (the library's own error types, else
/// the standard type it derives from) and its message.
std::string encode_error(const std::exception& e);

/// Throws what `bytes` (from encode_error) describe, of the same type, its message prefixed with
/// `who` and ": " (e.g. "rank 0 (127.0.0.1)"). Bytes of no known type throw std::runtime_error.
[[noreturn]] void throw_remote_error(const std::string& who, std::string_view bytes);

}  // namespace tensorplay::pipelining::detail
