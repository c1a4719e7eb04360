// Which vector unit the host kernels use: the widest the machine has, or the one named by the
// knob TENSORPLAY_CPU_ISA (auto, scalar, sse4, avx2, avx512) to test or compare targets.
#pragma once

#include <string>
#include <vector>

namespace tensorplay {

/// The dispatch target the host kernels run on now: "avx512", "avx2", "sse4" or "scalar" (the
/// plain C++ loops). Chosen at the first kernel call from TENSORPLAY_CPU_ISA, else the widest.
std::string cpu_isa();

/// The targets this machine can run, widest first; "scalar" is always last.
std::vector<std::string> available_cpu_isas();

/// Switches the host kernels to `isa` (one of available_cpu_isas()); throws std::invalid_argument
/// naming the available targets otherwise. Call it between computations, not during one. The
/// products' own dispatch (oneDNN) follows only the first choice made in a process.
void set_cpu_isa(const std::string& isa);

/// Whether the chosen target runs the vector kernels (every target but "scalar").
bool cpu_isa_is_vector();

}  // namespace tensorplay
