// One compiled pre-tokenizer pattern of a tokenizer.json (PCRE2: UTF-8, Unicode properties, JIT
// where available) and the split it makes. Private to data/: no header outside sees PCRE2.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tensorplay::data::detail {

class SplitPattern {
 public:
  /// Compiles `pattern`; throws std::invalid_argument naming `where`, the pattern and the offset
  /// where it does not compile.
  SplitPattern(const std::string& pattern, const std::string& where);
  ~SplitPattern();
  SplitPattern(const SplitPattern&) = delete;
  SplitPattern& operator=(const SplitPattern&) = delete;

  /// Appends the pieces of `text` split "Isolated": each match, and each stretch between
  /// matches. Throws std::runtime_error naming the byte where matching failed.
  void split(std::string_view text, std::vector<std::string_view>& out) const;

 private:
  void* code_ = nullptr;  ///< pcre2_code*
};

}  // namespace tensorplay::data::detail
