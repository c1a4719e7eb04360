// PCRE2 behind SplitPattern: compiled once with JIT, matched with a per-thread JIT stack.
#include "tensorplay/data/detail/split_pattern.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace tensorplay::data::detail {
namespace {

pcre2_code* as_code(void* code) { return static_cast<pcre2_code*>(code); }

}  // namespace

SplitPattern::SplitPattern(const std::string& pattern, const std::string& where) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                    PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error, &offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    throw std::invalid_argument(where + ": the pattern " + nlohmann::json(pattern).dump() +
                                " does not compile at offset " + std::to_string(offset) + " (" +
                                reinterpret_cast<const char*>(message) + ")");
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter on failure
  code_ = code;
}

SplitPattern::~SplitPattern() { pcre2_code_free(as_code(code_)); }

void SplitPattern::split(std::string_view text, std::vector<std::string_view>& out) const {
  // A JIT stack per thread, larger than the default 32 KiB, for patterns such as \s+(?!\S)
  // over long runs.
  struct JitStack {
    pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 64 * 1024 * 1024, nullptr);
    ~JitStack() { pcre2_jit_stack_free(stack); }
  };
  static thread_local JitStack jit;
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  pcre2_jit_stack_assign(context, nullptr, jit.stack);
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(as_code(code_), nullptr);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t last = 0, offset = 0;
  int rc = 0;
  while (offset <= text.size()) {
    rc = pcre2_match(as_code(code_), subject, text.size(), offset, 0, md, context);
    if (rc < 0) break;
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t start = ov[0], end = ov[1];
    if (end == start) {  // an empty match: step over one character
      offset = start + 1;
      while (offset < text.size() && (static_cast<uint8_t>(text[offset]) & 0xC0) == 0x80) ++offset;
      continue;
    }
    if (start > last) out.push_back(text.substr(last, start - last));
    out.push_back(text.substr(start, end - start));
    last = offset = end;
  }
  pcre2_match_data_free(md);
  pcre2_match_context_free(context);
  if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(rc, message, sizeof(message));
    throw std::runtime_error(std::string("pre-tokenizer pattern failed at byte ") +
                             std::to_string(offset) + " of a " + std::to_string(text.size()) +
                             "-byte piece: " + reinterpret_cast<const char*>(message));
  }
  if (last < text.size()) out.push_back(text.substr(last));
}

}  // namespace tensorplay::data::detail
