// Unicode NFC normalization of UTF-8 text, by ICU's C API loaded when first needed: the library
// links no ICU, so binaries that never read a tokenizer.json with an NFC normalizer need none.
#pragma once

#include <string>
#include <string_view>

namespace tensorplay::data {

/// `text` (UTF-8) in Normalization Form C. Throws std::runtime_error naming what to install when
/// the machine has no ICU common library (Debian's libicu72 or libicu-dev), or when ICU fails.
std::string nfc_normalize(std::string_view text);

}  // namespace tensorplay::data
