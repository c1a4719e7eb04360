// Random tensors, drawn on the host from a seeded stream so every device sees the same values.
#include "tensorplay/core/random.h"

#include <cmath>
#include <utility>
#include <vector>

namespace tensorplay {

namespace {
thread_local detail::DrawHook draw_hook = nullptr;
// Engines the hook substituted on this thread, per generator.
thread_local std::vector<std::pair<const Generator*, std::mt19937_64*>> substitutes;

std::mt19937_64* substitute_of(const Generator* g) {
  for (const auto& [owner, engine] : substitutes)
    if (owner == g) return engine;
  return nullptr;
}
}  // namespace

detail::DrawHook detail::set_draw_hook(DrawHook hook) {
  DrawHook previous = draw_hook;
  draw_hook = hook;
  if (!hook) substitutes.clear();
  return previous;
}

std::unique_lock<std::mutex> Generator::lock() {
  std::unique_lock<std::mutex> guard(mutex_);
  if (draw_hook) {
    std::mt19937_64* engine = draw_hook(*this);
    std::erase_if(substitutes, [this](const auto& s) { return s.first == this; });
    if (engine) substitutes.emplace_back(this, engine);
  }
  return guard;
}

double Generator::uniform() {
  std::mt19937_64* substitute = substitutes.empty() ? nullptr : substitute_of(this);
  std::mt19937_64& engine = substitute ? *substitute : engine_;
  return static_cast<double>(engine() >> 11) * (1.0 / 9007199254740992.0);
}

double Generator::normal() {
  // Box-Muller on two uniforms; deterministic across platforms (unlike std::normal_distribution).
  double u1 = uniform();
  double u2 = uniform();
  if (u1 < 1e-300) u1 = 1e-300;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

Generator& default_generator() {
  static Generator generator(0);
  return generator;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

namespace {
template <typename F>
Tensor generate(Generator& g, const Shape& shape, TensorOptions options, F draw) {
  std::vector<float> v(numel(shape));
  {
    auto lock = g.lock();
    for (float& x : v) x = draw();
  }
  return from_vector(v, shape, options);
}
}  // namespace

Tensor randn(const Shape& shape, TensorOptions options, Generator* generator) {
  Generator& g = generator ? *generator : default_generator();
  return generate(g, shape, options, [&] { return static_cast<float>(g.normal()); });
}

Tensor rand_uniform(const Shape& shape, float low, float high, TensorOptions options,
                    Generator* generator) {
  Generator& g = generator ? *generator : default_generator();
  return generate(g, shape, options,
                  [&] { return low + static_cast<float>(g.uniform()) * (high - low); });
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions options,
               Generator* generator) {
  Generator& g = generator ? *generator : default_generator();
  return generate(g, shape, options, [&] {
    return static_cast<float>(low + static_cast<int64_t>(g.uniform() * (high - low)));
  });
}

}  // namespace tensorplay
