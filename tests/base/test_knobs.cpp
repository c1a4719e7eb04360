// Tests for knobs.h: reading knobs through a reader (defaults, bad values where read, old names
// and their one-time warnings, which name wins), the print-out of tp-launch --print-config, and
// the process's own reader.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_knobs.h"
#include "tensorplay/base/base_knobs.h"
#include "tensorplay/base/knobs.h"
#include "tensorplay/core/core_knobs.h"
#include "tensorplay/distributed/distributed_knobs.h"
#include "tensorplay/observe/observe_knobs.h"
#include "tensorplay/transport/transport_knobs.h"
#include "tensorplay/wire/wire_knobs.h"

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

}  // namespace

TEST_CASE("a text knob takes any text, a choice knob only its words", "[knobs]") {
  FakeEnvironment env({{"TENSORPLAY_LOG_DIR", "/tmp/some dir/with=signs"},
                       {"TENSORPLAY_UCX_ERROR_MODE", "peer"},
                       {"TENSORPLAY_CPU_ISA", "AVX2"}});
  CHECK(env.reader.get_string(tp::pipelining::kLogDirKnob) == "/tmp/some dir/with=signs");
  CHECK(env.reader.get_string(tp::transport::kUcxErrorModeKnob) == "peer");
  CHECK(env.reader.get_string(bench::kTpLaunchKnob).empty());  // unset, no default
  // Words are matched exactly: a choice is not a guess.
  CHECK_THROWS_WITH(env.reader.get_string(tp::kCpuIsaKnob),
                    Catch::Contains("TENSORPLAY_CPU_ISA=AVX2") &&
                        Catch::Contains("one of auto, scalar, sse4, avx2 or avx512") &&
                        Catch::Contains("e.g. TENSORPLAY_CPU_ISA=avx2"));
  const tp::KnobSpec& mode = tp::transport::kUcxErrorModeKnob;
  CHECK_THROWS_WITH(tp::parse_knob_choice(mode, "bogus", "TENSORPLAY_UCX_ERROR_MODE"),
                    Catch::Contains("one of auto, peer or none"));
}

TEST_CASE("an unset or empty knob reads as its default", "[knobs]") {
  FakeEnvironment env(std::map<std::string, std::string>{{"TENSORPLAY_NUM_THREADS", ""}});
  CHECK(env.reader.get_int(tp::kNumThreadsKnob) == 0);
  CHECK_FALSE(env.reader.is_set(tp::transport::kUcxSpinUsKnob));  // unset: the rank's cores decide
  CHECK(env.reader.get_double(tp::distributed::kRdzvTimeoutKnob) == 300);
  CHECK(env.reader.get_double(tp::pipelining::kPeerTimeoutKnob) == 10);
  CHECK_FALSE(env.reader.get_bool(tp::kCudaTf32Knob));
  CHECK(env.reader.get_bool(bench::kTorchInstallKnob));
  CHECK(env.reader.get_string(tp::transport::kUcxErrorModeKnob) == "auto");
  CHECK_FALSE(env.reader.is_set(tp::kNumThreadsKnob));
  CHECK_FALSE(env.reader.is_set(tp::kSpdlogLevelKnob));
  const tp::KnobText text = env.reader.text(tp::kNumThreadsKnob);
  CHECK(text.source == tp::KnobSource::Default);
  CHECK(text.text == "0");
  CHECK(text.variable.empty());
  CHECK(env.warnings.empty());
}

TEST_CASE("a bad value is an error where the knob is read", "[knobs]") {
  FakeEnvironment env({{"TENSORPLAY_UCX_SPIN_US", "fast"}, {"TP_PEER_TIMEOUT", "0"}});
  CHECK_THROWS_WITH(env.reader.get_int(tp::transport::kUcxSpinUsKnob),
                    Catch::Contains("TENSORPLAY_UCX_SPIN_US=fast") &&
                        Catch::Contains("e.g. TENSORPLAY_UCX_SPIN_US=50"));
  // Read through the old name, the error names the variable that holds the value and shows the
  // new name in its example.
  CHECK_THROWS_WITH(env.reader.get_double(tp::pipelining::kPeerTimeoutKnob),
                    Catch::StartsWith("TP_PEER_TIMEOUT=0:") &&
                        Catch::Contains("e.g. TENSORPLAY_PEER_TIMEOUT=30"));
  // Reading a knob as another type than its row's is a programming error.
  CHECK_THROWS_AS(env.reader.get_int(tp::pipelining::kLogDirKnob), std::logic_error);
  CHECK_THROWS_AS(env.reader.get_string(tp::kNumThreadsKnob), std::logic_error);
  CHECK_THROWS_AS(env.reader.get_bool(tp::pipelining::kPeerTimeoutKnob), std::logic_error);
}

