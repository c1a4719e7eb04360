// Seeded random number generation: a Generator per stream and a process-wide default, so runs with
// the same seed produce the same tensors on every device (values are drawn on the host).
#pragma once

#include <cstdint>
#include <mutex>
#include <random>

#include "tensorplay/core/tensor.h"

namespace tensorplay {

/// A seeded random stream (64-bit Mersenne Twister). The tensor factories and dropout hold
/// lock() while they draw, so stage actors on several threads may share one generator (the
/// default one); code drawing with uniform()/normal() from a shared generator holds it too.
class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : engine_(seed) {}
  void manual_seed(uint64_t seed) {
    std::lock_guard<std::mutex> guard(mutex_);
    engine_.seed(seed);
  }
  /// Uniform in [0, 1).
  double uniform();
  /// Standard normal.
  double normal();
  std::mt19937_64& engine() { return engine_; }
  /// Exclusive use of the stream while the returned lock lives. Code that draws takes it, which
  /// lets a checkpoint note the state each draw started from and replay it in the backward's
  /// recomputation (see detail::set_draw_hook).
  std::unique_lock<std::mutex> lock();

 private:
  std::mt19937_64 engine_;
  std::mutex mutex_;
};

namespace detail {
/// Called, on the thread that locks it, with every generator locked to draw from while installed.
/// It returns the engine this thread's draws from that generator use from then on instead of the
/// generator's own (until the next lock of it), or null for the generator's own. A checkpoint's
/// forward notes the states its draws start from; its recomputation replays them on private
/// copies, so the shared generator, and other threads drawing from it, are untouched.
using DrawHook = std::mt19937_64* (*)(Generator& generator);
/// Installs `hook` on this thread; null removes it and forgets the engines substituted. Returns the
/// previous hook.
DrawHook set_draw_hook(DrawHook hook);
}  // namespace detail

/// The process-wide default generator.
Generator& default_generator();
/// Reseeds the default generator.
void manual_seed(uint64_t seed);

/// Standard normal values.
Tensor randn(const Shape& shape, TensorOptions options = {}, Generator* generator = nullptr);
/// Uniform values in [low, high).
Tensor rand_uniform(const Shape& shape, float low, float high, TensorOptions options = {},
                    Generator* generator = nullptr);
/// Integers in [low, high) stored as float32 (token ids, class indices).
Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions options = {},
               Generator* generator = nullptr);

}  // namespace tensorplay
