// Reading knobs (knobs.h). Apart from the launcher-environment reader
// (tensorplay/distributed/launch_env.cpp), this is the only file of the project that reads the
// environment.
#include "tensorplay/base/knobs.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ostream>
#include <stdexcept>

namespace tensorplay::inline base {
namespace {

void require_type(const KnobSpec& spec, bool ok, const char* as) {
  if (!ok)
    throw std::logic_error("knob " + std::string(spec.name) + " is not read as " + as +
                           " (see its row)");
}

const char* source_text(KnobSource source) {
  switch (source) {
    case KnobSource::Environment:
      return "environment";
    case KnobSource::Alias:
      return "alias";
    case KnobSource::Default:
      break;
  }
  return "default";
}

}  // namespace

// -- reading --------------------------------------------------------------------------------------

KnobReader::KnobReader(Lookup lookup, Warn warn)
    : lookup_(std::move(lookup)), warn_(std::move(warn)) {}

KnobText KnobReader::resolve(const KnobSpec& spec, bool warn) {
  auto read = [&](std::string_view name) -> const char* {
    if (name.empty()) return nullptr;
    const char* value = lookup_(std::string(name).c_str());
    return value != nullptr && *value != '\0' ? value : nullptr;
  };
  const char* value = read(spec.name);
  const char* old = read(spec.alias);
  auto warn_once = [&](const std::string& message) {
    if (!warn) return;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!warned_.insert(spec.name).second) return;
    }
    warn_(message);
  };
  auto shown = [&](const char* text) { return spec.secret ? std::string("(hidden)") : text; };
  const std::string name(spec.name), alias(spec.alias);
  if (value != nullptr) {
    if (old != nullptr && std::string_view(old) != value)
      warn_once("tensorplay: " + name + "=" + shown(value) + " and its old name " + alias + "=" +
                shown(old) + " are both set; using " + name + " (unset " + alias + ")");
    return {value, KnobSource::Environment, spec.name};
  }
  if (old != nullptr) {
    warn_once("tensorplay: " + alias + " is the old name of " + name + "; set " + name +
              " instead (" + alias + " still works for now)");
    return {old, KnobSource::Alias, spec.alias};
  }
  return {std::string(spec.default_text), KnobSource::Default, {}};
}

KnobText KnobReader::text(const KnobSpec& spec) { return resolve(spec, true); }

bool KnobReader::is_set(const KnobSpec& spec) {
  return resolve(spec, true).source != KnobSource::Default;
}

int64_t KnobReader::get_int(const KnobSpec& spec) {
  require_type(spec, spec.type == KnobType::Int, "a whole number");
  const KnobText t = text(spec);
  return parse_knob_int(spec, t.text, t.variable.empty() ? spec.name : t.variable);
}

double KnobReader::get_double(const KnobSpec& spec) {
  require_type(spec, spec.type == KnobType::Double, "a number");
  const KnobText t = text(spec);
  return parse_knob_double(spec, t.text, t.variable.empty() ? spec.name : t.variable);
}

bool KnobReader::get_bool(const KnobSpec& spec) {
  require_type(spec, spec.type == KnobType::Bool, "a boolean");
  const KnobText t = text(spec);
  return parse_knob_bool(spec, t.text, t.variable.empty() ? spec.name : t.variable);
}

std::string KnobReader::get_string(const KnobSpec& spec) {
  require_type(spec, spec.type == KnobType::String || spec.type == KnobType::Choice, "text");
  const KnobText t = text(spec);
  if (t.text.empty()) return {};
  return parse_knob_choice(spec, t.text, t.variable.empty() ? spec.name : t.variable);
}

std::string KnobReader::problem(const KnobSpec& spec) {
  const KnobText t = resolve(spec, false);
  if (t.text.empty()) return {};
  try {
    check_knob_text(spec, t.text, t.variable.empty() ? spec.name : t.variable);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return {};
}

int KnobReader::print(std::ostream& out) {
  int bad = 0;
  out << "# tensorplay's knobs: each one's value here and where it comes from (default, "
         "environment, alias)\n";
  for (const KnobSpec& spec : knob_table()) {
    const KnobText t = resolve(spec, false);
    const std::string problem = this->problem(spec);
    if (!problem.empty()) ++bad;
    out << "# " << spec.doc << " [" << knob_expectation(spec);
    if (!spec.alias.empty()) out << "; old name " << spec.alias;
    out << "]\n";
    const std::string value = spec.secret && !t.text.empty() ? "(hidden)" : t.text;
    std::string line = std::string(spec.name) + "=" + value;
    line.resize(std::max<size_t>(line.size() + 2, 40), ' ');
    out << line << "# " << source_text(t.source);
    if (t.source == KnobSource::Alias) out << " " << spec.alias;
    if (!problem.empty()) out << "; INVALID: " << problem;
    out << "\n";
  }
  return bad;
}

KnobReader& process_knobs() {
  static KnobReader reader(
      [](const char* name) { return std::getenv(name); },
      [](const std::string& message) { std::fprintf(stderr, "%s\n", message.c_str()); });
  return reader;
}

int64_t knob_int(const KnobSpec& knob) { return process_knobs().get_int(knob); }
double knob_double(const KnobSpec& knob) { return process_knobs().get_double(knob); }
bool knob_bool(const KnobSpec& knob) { return process_knobs().get_bool(knob); }
std::string knob_string(const KnobSpec& knob) { return process_knobs().get_string(knob); }
bool knob_is_set(const KnobSpec& knob) { return process_knobs().is_set(knob); }

}  // namespace tensorplay::inline base
