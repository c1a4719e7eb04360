// Tests for knobs.h: the table's rows, strict parsing of each kind, old names and their one-time
// warnings, which name wins, the print-out of tp-launch --print-config, and the table in docs/.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tensorplay/base/knobs.h"

namespace tp = tensorplay;

namespace {

// A reader over a map of variables that keeps its warnings.
struct FakeEnvironment {
  std::map<std::string, std::string> variables;
  std::vector<std::string> warnings;
  tp::KnobReader reader{[this](const char* name) -> const char* {
                          auto it = variables.find(name);
                          return it == variables.end() ? nullptr : it->second.c_str();
                        },
                        [this](const std::string& message) { warnings.push_back(message); }};

  explicit FakeEnvironment(std::map<std::string, std::string> v) : variables(std::move(v)) {}
};

const tp::KnobSpec& spec(tp::Knob knob) { return tp::knob_spec(knob); }

std::string trim(std::string text) {
  const auto first = text.find_first_not_of(' ');
  const auto last = text.find_last_not_of(' ');
  return first == std::string::npos ? "" : text.substr(first, last - first + 1);
}

std::string unquote(std::string text) {
  text = trim(text);
  if (text.size() >= 2 && text.front() == '`' && text.back() == '`')
    return text.substr(1, text.size() - 2);
  return text;
}

}  // namespace

TEST_CASE("every row of the knob table is well formed", "[knobs]") {
  std::set<std::string> names;
  for (const tp::KnobSpec& row : tp::knob_table()) {
    const std::string name(row.name);
    CAPTURE(name);
    CHECK(names.insert(name).second);
    if (!row.third_party) CHECK(name.rfind("TENSORPLAY_", 0) == 0);
    if (!row.alias.empty()) {
      CHECK(std::string(row.alias).rfind("TP_", 0) == 0);
      CHECK(names.insert(std::string(row.alias)).second);
      CHECK(tp::find_knob(row.alias) == &row);
    }
    CHECK(tp::find_knob(row.name) == &row);
    CHECK(&tp::knob_spec(row.knob) == &row);
    CHECK(!row.doc.empty());
    CHECK(row.doc.find('\n') == std::string_view::npos);
    CHECK(!row.example.empty());
    // The default and the example are values the parser accepts.
    if (!row.default_text.empty()) CHECK_NOTHROW(tp::check_knob_text(row, row.default_text, name));
    CHECK_NOTHROW(tp::check_knob_text(row, row.example, name));
    if (row.type == tp::KnobType::Int || row.type == tp::KnobType::Double)
      CHECK(row.min <= row.max);
    if (row.type == tp::KnobType::Choice) CHECK(!row.choices.empty());
  }
  CHECK(tp::knob_table().size() == tp::kKnobCount);
  CHECK(tp::find_knob("TENSORPLAY_NO_SUCH_KNOB") == nullptr);
  CHECK(tp::find_knob("") == nullptr);
}

TEST_CASE("the knobs of every layer are in the table", "[knobs]") {
  // Issue 20's list: the cluster token, the log dir, the peer and rendezvous timeouts (with their
  // old TP_ names), the two UCX knobs, and the benchmarks' own.
  for (const char* name :
       {"TENSORPLAY_CLUSTER_TOKEN", "TP_CLUSTER_TOKEN", "TENSORPLAY_LOG_DIR", "TP_LOG_DIR",
        "TENSORPLAY_PEER_TIMEOUT", "TP_PEER_TIMEOUT", "TENSORPLAY_RDZV_TIMEOUT", "TP_RDZV_TIMEOUT",
        "TENSORPLAY_UCX_SPIN_US", "TENSORPLAY_UCX_ERROR_MODE", "TENSORPLAY_CPU_ISA",
        "TENSORPLAY_NUM_THREADS", "TENSORPLAY_HOST_CACHE_MB", "TENSORPLAY_CUDA_TF32",
        "TENSORPLAY_TORCH_VENV", "TENSORPLAY_PYTHON", "TENSORPLAY_TORCH_INSTALL",
        "TENSORPLAY_TP_LAUNCH", "SPDLOG_LEVEL"}) {
    CAPTURE(name);
    CHECK(tp::find_knob(name) != nullptr);
  }
  const tp::KnobSpec& rdzv = spec(tp::Knob::RdzvTimeout);
  CHECK(rdzv.default_text == "300");  // init_process_group's own; tp-launch sets 900
  CHECK(rdzv.min == 0.1);
}

