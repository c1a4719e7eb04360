// One knob (an environment variable tensorplay reads) described as a row: its name, old name,
// default, type, range and doc; and the strict parsers of its text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tensorplay::inline base {

/// How a knob's text is parsed.
enum class KnobType {
  Int,     ///< a whole number in [min, max]
  Double,  ///< a finite number in [min, max]
  Bool,    ///< 1, 0, true, false, yes, no, on, off (any case)
  String,  ///< any text
  Choice,  ///< one of the words in `choices`
};

/// One row of the table: everything about one environment variable. Each layer declares its rows
/// as `inline constexpr KnobSpec` objects in its own `<folder>/<layer>_knobs.h`; the code that
/// reads a knob passes its row to knob_int() and the like (docs/design.md, "Knobs by layer").
struct KnobSpec {
  std::string_view name{};   ///< the variable: TENSORPLAY_..., or a third party's own name
  std::string_view alias{};  ///< its old name, still read with a warning (empty: none)
  KnobType type = KnobType::String;
  std::string_view default_text{};  ///< the value when unset (empty: none)
  double min = 0;                   ///< Int and Double: the smallest value accepted
  double max = 0;                   ///< Int and Double: the largest value accepted
  std::string_view choices{};       ///< Choice: the words accepted, separated by '|'
  std::string_view example{};       ///< a good value, quoted by errors
  std::string_view doc{};           ///< what it does, in one line
  bool secret = false;              ///< printed hidden (a token)
  bool third_party = false;         ///< another program's variable, which tensorplay only looks at
};

// -- parsing --------------------------------------------------------------------------------------
// Each parser takes the variable the text came from, for its error: std::invalid_argument naming
// the variable, the value, what is expected and a good example. An empty text is never parsed: an
// empty variable counts as unset.

/// An Int knob's text as a number in its range.
int64_t parse_knob_int(const KnobSpec& spec, std::string_view text, std::string_view variable);
/// A Double knob's text as a finite number in its range.
double parse_knob_double(const KnobSpec& spec, std::string_view text, std::string_view variable);
/// A Bool knob's text.
bool parse_knob_bool(const KnobSpec& spec, std::string_view text, std::string_view variable);
/// A Choice knob's text, checked against its words (other types: the text as it is).
std::string parse_knob_choice(const KnobSpec& spec, std::string_view text,
                              std::string_view variable);
/// Checks text as the knob's type would parse it; throws as the parsers do.
void check_knob_text(const KnobSpec& spec, std::string_view text, std::string_view variable);

/// What a knob accepts, in words: "a whole number from 0 to 4096", "one of auto, peer or none".
std::string knob_expectation(const KnobSpec& spec);

}  // namespace tensorplay::inline base
