// Reading knobs: each one's text from the environment, its old name resolved, parsed strictly by
// its row (knob_spec.h); and the print-out of the whole table (knob_registry.h).
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <mutex>
#include <set>
#include <string>
#include <string_view>

#include "tensorplay/base/knob_registry.h"
#include "tensorplay/base/knob_spec.h"

namespace tensorplay::inline base {

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
  KnobText text(const KnobSpec& knob);
  /// Whether either of the knob's names is set to a non-empty value.
  bool is_set(const KnobSpec& knob);
  /// An Int knob's value (the default's when unset); throws std::invalid_argument when bad.
  int64_t get_int(const KnobSpec& knob);
  /// A Double knob's value.
  double get_double(const KnobSpec& knob);
  /// A Bool knob's value.
  bool get_bool(const KnobSpec& knob);
  /// A String or Choice knob's value (empty when unset without a default).
  std::string get_string(const KnobSpec& knob);

  /// The error reading the knob would throw, or empty when its value is good; never warns.
  std::string problem(const KnobSpec& knob);

  /// Prints every registered knob (knob_table()) as `NAME=value  # source` with its doc on the
  /// line before, as `ucx_info -c` does; a bad value is printed with its error. Returns how many
  /// were bad.
  int print(std::ostream& out);

 private:
  KnobText resolve(const KnobSpec& knob, bool warn);

  Lookup lookup_;
  Warn warn_;
  std::mutex mutex_;                   // guards warned_
  std::set<std::string_view> warned_;  // the knobs (by name) that have warned
};

/// This process's reader: the process environment, warnings to standard error.
KnobReader& process_knobs();

/// process_knobs().get_int(knob), and so on: the calls the library makes.
int64_t knob_int(const KnobSpec& knob);
/// process_knobs().get_double(knob).
double knob_double(const KnobSpec& knob);
/// process_knobs().get_bool(knob).
bool knob_bool(const KnobSpec& knob);
/// process_knobs().get_string(knob).
std::string knob_string(const KnobSpec& knob);
/// process_knobs().is_set(knob).
bool knob_is_set(const KnobSpec& knob);

}  // namespace tensorplay::inline base
