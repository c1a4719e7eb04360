// The one table of tensorplay's environment variables (its knobs): each is declared once, with its
// name, old name, default, parser and one line of doc, parsed strictly, and printable.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <span>
#include <string>
#include <string_view>

namespace tensorplay::inline base {

// -- the table ------------------------------------------------------------------------------------

/// Every knob, in the order of the table (knob_spec(k) describes k).
enum class Knob {
  CpuIsa,
  NumThreads,
  HostCacheMb,
  CudaTf32,
  CudaDeviceMaxConnections,
  UcxSpinUs,
  UcxErrorMode,
  ClusterToken,
  PeerTimeout,
  RdzvTimeout,
  LogDir,
  TorchVenv,
  Python,
  TorchInstall,
  TpLaunch,
  SpdlogLevel,
};

/// How many knobs the table holds.
inline constexpr size_t kKnobCount = static_cast<size_t>(Knob::SpdlogLevel) + 1;

/// How a knob's text is parsed.
enum class KnobType {
  Int,     ///< a whole number in [min, max]
  Double,  ///< a finite number in [min, max]
  Bool,    ///< 1, 0, true, false, yes, no, on, off (any case)
  String,  ///< any text
  Choice,  ///< one of the words in `choices`
};

/// One row of the table: everything about one environment variable.
struct KnobSpec {
  Knob knob;
  std::string_view name;   ///< the variable: TENSORPLAY_..., or a third party's own name
  std::string_view alias;  ///< its old name, still read with a warning (empty: none)
  KnobType type;
  std::string_view default_text;  ///< the value when unset (empty: none)
  double min;                     ///< Int and Double: the smallest value accepted
  double max;                     ///< Int and Double: the largest value accepted
  std::string_view choices;       ///< Choice: the words accepted, separated by '|'
  std::string_view example;       ///< a good value, quoted by errors
  std::string_view doc;           ///< what it does, in one line
  bool secret;                    ///< printed hidden (a token)
  bool third_party;               ///< another program's variable, which tensorplay only looks at
};

/// The whole table, in the order of Knob.
std::span<const KnobSpec> knob_table();

/// The row of one knob.
const KnobSpec& knob_spec(Knob knob);

/// The row named `name` (its name or its old name), or null.
const KnobSpec* find_knob(std::string_view name);

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

// -- reading --------------------------------------------------------------------------------------

/// Where a knob's value came from.
enum class KnobSource {
  Default,      ///< neither name is set (or both are empty)
  Environment,  ///< its name is set
  Alias,        ///< only its old name is set
};

/// A knob's text, its old name resolved.
struct KnobText {
  std::string text;  ///< the value as set, or the default's text
  KnobSource source = KnobSource::Default;
  std::string_view variable;  ///< the variable read (empty for the default)
};

/// Reads knobs from an environment. The new name wins over the old one; reading a knob through
/// its old name warns once, and so does an old name set to another value than the new one.
/// Values are read at each call (callers that need one value for the whole run keep it).
class KnobReader {
 public:
  /// Looks up a variable: its value, or null when unset.
  using Lookup = std::function<const char*(const char* name)>;
  /// Receives one warning, without a trailing newline.
  using Warn = std::function<void(const std::string& message)>;

  KnobReader(Lookup lookup, Warn warn);
  KnobReader(const KnobReader&) = delete;
  KnobReader& operator=(const KnobReader&) = delete;

  // -- observers ----------------------------------------------------------------------------------

  /// The knob's text and where it came from; warns about its old name (once per knob).
  KnobText text(Knob knob);
  /// Whether either of the knob's names is set to a non-empty value.
  bool is_set(Knob knob);
  /// An Int knob's value (the default's when unset); throws std::invalid_argument when bad.
  int64_t get_int(Knob knob);
  /// A Double knob's value.
  double get_double(Knob knob);
  /// A Bool knob's value.
  bool get_bool(Knob knob);
  /// A String or Choice knob's value (empty when unset without a default).
  std::string get_string(Knob knob);

  /// The error reading the knob would throw, or empty when its value is good; never warns.
  std::string problem(Knob knob);

  /// Prints every knob as `NAME=value  # source` with its doc on the line before, as
  /// `ucx_info -c` does; a bad value is printed with its error. Returns how many were bad.
  int print(std::ostream& out);

 private:
  KnobText resolve(Knob knob, bool warn);

  Lookup lookup_;
  Warn warn_;
  std::array<std::atomic<bool>, kKnobCount> warned_{};
};

/// This process's reader: the process environment, warnings to standard error.
KnobReader& process_knobs();

/// process_knobs().get_int(knob), and so on: the calls the library makes.
int64_t knob_int(Knob knob);
double knob_double(Knob knob);
bool knob_bool(Knob knob);
std::string knob_string(Knob knob);
bool knob_is_set(Knob knob);

}  // namespace tensorplay::inline base
