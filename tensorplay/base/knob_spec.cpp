// The strict parsers of a knob's text (knob_spec.h).
#include "tensorplay/base/knob_spec.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <stdexcept>

namespace tensorplay::inline base {
namespace {

std::string format_number(double value) {
  char buffer[32];
  auto [end, error] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return error == std::errc() ? std::string(buffer, end) : std::to_string(value);
}

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The words of a Choice knob, joined for a reader: "auto, peer or none".
std::string choices_text(const KnobSpec& spec) {
  std::string out;
  std::string_view rest = spec.choices;
  while (!rest.empty()) {
    const size_t bar = rest.find('|');
    const std::string_view word = rest.substr(0, bar);
    rest = bar == std::string_view::npos ? std::string_view() : rest.substr(bar + 1);
    if (!out.empty()) out += rest.empty() ? " or " : ", ";
    out += word;
  }
  return out;
}

bool is_choice(const KnobSpec& spec, std::string_view text) {
  std::string_view rest = spec.choices;
  while (!rest.empty()) {
    const size_t bar = rest.find('|');
    if (rest.substr(0, bar) == text) return true;
    rest = bar == std::string_view::npos ? std::string_view() : rest.substr(bar + 1);
  }
  return false;
}

std::string expectation_text(const KnobSpec& spec) {
  switch (spec.type) {
    case KnobType::Int:
      return "a whole number from " + std::to_string(static_cast<int64_t>(spec.min)) + " to " +
             std::to_string(static_cast<int64_t>(spec.max));
    case KnobType::Double:
      return "a number from " + format_number(spec.min) + " to " + format_number(spec.max);
    case KnobType::Bool:
      return "1, 0, true, false, yes, no, on or off";
    case KnobType::Choice:
      return "one of " + choices_text(spec);
    case KnobType::String:
      break;
  }
  return "any text";
}

[[noreturn]] void bad_value(const KnobSpec& spec, std::string_view text,
                            std::string_view variable) {
  throw std::invalid_argument(std::string(variable) + "=" + std::string(text) + ": expected " +
                              expectation_text(spec) + ", e.g. " + std::string(spec.name) + "=" +
                              std::string(spec.example) + " (" + std::string(spec.name) + ": " +
                              std::string(spec.doc) + ")");
}

}  // namespace

std::string knob_expectation(const KnobSpec& spec) { return expectation_text(spec); }

// -- parsing --------------------------------------------------------------------------------------

int64_t parse_knob_int(const KnobSpec& spec, std::string_view text, std::string_view variable) {
  int64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() ||
      static_cast<double>(value) < spec.min || static_cast<double>(value) > spec.max)
    bad_value(spec, text, variable);
  return value;
}

double parse_knob_double(const KnobSpec& spec, std::string_view text, std::string_view variable) {
  double value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() ||
      !std::isfinite(value) || value < spec.min || value > spec.max)
    bad_value(spec, text, variable);
  return value;
}

bool parse_knob_bool(const KnobSpec& spec, std::string_view text, std::string_view variable) {
  const std::string word = lower(text);
  if (word == "1" || word == "true" || word == "yes" || word == "on") return true;
  if (word == "0" || word == "false" || word == "no" || word == "off") return false;
  bad_value(spec, text, variable);
}

std::string parse_knob_choice(const KnobSpec& spec, std::string_view text,
                              std::string_view variable) {
  if (spec.type == KnobType::Choice && !is_choice(spec, text)) bad_value(spec, text, variable);
  return std::string(text);
}

void check_knob_text(const KnobSpec& spec, std::string_view text, std::string_view variable) {
  switch (spec.type) {
    case KnobType::Int:
      parse_knob_int(spec, text, variable);
      break;
    case KnobType::Double:
      parse_knob_double(spec, text, variable);
      break;
    case KnobType::Bool:
      parse_knob_bool(spec, text, variable);
      break;
    case KnobType::Choice:
    case KnobType::String:
      parse_knob_choice(spec, text, variable);
      break;
  }
}

}  // namespace tensorplay::inline base
