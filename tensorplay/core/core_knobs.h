// The knobs of the tensors layer: the CPU target and threads, the host cache, and the CUDA
// settings; each read where its row is named (cpu_isa.cpp, cpu_threads.cpp, host_allocator.cpp,
// cuda/).
#pragma once

#include "tensorplay/base/base_knobs.h"
#include "tensorplay/base/knob_registry.h"
#include "tensorplay/base/knob_spec.h"

namespace tensorplay {

/// TENSORPLAY_CPU_ISA: the CPU target of the vector kernels.
inline constexpr KnobSpec kCpuIsaKnob{
    .name = "TENSORPLAY_CPU_ISA",
    .type = KnobType::Choice,
    .default_text = "auto",
    .choices = "auto|scalar|sse4|avx2|avx512",
    .example = "avx2",
    .doc =
        "the CPU target of the vector kernels and oneDNN's ceiling (auto: the widest this "
        "machine has)"};

/// TENSORPLAY_NUM_THREADS: product threads of every thread that sets none.
inline constexpr KnobSpec kNumThreadsKnob{
    .name = "TENSORPLAY_NUM_THREADS",
    .type = KnobType::Int,
    .default_text = "0",
    .min = 0,
    .max = 4096,
    .example = "4",
    .doc = "product threads of every thread that sets none (0: its share of the host's cores)"};

/// TENSORPLAY_HOST_CACHE_MB: MiB of freed host blocks kept for reuse.
inline constexpr KnobSpec kHostCacheMbKnob{
    .name = "TENSORPLAY_HOST_CACHE_MB",
    .type = KnobType::Int,
    .default_text = "1024",
    .min = 0,
    .max = 1099511627776.0,
    .example = "256",
    .doc = "MiB of freed host blocks kept for reuse (0: none; sanitizer builds default to 0)"};

/// TENSORPLAY_CUDA_TF32: let cuBLAS use TF32 tensor cores.
inline constexpr KnobSpec kCudaTf32Knob{
    .name = "TENSORPLAY_CUDA_TF32",
    .type = KnobType::Bool,
    .default_text = "0",
    .example = "1",
    .doc = "let cuBLAS use TF32 tensor cores for float32 products"};

/// CUDA_DEVICE_MAX_CONNECTIONS: CUDA's own hardware work queues per GPU.
inline constexpr KnobSpec kCudaDeviceMaxConnectionsKnob{
    .name = "CUDA_DEVICE_MAX_CONNECTIONS",
    .type = KnobType::Int,
    .default_text = "8",
    .min = 1,
    .max = 32,
    .example = "32",
    .doc =
        "CUDA's own: hardware work queues per GPU; tensorplay sets 32 when unset, so that every "
        "NCCL link's stream has one (an NCCL channel of more ranks than fit refuses to start)",
    .third_party = true};

/// The tensors layer's rows, in their order.
inline constexpr const KnobSpec* kCoreKnobs[] = {&kCpuIsaKnob, &kNumThreadsKnob, &kHostCacheMbKnob,
                                                 &kCudaTf32Knob, &kCudaDeviceMaxConnectionsKnob};

/// Registers the knobs of base and of the tensors layer (knob_registry.h).
inline void register_core_knobs() {
  register_base_knobs();
  register_knobs("tensors", kCoreKnobs);
}

}  // namespace tensorplay
