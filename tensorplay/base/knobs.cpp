// The table of knobs (knobs.h) and its strict parsers. Apart from the launcher-environment reader
// (tensorplay/distributed/launch_env.cpp), this is the only file of the project that reads the
// environment.
#include "tensorplay/base/knobs.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ostream>
#include <stdexcept>

namespace tensorplay::inline base {
namespace {

// clang-format off
// One row per knob, in the order of Knob. Fields: knob, name, old name, type, default, min, max,
// choices, example, doc, secret, third party.
constexpr KnobSpec kKnobs[] = {
    {Knob::CpuIsa, "TENSORPLAY_CPU_ISA", "", KnobType::Choice, "auto", 0, 0,
     "auto|scalar|sse4|avx2|avx512", "avx2",
     "the CPU target of the vector kernels and oneDNN's ceiling (auto: the widest this machine has)",
     false, false},
    {Knob::NumThreads, "TENSORPLAY_NUM_THREADS", "", KnobType::Int, "0", 0, 4096, "", "4",
     "product threads of every thread that sets none (0: its share of the host's cores)", false,
     false},
    {Knob::HostCacheMb, "TENSORPLAY_HOST_CACHE_MB", "", KnobType::Int, "1024", 0,
     1099511627776.0, "", "256",
     "MiB of freed host blocks kept for reuse (0: none; sanitizer builds default to 0)", false,
     false},
    {Knob::CudaTf32, "TENSORPLAY_CUDA_TF32", "", KnobType::Bool, "0", 0, 0, "", "1",
     "let cuBLAS use TF32 tensor cores for float32 products", false, false},
    {Knob::CudaDeviceMaxConnections, "CUDA_DEVICE_MAX_CONNECTIONS", "", KnobType::Int, "8", 1,
     32, "", "32",
     "CUDA's own: hardware work queues per GPU; tensorplay sets 32 when unset, so that every NCCL "
     "link's stream has one (an NCCL channel of more ranks than fit refuses to start)",
     false, true},
    {Knob::UcxSpinUs, "TENSORPLAY_UCX_SPIN_US", "", KnobType::Int, "", 0, 1000000, "", "50",
     "microseconds the UCX channel's thread polls before it sleeps (unset: 200, on while its rank "
     "waits in a step; none during steps on a rank of one core)",
     false, false},
    {Knob::UcxErrorMode, "TENSORPLAY_UCX_ERROR_MODE", "", KnobType::Choice, "auto", 0, 0,
     "auto|peer|none", "peer",
     "UCX peer error handling: auto (for peers on other hosts only), peer (every peer) or none",
     false, false},
    {Knob::ClusterToken, "TENSORPLAY_CLUSTER_TOKEN", "TP_CLUSTER_TOKEN", KnobType::String, "", 0,
     0, "", "4f1c0e9a7b2d", "the secret every rank of a job presents (tp-launch makes one if unset)",
     true, false},
    {Knob::PeerTimeout, "TENSORPLAY_PEER_TIMEOUT", "TP_PEER_TIMEOUT", KnobType::Double, "10", 0.1,
     3600, "", "30", "seconds a silent peer connection lasts before its rank counts as gone",
     false, false},
    {Knob::RdzvTimeout, "TENSORPLAY_RDZV_TIMEOUT", "TP_RDZV_TIMEOUT", KnobType::Double, "300", 0.1,
     86400, "", "900",
     "seconds the ranks may take to find each other (tp-launch --rdzv-timeout sets it, 900 by "
     "default; init_process_group's .timeout wins)",
     false, false},
    {Knob::LogDir, "TENSORPLAY_LOG_DIR", "TP_LOG_DIR", KnobType::String, "", 0, 0, "", "logs",
     "folder of each rank's message log, messages_rank_R.log (tp-launch --log-dir)", false, false},
    {Knob::TorchVenv, "TENSORPLAY_TORCH_VENV", "", KnobType::String, "", 0, 0, "",
     "/opt/torch-venv",
     "benchmarks: the virtual environment of the PyTorch peers (unset: torch-venv beside them)",
     false, false},
    {Knob::Python, "TENSORPLAY_PYTHON", "", KnobType::String, "", 0, 0, "", "/usr/bin/python3",
     "benchmarks: the interpreter of the PyTorch peers, one that imports torch", false, false},
    {Knob::TorchInstall, "TENSORPLAY_TORCH_INSTALL", "", KnobType::Bool, "1", 0, 0, "", "0",
     "benchmarks: pip-install torch into the virtual environment when no interpreter has it",
     false, false},
    {Knob::TpLaunch, "TENSORPLAY_TP_LAUNCH", "", KnobType::String, "", 0, 0, "",
     "build/tools/tp-launch/tp-launch",
     "benchmarks: the tp-launch that starts their ranks (unset: the one built beside them)", false,
     false},
    {Knob::SpdlogLevel, "SPDLOG_LEVEL", "", KnobType::String, "", 0, 0, "", "debug",
     "spdlog's own level (debug turns the message log on); when set, the terminal log follows it",
     false, true},
};
// clang-format on

static_assert(std::size(kKnobs) == kKnobCount, "one row per Knob");
constexpr bool rows_in_order() {
  for (size_t i = 0; i < std::size(kKnobs); ++i)
    if (static_cast<size_t>(kKnobs[i].knob) != i) return false;
  return true;
}
static_assert(rows_in_order(), "the rows follow the order of Knob");

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

std::string expectation(const KnobSpec& spec) {
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
                              expectation(spec) + ", e.g. " + std::string(spec.name) + "=" +
                              std::string(spec.example) + " (" + std::string(spec.name) + ": " +
                              std::string(spec.doc) + ")");
}

void require_type(const KnobSpec& spec, bool ok, const char* as) {
  if (!ok)
    throw std::logic_error("knob " + std::string(spec.name) + " is not read as " + as +
                           " (see its row in tensorplay/base/knobs.cpp)");
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

// -- the table ------------------------------------------------------------------------------------

std::span<const KnobSpec> knob_table() { return kKnobs; }

const KnobSpec& knob_spec(Knob knob) { return kKnobs[static_cast<size_t>(knob)]; }

const KnobSpec* find_knob(std::string_view name) {
  for (const KnobSpec& spec : kKnobs)
    if (!name.empty() && (spec.name == name || spec.alias == name)) return &spec;
  return nullptr;
}

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

// -- reading --------------------------------------------------------------------------------------

KnobReader::KnobReader(Lookup lookup, Warn warn)
    : lookup_(std::move(lookup)), warn_(std::move(warn)) {}

KnobText KnobReader::resolve(Knob knob, bool warn) {
  const KnobSpec& spec = knob_spec(knob);
  auto read = [&](std::string_view name) -> const char* {
    if (name.empty()) return nullptr;
    const char* value = lookup_(std::string(name).c_str());
    return value != nullptr && *value != '\0' ? value : nullptr;
  };
  const char* value = read(spec.name);
  const char* old = read(spec.alias);
  auto warn_once = [&](const std::string& message) {
    if (warn && !warned_[static_cast<size_t>(knob)].exchange(true)) warn_(message);
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

KnobText KnobReader::text(Knob knob) { return resolve(knob, true); }

bool KnobReader::is_set(Knob knob) { return resolve(knob, true).source != KnobSource::Default; }

int64_t KnobReader::get_int(Knob knob) {
  const KnobSpec& spec = knob_spec(knob);
  require_type(spec, spec.type == KnobType::Int, "a whole number");
  const KnobText t = text(knob);
  return parse_knob_int(spec, t.text, t.variable.empty() ? spec.name : t.variable);
}

double KnobReader::get_double(Knob knob) {
  const KnobSpec& spec = knob_spec(knob);
  require_type(spec, spec.type == KnobType::Double, "a number");
  const KnobText t = text(knob);
  return parse_knob_double(spec, t.text, t.variable.empty() ? spec.name : t.variable);
}

bool KnobReader::get_bool(Knob knob) {
  const KnobSpec& spec = knob_spec(knob);
  require_type(spec, spec.type == KnobType::Bool, "a boolean");
  const KnobText t = text(knob);
  return parse_knob_bool(spec, t.text, t.variable.empty() ? spec.name : t.variable);
}

std::string KnobReader::get_string(Knob knob) {
  const KnobSpec& spec = knob_spec(knob);
  require_type(spec, spec.type == KnobType::String || spec.type == KnobType::Choice, "text");
  const KnobText t = text(knob);
  if (t.text.empty()) return {};
  return parse_knob_choice(spec, t.text, t.variable.empty() ? spec.name : t.variable);
}

std::string KnobReader::problem(Knob knob) {
  const KnobSpec& spec = knob_spec(knob);
  const KnobText t = resolve(knob, false);
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
  for (const KnobSpec& spec : kKnobs) {
    const KnobText t = resolve(spec.knob, false);
    const std::string problem = this->problem(spec.knob);
    if (!problem.empty()) ++bad;
    out << "# " << spec.doc << " [" << expectation(spec);
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

int64_t knob_int(Knob knob) { return process_knobs().get_int(knob); }
double knob_double(Knob knob) { return process_knobs().get_double(knob); }
bool knob_bool(Knob knob) { return process_knobs().get_bool(knob); }
std::string knob_string(Knob knob) { return process_knobs().get_string(knob); }
bool knob_is_set(Knob knob) { return process_knobs().is_set(knob); }

}  // namespace tensorplay::inline base
