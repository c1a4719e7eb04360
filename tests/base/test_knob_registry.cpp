// Tests for knob_registry.h and the layers' rows (base_knobs.h, core_knobs.h, transport_knobs.h,
// wire_knobs.h, observe_knobs.h, distributed_knobs.h, tensorplay/knobs.h, bench/bench_knobs.h):
// each layer registers its own rows after those below it, the table is well formed, clashes are
// refused, and docs/knobs.md lists exactly the table.
#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <set>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/bench_knobs.h"
#include "tensorplay/base/base_knobs.h"
#include "tensorplay/base/knob_registry.h"
#include "tensorplay/core/core_knobs.h"
#include "tensorplay/distributed/distributed_knobs.h"
#include "tensorplay/knobs.h"
#include "tensorplay/observe/observe_knobs.h"
#include "tensorplay/transport/transport_knobs.h"
#include "tensorplay/wire/wire_knobs.h"

namespace tp = tensorplay;

namespace {

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

// The position of a knob in the table, or -1.
int position(std::string_view name) {
  const auto table = tp::knob_table();
  for (size_t i = 0; i < table.size(); ++i)
    if (table[i].get().name == name) return static_cast<int>(i);
  return -1;
}

}  // namespace

TEST_CASE("every row of the knob table is well formed", "[knobs]") {
  bench::register_bench_knobs();
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
  CHECK(tp::knob_table().size() == 16);  // every layer's rows and the benchmarks'
  CHECK(tp::find_knob("TENSORPLAY_NO_SUCH_KNOB") == nullptr);
  CHECK(tp::find_knob("") == nullptr);
}

TEST_CASE("the knobs of every layer are in the table", "[knobs]") {
  bench::register_bench_knobs();
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
  const tp::KnobSpec& rdzv = tp::distributed::kRdzvTimeoutKnob;
  CHECK(rdzv.default_text == "300");  // init_process_group's own; tp-launch sets 900
  CHECK(rdzv.min == 0.1);
}

TEST_CASE("each layer registers its rows after those of the layers below it", "[knobs]") {
  // A layer's registration registers the layers below it first: registering the observe/ rows
  // alone brings base's, the tensors layer's, transport's and wire's.
  tp::pipelining::register_observe_knobs();
  CHECK(tp::find_knob("TENSORPLAY_LOG_DIR") == &tp::pipelining::kLogDirKnob);
  CHECK(tp::find_knob("TP_PEER_TIMEOUT") == &tp::pipelining::kPeerTimeoutKnob);
  CHECK(tp::find_knob("TENSORPLAY_UCX_SPIN_US") == &tp::transport::kUcxSpinUsKnob);
  CHECK(tp::find_knob("TENSORPLAY_CPU_ISA") == &tp::kCpuIsaKnob);
  CHECK(tp::find_knob("SPDLOG_LEVEL") == &tp::kSpdlogLevelKnob);
  bench::register_bench_knobs();
  tp::register_library_knobs();  // again: a no-op
  const std::vector<std::string_view> layers = tp::knob_layers();
  CHECK(layers == std::vector<std::string_view>{"base", "tensors", "transport", "wire", "observe",
                                                "distributed", "bench"});
  // The table follows the layers from the bottom up, each layer's rows in its own order.
  CHECK(position("SPDLOG_LEVEL") == 0);
  CHECK(position("TENSORPLAY_CPU_ISA") == 1);
  CHECK(position("CUDA_DEVICE_MAX_CONNECTIONS") == 5);
  CHECK(position("TENSORPLAY_UCX_SPIN_US") < position("TENSORPLAY_PEER_TIMEOUT"));
  CHECK(position("TENSORPLAY_PEER_TIMEOUT") < position("TENSORPLAY_LOG_DIR"));
  CHECK(position("TENSORPLAY_LOG_DIR") < position("TENSORPLAY_CLUSTER_TOKEN"));
  CHECK(position("TENSORPLAY_RDZV_TIMEOUT") < position("TENSORPLAY_TORCH_VENV"));
  CHECK(position("TENSORPLAY_TP_LAUNCH") == 15);
  // Every row a layer lists is in the table once, at its own address.
  using Rows = std::span<const tp::KnobSpec* const>;
  for (Rows rows :
       {Rows(tp::kBaseKnobs), Rows(tp::kCoreKnobs), Rows(tp::transport::kTransportKnobs),
        Rows(tp::pipelining::kWireKnobs), Rows(tp::pipelining::kObserveKnobs),
        Rows(tp::distributed::kDistributedKnobs), Rows(bench::kBenchKnobs)})
    for (const tp::KnobSpec* row : rows) {
      CAPTURE(row->name);
      CHECK(tp::find_knob(row->name) == row);
    }
}

TEST_CASE("a layer registered again changes nothing, and a clash is refused", "[knobs]") {
  bench::register_bench_knobs();
  const size_t rows = tp::knob_table().size();
  // A layer's second registration is a no-op, even with other rows.
  static constexpr tp::KnobSpec kOther{.name = "TENSORPLAY_OTHER", .example = "x", .doc = "x"};
  static constexpr const tp::KnobSpec* kOthers[] = {&kOther};
  tp::register_knobs("tensors", kOthers);
  CHECK(tp::knob_table().size() == rows);
  CHECK(tp::find_knob("TENSORPLAY_OTHER") == nullptr);
  // A variable is declared once: another row with a registered name or old name is refused,
  // naming both layers, and the table is left as it was.
  static constexpr tp::KnobSpec kThreadsAgain{
      .name = "TENSORPLAY_NUM_THREADS", .example = "1", .doc = "x"};
  static constexpr const tp::KnobSpec* kClash[] = {&kOther, &kThreadsAgain};
  CHECK_THROWS_WITH(tp::register_knobs("test", kClash),
                    Catch::Contains("TENSORPLAY_NUM_THREADS of layer test") &&
                        Catch::Contains("already a row of layer tensors"));
  static constexpr tp::KnobSpec kOldName{
      .name = "TENSORPLAY_NEW_PEER", .alias = "TP_PEER_TIMEOUT", .example = "1", .doc = "x"};
  static constexpr const tp::KnobSpec* kAliasClash[] = {&kOldName};
  CHECK_THROWS_WITH(tp::register_knobs("test", kAliasClash),
                    Catch::Contains("TP_PEER_TIMEOUT") && Catch::Contains("layer wire"));
  static constexpr const tp::KnobSpec* kTwice[] = {&kOther, &kOther};
  CHECK_THROWS_WITH(tp::register_knobs("test", kTwice),
                    Catch::Contains("lists knob TENSORPLAY_OTHER twice"));
  CHECK(tp::knob_table().size() == rows);
  CHECK(tp::find_knob("TENSORPLAY_OTHER") == nullptr);
  CHECK(tp::find_knob("TENSORPLAY_NEW_PEER") == nullptr);
  CHECK(tp::find_knob("") == nullptr);
}

TEST_CASE("the table of knobs in docs/knobs.md matches the code's table", "[knobs]") {
  bench::register_bench_knobs();
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