TEST_CASE("an old name still works, with one warning naming the new name", "[knobs]") {
  FakeEnvironment env({{"TP_PEER_TIMEOUT", "3"}, {"TP_LOG_DIR", "logs"}});
  CHECK(env.reader.get_double(tp::pipelining::kPeerTimeoutKnob) == 3);
  CHECK(env.reader.get_double(tp::pipelining::kPeerTimeoutKnob) == 3);
  CHECK(env.reader.is_set(tp::pipelining::kPeerTimeoutKnob));
  const tp::KnobText text = env.reader.text(tp::pipelining::kPeerTimeoutKnob);
  CHECK(text.source == tp::KnobSource::Alias);
  CHECK(text.variable == "TP_PEER_TIMEOUT");
  REQUIRE(env.warnings.size() == 1);  // once, however often it is read
  CHECK_THAT(env.warnings[0], Catch::Contains("TP_PEER_TIMEOUT is the old name of "
                                              "TENSORPLAY_PEER_TIMEOUT") &&
                                  Catch::Contains("set TENSORPLAY_PEER_TIMEOUT instead"));
  // Each knob warns once on its own.
  CHECK(env.reader.get_string(tp::pipelining::kLogDirKnob) == "logs");
  CHECK(env.reader.get_string(tp::pipelining::kLogDirKnob) == "logs");
  REQUIRE(env.warnings.size() == 2);
  CHECK_THAT(env.warnings[1], Catch::Contains("TP_LOG_DIR is the old name of TENSORPLAY_LOG_DIR"));
}

TEST_CASE("the new name wins over the old one, with a warning when they differ", "[knobs]") {
  FakeEnvironment same({{"TENSORPLAY_RDZV_TIMEOUT", "60"}, {"TP_RDZV_TIMEOUT", "60"}});
  CHECK(same.reader.get_double(tp::distributed::kRdzvTimeoutKnob) == 60);
  CHECK(same.reader.text(tp::distributed::kRdzvTimeoutKnob).source == tp::KnobSource::Environment);
  CHECK(same.warnings.empty());

  FakeEnvironment differ({{"TENSORPLAY_RDZV_TIMEOUT", "60"}, {"TP_RDZV_TIMEOUT", "5"}});
  CHECK(differ.reader.get_double(tp::distributed::kRdzvTimeoutKnob) == 60);
  CHECK(differ.reader.get_double(tp::distributed::kRdzvTimeoutKnob) == 60);
  REQUIRE(differ.warnings.size() == 1);
  CHECK_THAT(differ.warnings[0], Catch::Contains("TENSORPLAY_RDZV_TIMEOUT=60") &&
                                     Catch::Contains("TP_RDZV_TIMEOUT=5") &&
                                     Catch::Contains("using TENSORPLAY_RDZV_TIMEOUT"));

  // An old name set to a bad value is not read when the new name is set.
  FakeEnvironment bad_old({{"TENSORPLAY_PEER_TIMEOUT", "4"}, {"TP_PEER_TIMEOUT", "soon"}});
  CHECK(bad_old.reader.get_double(tp::pipelining::kPeerTimeoutKnob) == 4);

  // A secret is never shown, not even in a warning.
  FakeEnvironment token(
      {{"TENSORPLAY_CLUSTER_TOKEN", "new-secret"}, {"TP_CLUSTER_TOKEN", "old-secret"}});
  CHECK(token.reader.get_string(tp::distributed::kClusterTokenKnob) == "new-secret");
  REQUIRE(token.warnings.size() == 1);
  CHECK_THAT(token.warnings[0], !Catch::Contains("secret") && Catch::Contains("(hidden)"));
}

TEST_CASE("print lists every knob with its value and where it came from", "[knobs]") {
  bench::register_bench_knobs();
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
  CHECK(lines.size() == tp::knob_table().size());
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
  CHECK_THAT(env.reader.problem(tp::transport::kUcxSpinUsKnob),
             Catch::StartsWith("TENSORPLAY_UCX_SPIN_US=fast: expected"));
  CHECK(env.reader.problem(tp::pipelining::kPeerTimeoutKnob).empty());
  CHECK(env.reader.problem(tp::pipelining::kLogDirKnob).empty());
  CHECK(env.warnings.empty());
}

TEST_CASE("the process reader reads the process environment", "[knobs]") {
  ::setenv("TENSORPLAY_TP_LAUNCH", "/opt/tp-launch", 1);
  CHECK(tp::knob_string(bench::kTpLaunchKnob) == "/opt/tp-launch");
  CHECK(tp::knob_is_set(bench::kTpLaunchKnob));
  ::unsetenv("TENSORPLAY_TP_LAUNCH");
  CHECK_FALSE(tp::knob_is_set(bench::kTpLaunchKnob));
  ::setenv("TENSORPLAY_TORCH_INSTALL", "nope", 1);
  CHECK_THROWS_WITH(tp::knob_bool(bench::kTorchInstallKnob),
                    Catch::Contains("TENSORPLAY_TORCH_INSTALL=nope"));
  ::unsetenv("TENSORPLAY_TORCH_INSTALL");
  CHECK(tp::knob_bool(bench::kTorchInstallKnob));
}