TEST_CASE("a whole-number knob accepts only whole numbers in its range", "[knobs]") {
  const tp::KnobSpec& threads = spec(tp::Knob::NumThreads);
  CHECK(tp::parse_knob_int(threads, "4", "TENSORPLAY_NUM_THREADS") == 4);
  CHECK(tp::parse_knob_int(threads, "0", "TENSORPLAY_NUM_THREADS") == 0);
  CHECK(tp::parse_knob_int(threads, "4096", "TENSORPLAY_NUM_THREADS") == 4096);
  for (const char* bad :
       {"4097", "-1", "abc", "4x", " 4", "4 ", "+4", "4.0", "0x10", "99999999999999999999999"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(tp::parse_knob_int(threads, bad, "TENSORPLAY_NUM_THREADS"),
                    std::invalid_argument);
  }
  // The error names the variable, the value, the range and a good example.
  CHECK_THROWS_WITH(tp::parse_knob_int(threads, "4097", "TENSORPLAY_NUM_THREADS"),
                    Catch::Contains("TENSORPLAY_NUM_THREADS=4097") &&
                        Catch::Contains("a whole number from 0 to 4096") &&
                        Catch::Contains("e.g. TENSORPLAY_NUM_THREADS=4"));
  const tp::KnobSpec& cache = spec(tp::Knob::HostCacheMb);
  CHECK(tp::parse_knob_int(cache, "1099511627776", "TENSORPLAY_HOST_CACHE_MB") == (1ll << 40));
  CHECK_THROWS_WITH(tp::parse_knob_int(cache, "256MB", "TENSORPLAY_HOST_CACHE_MB"),
                    Catch::Contains("TENSORPLAY_HOST_CACHE_MB=256MB") &&
                        Catch::Contains("e.g. TENSORPLAY_HOST_CACHE_MB=256"));
  const tp::KnobSpec& rdzv = spec(tp::Knob::RdzvTimeout);
  CHECK_THROWS_WITH(tp::parse_knob_double(rdzv, "0", "TENSORPLAY_RDZV_TIMEOUT"),
                    Catch::Contains("from 0.1 to 86400"));
}

TEST_CASE("a number knob accepts only finite numbers in its range", "[knobs]") {
  const tp::KnobSpec& timeout = spec(tp::Knob::PeerTimeout);
  CHECK(tp::parse_knob_double(timeout, "2.5", "TENSORPLAY_PEER_TIMEOUT") == 2.5);
  CHECK(tp::parse_knob_double(timeout, "0.1", "TENSORPLAY_PEER_TIMEOUT") == 0.1);
  CHECK(tp::parse_knob_double(timeout, "3600", "TENSORPLAY_PEER_TIMEOUT") == 3600);
  CHECK(tp::parse_knob_double(timeout, "1e1", "TENSORPLAY_PEER_TIMEOUT") == 10);
  for (const char* bad : {"0.05", "3601", "nan", "inf", "-1", "ten", "10s", "", " 10"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(tp::parse_knob_double(timeout, bad, "TENSORPLAY_PEER_TIMEOUT"),
                    std::invalid_argument);
  }
  CHECK_THROWS_WITH(tp::parse_knob_double(timeout, "10s", "TENSORPLAY_PEER_TIMEOUT"),
                    Catch::Contains("TENSORPLAY_PEER_TIMEOUT=10s") &&
                        Catch::Contains("a number from 0.1 to 3600") &&
                        Catch::Contains("e.g. TENSORPLAY_PEER_TIMEOUT=30"));
}

TEST_CASE("a boolean knob accepts the usual words and nothing else", "[knobs]") {
  const tp::KnobSpec& tf32 = spec(tp::Knob::CudaTf32);
  for (const char* yes : {"1", "true", "TRUE", "yes", "Yes", "on"}) {
    CAPTURE(yes);
    CHECK(tp::parse_knob_bool(tf32, yes, "TENSORPLAY_CUDA_TF32"));
  }
  for (const char* no : {"0", "false", "no", "Off", "OFF"}) {
    CAPTURE(no);
    CHECK_FALSE(tp::parse_knob_bool(tf32, no, "TENSORPLAY_CUDA_TF32"));
  }
  for (const char* bad : {"2", "y", "maybe", "enabled", " 1"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH(tp::parse_knob_bool(tf32, bad, "TENSORPLAY_CUDA_TF32"),
                      Catch::Contains(std::string("TENSORPLAY_CUDA_TF32=") + bad) &&
                          Catch::Contains("e.g. TENSORPLAY_CUDA_TF32=1"));
  }
}

TEST_CASE("a text knob takes any text, a choice knob only its words", "[knobs]") {
  FakeEnvironment env({{"TENSORPLAY_LOG_DIR", "/tmp/some dir/with=signs"},
                       {"TENSORPLAY_UCX_ERROR_MODE", "peer"},
                       {"TENSORPLAY_CPU_ISA", "AVX2"}});
  CHECK(env.reader.get_string(tp::Knob::LogDir) == "/tmp/some dir/with=signs");
  CHECK(env.reader.get_string(tp::Knob::UcxErrorMode) == "peer");
  CHECK(env.reader.get_string(tp::Knob::TpLaunch).empty());  // unset, no default
  // Words are matched exactly: a choice is not a guess.
  CHECK_THROWS_WITH(env.reader.get_string(tp::Knob::CpuIsa),
                    Catch::Contains("TENSORPLAY_CPU_ISA=AVX2") &&
                        Catch::Contains("one of auto, scalar, sse4, avx2 or avx512") &&
                        Catch::Contains("e.g. TENSORPLAY_CPU_ISA=avx2"));
  const tp::KnobSpec& mode = spec(tp::Knob::UcxErrorMode);
  CHECK_THROWS_WITH(tp::parse_knob_choice(mode, "bogus", "TENSORPLAY_UCX_ERROR_MODE"),
                    Catch::Contains("one of auto, peer or none"));
}

TEST_CASE("an unset or empty knob reads as its default", "[knobs]") {
  FakeEnvironment env(std::map<std::string, std::string>{{"TENSORPLAY_NUM_THREADS", ""}});
  CHECK(env.reader.get_int(tp::Knob::NumThreads) == 0);
  CHECK_FALSE(env.reader.is_set(tp::Knob::UcxSpinUs));  // unset: the rank's cores decide
  CHECK(env.reader.get_double(tp::Knob::RdzvTimeout) == 300);
  CHECK(env.reader.get_double(tp::Knob::PeerTimeout) == 10);
  CHECK_FALSE(env.reader.get_bool(tp::Knob::CudaTf32));
  CHECK(env.reader.get_bool(tp::Knob::TorchInstall));
  CHECK(env.reader.get_string(tp::Knob::UcxErrorMode) == "auto");
  CHECK_FALSE(env.reader.is_set(tp::Knob::NumThreads));
  CHECK_FALSE(env.reader.is_set(tp::Knob::SpdlogLevel));
  const tp::KnobText text = env.reader.text(tp::Knob::NumThreads);
  CHECK(text.source == tp::KnobSource::Default);
  CHECK(text.text == "0");
  CHECK(text.variable.empty());
  CHECK(env.warnings.empty());
}

TEST_CASE("a bad value is an error where the knob is read", "[knobs]") {
  FakeEnvironment env({{"TENSORPLAY_UCX_SPIN_US", "fast"}, {"TP_PEER_TIMEOUT", "0"}});
  CHECK_THROWS_WITH(env.reader.get_int(tp::Knob::UcxSpinUs),
                    Catch::Contains("TENSORPLAY_UCX_SPIN_US=fast") &&
                        Catch::Contains("e.g. TENSORPLAY_UCX_SPIN_US=50"));
  // Read through the old name, the error names the variable that holds the value and shows the
  // new name in its example.
  CHECK_THROWS_WITH(env.reader.get_double(tp::Knob::PeerTimeout),
                    Catch::StartsWith("TP_PEER_TIMEOUT=0:") &&
                        Catch::Contains("e.g. TENSORPLAY_PEER_TIMEOUT=30"));
  // Reading a knob as another type than its row's is a programming error.
  CHECK_THROWS_AS(env.reader.get_int(tp::Knob::LogDir), std::logic_error);
  CHECK_THROWS_AS(env.reader.get_string(tp::Knob::NumThreads), std::logic_error);
  CHECK_THROWS_AS(env.reader.get_bool(tp::Knob::PeerTimeout), std::logic_error);
}

TEST_CASE("an old name still works, with one warning naming the new name", "[knobs]") {
  FakeEnvironment env({{"TP_PEER_TIMEOUT", "3"}, {"TP_LOG_DIR", "logs"}});
  CHECK(env.reader.get_double(tp::Knob::PeerTimeout) == 3);
  CHECK(env.reader.get_double(tp::Knob::PeerTimeout) == 3);
  CHECK(env.reader.is_set(tp::Knob::PeerTimeout));
  const tp::KnobText text = env.reader.text(tp::Knob::PeerTimeout);
  CHECK(text.source == tp::KnobSource::Alias);
  CHECK(text.variable == "TP_PEER_TIMEOUT");
  REQUIRE(env.warnings.size() == 1);  // once, however often it is read
  CHECK_THAT(env.warnings[0], Catch::Contains("TP_PEER_TIMEOUT is the old name of "
                                              "TENSORPLAY_PEER_TIMEOUT") &&
                                  Catch::Contains("set TENSORPLAY_PEER_TIMEOUT instead"));
  // Each knob warns once on its own.
  CHECK(env.reader.get_string(tp::Knob::LogDir) == "logs");
  CHECK(env.reader.get_string(tp::Knob::LogDir) == "logs");
  REQUIRE(env.warnings.size() == 2);
  CHECK_THAT(env.warnings[1], Catch::Contains("TP_LOG_DIR is the old name of TENSORPLAY_LOG_DIR"));
}

TEST_CASE("the new name wins over the old one, with a warning when they differ", "[knobs]") {
  FakeEnvironment same({{"TENSORPLAY_RDZV_TIMEOUT", "60"}, {"TP_RDZV_TIMEOUT", "60"}});
  CHECK(same.reader.get_double(tp::Knob::RdzvTimeout) == 60);
  CHECK(same.reader.text(tp::Knob::RdzvTimeout).source == tp::KnobSource::Environment);
  CHECK(same.warnings.empty());

  FakeEnvironment differ({{"TENSORPLAY_RDZV_TIMEOUT", "60"}, {"TP_RDZV_TIMEOUT", "5"}});
  CHECK(differ.reader.get_double(tp::Knob::RdzvTimeout) == 60);
  CHECK(differ.reader.get_double(tp::Knob::RdzvTimeout) == 60);
  REQUIRE(differ.warnings.size() == 1);
  CHECK_THAT(differ.warnings[0], Catch::Contains("TENSORPLAY_RDZV_TIMEOUT=60") &&
                                     Catch::Contains("TP_RDZV_TIMEOUT=5") &&
                                     Catch::Contains("using TENSORPLAY_RDZV_TIMEOUT"));

  // An old name set to a bad value is not read when the new name is set.
  FakeEnvironment bad_old({{"TENSORPLAY_PEER_TIMEOUT", "4"}, {"TP_PEER_TIMEOUT", "soon"}});
  CHECK(bad_old.reader.get_double(tp::Knob::PeerTimeout) == 4);

  // A secret is never shown, not even in a warning.
  FakeEnvironment token(
      {{"TENSORPLAY_CLUSTER_TOKEN", "new-secret"}, {"TP_CLUSTER_TOKEN", "old-secret"}});
  CHECK(token.reader.get_string(tp::Knob::ClusterToken) == "new-secret");
  REQUIRE(token.warnings.size() == 1);
  CHECK_THAT(token.warnings[0], !Catch::Contains("secret") && Catch::Contains("(hidden)"));
}

TEST_CASE("print lists every knob with its value and where it came from", "[knobs]") {
  FakeEnvironment env({{"TENSORPLAY_NUM_THREADS", "2"},
                       {"TP_PEER_TIMEOUT", "3"},
                       {"TENSORPLAY_CLUSTER_TOKEN", "do-not-print"},
                       {"TENSORPLAY_UCX_SPIN_US", "fast"}});
  std::ostringstream out;
  CHECK(env.reader.print(out) == 1);  // one bad value
  const std::string text = out.str();
  INFO(text);
  std::map<std::string, std::string> lines;  // name -> its line
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    lines[line.substr(0, line.find('='))] = line;
  }
  CHECK(lines.size() == tp::kKnobCount);
  for (const tp::KnobSpec& row : tp::knob_table()) {
    CAPTURE(row.name);
    REQUIRE(lines.count(std::string(row.name)) == 1);
    CHECK_THAT(text, Catch::Contains("# " + std::string(row.doc)));
  }
  CHECK_THAT(lines["TENSORPLAY_NUM_THREADS"],
             Catch::StartsWith("TENSORPLAY_NUM_THREADS=2 ") && Catch::EndsWith("# environment"));
  CHECK_THAT(lines["TENSORPLAY_PEER_TIMEOUT"], Catch::StartsWith("TENSORPLAY_PEER_TIMEOUT=3 ") &&
                                                   Catch::EndsWith("# alias TP_PEER_TIMEOUT"));
  CHECK_THAT(lines["TENSORPLAY_CPU_ISA"],
             Catch::StartsWith("TENSORPLAY_CPU_ISA=auto ") && Catch::EndsWith("# default"));
  CHECK_THAT(lines["TENSORPLAY_LOG_DIR"],
             Catch::StartsWith("TENSORPLAY_LOG_DIR= ") && Catch::EndsWith("# default"));
  CHECK_THAT(lines["TENSORPLAY_CLUSTER_TOKEN"],
             Catch::StartsWith("TENSORPLAY_CLUSTER_TOKEN=(hidden) "));
  CHECK_THAT(text, !Catch::Contains("do-not-print"));
  CHECK_THAT(lines["TENSORPLAY_UCX_SPIN_US"],
             Catch::Contains("# environment; INVALID: TENSORPLAY_UCX_SPIN_US=fast: expected"));
  CHECK(env.warnings.empty());  // printing describes the old names, it does not warn
  CHECK_THAT(env.reader.problem(tp::Knob::UcxSpinUs),
             Catch::StartsWith("TENSORPLAY_UCX_SPIN_US=fast: expected"));
  CHECK(env.reader.problem(tp::Knob::PeerTimeout).empty());
  CHECK(env.reader.problem(tp::Knob::LogDir).empty());
  CHECK(env.warnings.empty());
}

TEST_CASE("the process reader reads the process environment", "[knobs]") {
  ::setenv("TENSORPLAY_TP_LAUNCH", "/opt/tp-launch", 1);
  CHECK(tp::knob_string(tp::Knob::TpLaunch) == "/opt/tp-launch");
  CHECK(tp::knob_is_set(tp::Knob::TpLaunch));
  ::unsetenv("TENSORPLAY_TP_LAUNCH");
  CHECK_FALSE(tp::knob_is_set(tp::Knob::TpLaunch));
  ::setenv("TENSORPLAY_TORCH_INSTALL", "nope", 1);
  CHECK_THROWS_WITH(tp::knob_bool(tp::Knob::TorchInstall),
                    Catch::Contains("TENSORPLAY_TORCH_INSTALL=nope"));
  ::unsetenv("TENSORPLAY_TORCH_INSTALL");
  CHECK(tp::knob_bool(tp::Knob::TorchInstall));
}

TEST_CASE("the table of knobs in docs/knobs.md matches the code's table", "[knobs]") {
  std::ifstream doc(TENSORPLAY_KNOBS_DOC);
  REQUIRE(doc);
  // The rows of the table headed "| knob | old name | default | ...":
  // | `NAME` | `OLD NAME` or empty | `DEFAULT` or unset | ...
  std::map<std::string, std::pair<std::string, std::string>> documented;
  bool in_table = false;
  for (std::string line; std::getline(doc, line);) {
    if (line.rfind("| knob | old name | default |", 0) == 0) in_table = true;
    if (line.rfind("|", 0) != 0) in_table = false;
    if (!in_table || line.rfind("| `", 0) != 0) continue;
    std::vector<std::string> cells;
    std::istringstream row(line.substr(1));
    for (std::string cell; std::getline(row, cell, '|');) cells.push_back(cell);
    REQUIRE(cells.size() >= 4);
    const std::string name = unquote(cells[0]);
    const std::string default_cell = trim(cells[2]);
    CAPTURE(line);
    CHECK(documented.count(name) == 0);
    documented[name] = {unquote(cells[1]), default_cell == "unset" ? "" : unquote(default_cell)};
  }
  REQUIRE(!documented.empty());
  for (const tp::KnobSpec& row : tp::knob_table()) {
    const std::string name(row.name);
    CAPTURE(name);
    REQUIRE(documented.count(name) == 1);  // every knob is documented
    CHECK(documented[name].first == row.alias);
    CHECK(documented[name].second == row.default_text);
  }
  for (const auto& [name, cells] : documented) {
    CAPTURE(name);
    CHECK(tp::find_knob(name) != nullptr);  // nothing documented that does not exist
    if (tp::find_knob(name)) CHECK(tp::find_knob(name)->name == name);
  }
}
