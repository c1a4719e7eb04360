// Host kernel dispatch target (cpu_isa.h): Highway's target mask for the vector kernels, a flag for
// the scalar loops, and oneDNN's ISA ceiling for the products.
#include "tensorplay/core/cpu_isa.h"

#include <dnnl.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <stdexcept>

#include "hwy/targets.h"
#include "tensorplay/base/knobs.h"
#include "tensorplay/core/core_knobs.h"

namespace tensorplay {
namespace {

struct IsaTarget {
  const char* name;
  int64_t hwy_mask;  // 0: the scalar loops
  dnnl_cpu_isa_t dnnl_isa;
};

#ifndef HWY_AVX3_ZEN4
#define HWY_AVX3_ZEN4 0
#endif

constexpr IsaTarget kTargets[] = {
    {"avx512", HWY_AVX3 | HWY_AVX3_DL | HWY_AVX3_ZEN4, dnnl_cpu_isa_all},
    {"avx2", HWY_AVX2, dnnl_cpu_isa_avx2},
    {"sse4", HWY_SSE4, dnnl_cpu_isa_sse41},
    {"scalar", 0, dnnl_cpu_isa_sse41},
};

// What the machine supports, read before any restriction (SupportedTargets reports the
// restricted set after SetSupportedTargetsForTest).
int64_t machine_targets() {
  static const int64_t mask = hwy::SupportedTargets() & HWY_TARGETS;
  return mask;
}

bool available(const IsaTarget& t) { return t.hwy_mask == 0 || (machine_targets() & t.hwy_mask); }

std::string names_available() {
  std::string out;
  for (const auto& t : kTargets)
    if (available(t)) out += (out.empty() ? "" : ", ") + std::string(t.name);
  return out;
}

std::mutex mutex;
std::atomic<const IsaTarget*> current{nullptr};
bool dnnl_limited = false;

const IsaTarget& find(const std::string& name, const char* where) {
  for (const auto& t : kTargets) {
    if (name != t.name) continue;
    if (!available(t))
      throw std::invalid_argument(
          std::string(where) + "=" + name +
          ": this machine cannot run it; available here: " + names_available());
    return t;
  }
  throw std::invalid_argument(std::string(where) + "=" + name +
                              ": unknown target; use one of scalar, sse4, avx2, avx512 (available "
                              "here: " +
                              names_available() + ")");
}

void apply(const IsaTarget& t) {
  // Highway: restrict the supported set to the chosen target (0 restores every target).
  const int64_t machine = machine_targets();
  hwy::SetSupportedTargetsForTest(t.hwy_mask == 0 ? 0 : (machine & t.hwy_mask));
  hwy::GetChosenTarget().Update(hwy::SupportedTargets());
  current.store(&t);
}

const IsaTarget& ensure_chosen() {
  if (const IsaTarget* t = current.load()) return *t;
  std::lock_guard<std::mutex> lock(mutex);
  if (const IsaTarget* t = current.load()) return *t;
  const std::string wanted = knob_string(kCpuIsaKnob);
  const IsaTarget* chosen = nullptr;
  if (wanted != "auto") {
    chosen = &find(wanted, "TENSORPLAY_CPU_ISA");
    // oneDNN takes an ISA ceiling once, before its first product: an AVX2 run is AVX2 throughout.
    if (chosen->dnnl_isa != dnnl_cpu_isa_all && !dnnl_limited) {
      dnnl_set_max_cpu_isa(chosen->dnnl_isa);
      dnnl_limited = true;
    }
  } else {
    for (const auto& t : kTargets)
      if (available(t)) {
        chosen = &t;
        break;
      }
  }
  apply(*chosen);
  return *chosen;
}

}  // namespace

std::string cpu_isa() { return ensure_chosen().name; }

std::vector<std::string> available_cpu_isas() {
  std::vector<std::string> out;
  for (const auto& t : kTargets)
    if (available(t)) out.push_back(t.name);
  return out;
}

void set_cpu_isa(const std::string& isa) {
  ensure_chosen();
  std::lock_guard<std::mutex> lock(mutex);
  apply(find(isa, "set_cpu_isa"));
}

bool cpu_isa_is_vector() { return ensure_chosen().hwy_mask != 0; }

}  // namespace tensorplay
