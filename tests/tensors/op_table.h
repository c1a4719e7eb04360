// Harness of the op table (test_op_table.cpp), in the style of ggml's test-backend-ops: each case
// names an op, its inputs and a float64 reference; the runner checks forward, gradients (against
// central differences of the reference), split backward (I then W) and CUDA against CPU, in
// float32 and in bfloat16.
#pragma once

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "tensorplay/core/trace_hook.h"
#include "tensorplay/tensor.h"

namespace optest {

namespace tp = tensorplay;

using Values = std::vector<double>;

/// How an input is drawn.
enum class Fill {
  Normal,    // standard normal
  Positive,  // uniform in [0.5, 2) (log, sqrt, divisors)
  Ids,       // integers in [0, range) (embedding ids)
  Targets,   // integers in [0, range), with row 1 set to -100 (the default ignore_index)
};

/// One input of a case.
struct Input {
  tp::Shape shape;
  Fill fill = Fill::Normal;
  bool grad = true;   // requires_grad, and its gradient is checked
  int64_t range = 0;  // for Ids and Targets
};

/// One row of the op table.
struct OpCase {
  std::string name;
  std::vector<Input> inputs;
  /// Runs the op through the public API; returns its outputs.
  std::function<std::vector<tp::Tensor>(const std::vector<tp::Tensor>&)> run;
  /// Independent float64 reference: the outputs' values (row-major) from the inputs' values.
  std::function<std::vector<Values>(const std::vector<Values>&)> reference;
  std::vector<tp::Shape> out_shapes;
  /// Forward: |y - ref| <= fwd_tol * max |ref| (float32 rounding against exact float64).
  double fwd_tol = 1e-5;
  /// Gradient: |g - fd| <= grad_tol * max |fd| of that input (central differences in float64).
  double grad_tol = 1e-4;
  /// How many leading gradient-carrying inputs are activations in the split check (the rest
  /// are weights, whose gradients come only from backward_weight).
  int activations = 1;
};

/// Positions and values the non-finite check writes into every value input of a case.
struct NonFinite {
  std::string label;
  std::vector<std::pair<double, double>> at;  // (fraction of the input's length, value)
};

// -- reference helpers ----------------------------------------------------------------------------

inline int64_t count(const tp::Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

/// Row-major multi-index of flat position i in shape s.
inline std::vector<int64_t> unravel(int64_t i, const tp::Shape& s) {
  std::vector<int64_t> idx(s.size());
  for (int64_t d = static_cast<int64_t>(s.size()) - 1; d >= 0; --d) {
    idx[d] = i % s[d];
    i /= s[d];
  }
  return idx;
}

/// Flat position in `s` of the trailing-aligned multi-index `idx` (size-1 dims read index 0).
inline int64_t broadcast_offset(const std::vector<int64_t>& idx, const tp::Shape& s) {
  int64_t off = 0;
  size_t pad = idx.size() - s.size();
  for (size_t d = 0; d < s.size(); ++d) off = off * s[d] + (s[d] == 1 ? 0 : idx[d + pad]);
  return off;
}

/// x of shape s with its dimensions permuted: output dimension d is input dimension perm[d].
inline Values ref_permute(const Values& x, const tp::Shape& s, const std::vector<int64_t>& perm) {
  tp::Shape out(s.size());
  for (size_t d = 0; d < s.size(); ++d) out[d] = s[perm[d]];
  Values y(x.size());
  for (int64_t i = 0; i < count(out); ++i) {
    auto o = unravel(i, out);
    std::vector<int64_t> src(s.size());
    for (size_t d = 0; d < s.size(); ++d) src[perm[d]] = o[d];
    int64_t off = 0;
    for (size_t d = 0; d < s.size(); ++d) off = off * s[d] + src[d];
    y[i] = x[off];
  }
  return y;
}

/// Elementwise f(a, b) with numpy broadcasting to `out`.
template <typename F>
Values broadcast2(const Values& a, const tp::Shape& as, const Values& b, const tp::Shape& bs,
                  const tp::Shape& out, F f) {
  Values r(count(out));
  for (int64_t i = 0; i < count(out); ++i) {
    auto idx = unravel(i, out);
    r[i] = f(a[broadcast_offset(idx, as)], b[broadcast_offset(idx, bs)]);
  }
  return r;
}

template <typename F>
Values map1(const Values& a, F f) {
  Values r(a.size());
  for (size_t i = 0; i < a.size(); ++i) r[i] = f(a[i]);
  return r;
}

/// Batched C[b] = A[b] (m x k) B[b] (k x n); bb = false broadcasts one B.
inline Values ref_matmul(const Values& a, const Values& b, int64_t batch, int64_t m, int64_t k,
                         int64_t n, bool bb) {
  Values c(batch * m * n, 0.0);
  for (int64_t p = 0; p < batch; ++p)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t t = 0; t < k; ++t)
          s += a[(p * m + i) * k + t] * b[(bb ? p * k * n : 0) + t * n + j];
        c[(p * m + i) * n + j] = s;
      }
  return c;
}

/// Softmax (or log-softmax) of x viewed as [outer, n, inner] along the middle.
inline Values ref_softmax(const Values& x, int64_t outer, int64_t n, int64_t inner, bool log) {
  Values y(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t r) { return (o * n + r) * inner + i; };
      double mx = -1e300, s = 0;
      for (int64_t r = 0; r < n; ++r) mx = std::max(mx, x[at(r)]);
      for (int64_t r = 0; r < n; ++r) s += std::exp(x[at(r)] - mx);
      for (int64_t r = 0; r < n; ++r)
        y[at(r)] = log ? x[at(r)] - mx - std::log(s) : std::exp(x[at(r)] - mx) / s;
    }
  return y;
}

// -- runner ---------------------------------------------------------------------------------------

inline std::vector<float> values_of(const tp::Tensor& t) { return t.to_vector(); }

inline Values to_double(const std::vector<float>& v) { return Values(v.begin(), v.end()); }

/// The case's inputs on the CPU, drawn from a fixed seed.
inline std::vector<tp::Tensor> make_inputs(const OpCase& c, uint64_t seed) {
  tp::Generator gen(seed);
  std::vector<tp::Tensor> out;
  for (const Input& in : c.inputs) {
    switch (in.fill) {
      case Fill::Normal:
        out.push_back(tp::randn(in.shape, {}, &gen));
        break;
      case Fill::Positive:
        out.push_back(tp::rand_uniform(in.shape, 0.5f, 2.0f, {}, &gen));
        break;
      case Fill::Ids:
        out.push_back(tp::randint(0, in.range, in.shape, {}, &gen));
        break;
      case Fill::Targets: {
        std::vector<float> t = tp::randint(0, in.range, in.shape, {}, &gen).to_vector();
        if (t.size() > 1) t[1] = -100.0f;
        out.push_back(tp::from_vector(t, in.shape));
        break;
      }
    }
  }
  return out;
}

/// Fresh leaves holding `base` on `device`, requiring grad where the case says.
inline std::vector<tp::Tensor> leaves(const OpCase& c, const std::vector<tp::Tensor>& base,
                                      tp::Device device) {
  std::vector<tp::Tensor> out;
  for (size_t i = 0; i < base.size(); ++i) {
    tp::Tensor t = base[i].to(device).detach();  // a new leaf (sharing storage on the CPU)
    if (c.inputs[i].grad) t.requires_grad_();
    out.push_back(t);
  }
  return out;
}

/// Outputs and input gradients of one run.
struct RunResult {
  std::vector<std::vector<float>> outputs;
  std::vector<tp::Shape> shapes;
  std::vector<std::vector<float>> grads;  // per input; empty when the input has no gradient
};

inline RunResult collect(const std::vector<tp::Tensor>& outs, const std::vector<tp::Tensor>& in) {
  RunResult r;
  for (const auto& o : outs) {
    r.outputs.push_back(values_of(o));
    r.shapes.push_back(o.shape());
  }
  for (const auto& t : in) {
    if (!t.requires_grad()) {
      r.grads.emplace_back();
    } else if (t.grad().defined()) {
      r.grads.push_back(values_of(t.grad()));
    } else {
      r.grads.emplace_back(t.numel(), 0.0f);  // the op does not depend on this input
    }
  }
  return r;
}

/// Forward, then full backward with output gradients `seeds`.
inline RunResult run_full(const OpCase& c, const std::vector<tp::Tensor>& base,
                          const std::vector<tp::Tensor>& seeds, tp::Device device) {
  std::vector<tp::Tensor> in = leaves(c, base, device);
  std::vector<tp::Tensor> outs = c.run(in);
  std::vector<tp::Tensor> seeds_here;
  for (const auto& s : seeds) seeds_here.push_back(s.to(device));
  tp::autograd::backward(outs, seeds_here);
  return collect(outs, in);
}

/// Forward, then backward_input for the activations and backward_weight for the rest.
inline RunResult run_split(const OpCase& c, const std::vector<tp::Tensor>& base,
                           const std::vector<tp::Tensor>& seeds) {
  std::vector<tp::Tensor> in = leaves(c, base, tp::cpu());
  std::vector<tp::Tensor> outs = c.run(in);
  std::vector<tp::Tensor> activations;
  for (size_t i = 0; i < in.size() && static_cast<int>(activations.size()) < c.activations; ++i)
    if (c.inputs[i].grad) activations.push_back(in[i]);
  auto stash = tp::autograd::backward_input(outs, seeds, activations);
  for (size_t i = 0; i < in.size(); ++i) {
    bool is_activation = std::any_of(activations.begin(), activations.end(),
                                     [&](const tp::Tensor& a) { return a.is_same(in[i]); });
    if (c.inputs[i].grad && !is_activation) {
      INFO("weight input " << i << " must get its gradient only from backward_weight");
      CHECK_FALSE(in[i].grad().defined());
    }
  }
  tp::autograd::backward_weight(std::move(stash));
  return collect(outs, in);
}

/// Central differences of sum_k <ref_k(x), seed_k> with respect to input `which`.
inline Values finite_difference(const OpCase& c, std::vector<Values> x, size_t which,
                                const std::vector<Values>& seeds) {
  Values g(x[which].size());
  for (size_t e = 0; e < g.size(); ++e) {
    double x0 = x[which][e], h = 1e-5 * std::max(1.0, std::abs(x0));
    auto eval = [&](double v) {
      x[which][e] = v;
      std::vector<Values> y = c.reference(x);
      double s = 0;
      for (size_t k = 0; k < y.size(); ++k)
        for (size_t i = 0; i < y[k].size(); ++i) s += y[k][i] * seeds[k][i];
      return s;
    };
    double plus = eval(x0 + h), minus = eval(x0 - h);
    x[which][e] = x0;
    g[e] = (plus - minus) / (2 * h);
  }
  return g;
}

/// Counts elements of `got` farther than tol * scale from `want`, where scale is the largest
/// |want| (at least 1e-3): errors are measured against the tensor's magnitude. Reports the first.
template <typename A, typename B>
void check_close(const std::string& what, const A& got, const B& want, double tol) {
  REQUIRE(got.size() == want.size());
  double scale = 1e-3;
  for (const auto& v : want) scale = std::max(scale, std::abs(double(v)));
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double diff = std::abs(double(got[i]) - double(want[i]));
    if (!(diff <= tol * scale) && bad++ == 0) first = i;
  }
  INFO(what << ": " << bad << " of " << got.size() << " elements off; first at " << first
            << ": got " << (got.empty() ? 0.0 : double(got[first])) << ", want "
            << (want.empty() ? 0.0 : double(want[first])) << " (tol " << tol << " x " << scale
            << ")");
  CHECK(bad == 0);
}

/// Keeps every op reported while it is active.
class ReplayRecorder : public tp::trace::OpRecorder {
 public:
  struct Entry {
    std::string op;
    std::vector<tp::Tensor> inputs;
    tp::Tensor output;
    tp::trace::ReplayFn replay;
  };
  std::vector<Entry> entries;
  void record_op(const char* op, const std::vector<tp::Tensor>& inputs, const tp::Tensor& output,
                 tp::trace::ReplayFn replay) override {
    entries.push_back({op, inputs, output, std::move(replay)});
  }
  void record_split() override {}
  void enter_module(const std::string&) override {}
  void exit_module(const std::string&) override {}
};

/// Every op the case runs is reported to the tracer, and replaying each report on its recorded
/// inputs gives its recorded output (dropout excepted: a replay draws a new mask, by design).
inline void check_replay(const OpCase& c, const std::vector<tp::Tensor>& base) {
  ReplayRecorder recorder;
  std::vector<tp::Tensor> in = leaves(c, base, tp::cpu());
  tp::trace::OpRecorder* previous = tp::trace::set_active_recorder(&recorder);
  std::vector<tp::Tensor> outs;
  try {
    outs = c.run(in);
  } catch (...) {
    tp::trace::set_active_recorder(previous);
    throw;
  }
  tp::trace::set_active_recorder(previous);
  bool passes_input_through = std::any_of(outs.begin(), outs.end(), [&](const tp::Tensor& o) {
    return std::any_of(in.begin(), in.end(), [&](const tp::Tensor& i) { return i.is_same(o); });
  });
  if (!passes_input_through) {
    INFO("the op reports itself to the active trace recorder");
    CHECK_FALSE(recorder.entries.empty());
  }
  for (const auto& e : recorder.entries) {
    if (e.op == "dropout") continue;
    tp::Tensor again = e.replay(e.inputs);
    INFO("replay of traced op " << e.op << " reproduces its output");
    CHECK(again.shape() == e.output.shape());
    CHECK(values_of(again) == values_of(e.output));
  }
}

/// Checks one case on the CPU: forward vs reference, gradients vs finite differences, tracing
/// replay, and the split backward vs the full one (bit for bit).
inline void check_cpu(const OpCase& c, uint64_t seed) {
  std::vector<tp::Tensor> base = make_inputs(c, seed);
  std::vector<Values> xs;
  for (const auto& t : base) xs.push_back(to_double(values_of(t)));
  std::vector<Values> want = c.reference(xs);

  // Output gradients: fixed random seeds shaped like the outputs.
  tp::Generator gen(seed + 1);
  std::vector<tp::Tensor> seeds;
  std::vector<Values> seed_values;
  for (const auto& s : c.out_shapes) {
    seeds.push_back(tp::randn(s, {}, &gen));
    seed_values.push_back(to_double(values_of(seeds.back())));
  }

  RunResult full = run_full(c, base, seeds, tp::cpu());
  REQUIRE(full.outputs.size() == want.size());
  REQUIRE(full.shapes == c.out_shapes);
  for (size_t k = 0; k < want.size(); ++k)
    check_close("forward output " + std::to_string(k), full.outputs[k], want[k], c.fwd_tol);

  for (size_t i = 0; i < c.inputs.size(); ++i) {
    if (!c.inputs[i].grad) continue;
    Values fd = finite_difference(c, xs, i, seed_values);
    check_close("gradient of input " + std::to_string(i), full.grads[i], fd, c.grad_tol);
  }

  check_replay(c, base);

  RunResult split = run_split(c, base, seeds);
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    INFO("split backward (I then W) of input " << i << " equals full backward bit for bit");
    CHECK(split.grads[i] == full.grads[i]);
  }
}

/// Runs one case on CUDA and on the CPU from the same inputs and output gradients, and compares
/// outputs and gradients to the given relative tolerances.
inline void compare_cuda_with_cpu(const OpCase& c, const std::vector<tp::Tensor>& base,
                                  const std::vector<tp::Tensor>& seeds, double out_tol,
                                  double grad_tol, const std::string& label) {
  RunResult cpu = run_full(c, base, seeds, tp::cpu());
  RunResult gpu = run_full(c, base, seeds, tp::Device("cuda:0"));
  REQUIRE(gpu.shapes == cpu.shapes);
  for (size_t k = 0; k < cpu.outputs.size(); ++k)
    check_close(label + " output " + std::to_string(k), gpu.outputs[k], cpu.outputs[k], out_tol);
  for (size_t i = 0; i < cpu.grads.size(); ++i)
    check_close(label + " gradient " + std::to_string(i), gpu.grads[i], cpu.grads[i], grad_tol);
}

/// Runs one case on CUDA and on the CPU and compares outputs and gradients (1e-4 relative).
inline void check_cuda(const OpCase& c, uint64_t seed) {
  tp::Generator gen(seed + 1);
  std::vector<tp::Tensor> seeds;
  for (const auto& s : c.out_shapes) seeds.push_back(tp::randn(s, {}, &gen));
  compare_cuda_with_cpu(c, make_inputs(c, seed), seeds, 1e-4, 1e-4, "cuda");
}

// -- NaN and infinities ---------------------------------------------------------------------------

/// NaN alone, +Inf alone, -Inf alone, and all three in one input.
inline std::vector<NonFinite> nonfinite_variants() {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  return {{"NaN", {{0.0, nan}}},
          {"+Inf", {{0.5, inf}}},
          {"-Inf", {{1.0, -inf}}},
          {"NaN, +Inf and -Inf", {{0.0, nan}, {0.5, inf}, {1.0, -inf}}}};
}

/// Writes the variant's values into every value input (ids and targets stay as drawn).
inline std::vector<tp::Tensor> with_nonfinite(const OpCase& c, std::vector<tp::Tensor> base,
                                              const NonFinite& variant);

/// Compares outputs with the float64 reference the way PyTorch's results read: NaN exactly where
/// the reference has NaN, the same infinity where it has one, and finite values within
/// tol x the largest finite reference value.
template <typename A>
void check_nonfinite_close(const std::string& what, const A& got, const Values& want, double tol) {
  REQUIRE(got.size() == want.size());
  double scale = 1e-3;
  for (double v : want)
    if (std::isfinite(v)) scale = std::max(scale, std::abs(v));
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double g = got[i], w = want[i];
    bool ok = std::isnan(w)   ? std::isnan(g)
              : std::isinf(w) ? g == w
                              : std::isfinite(g) && std::abs(g - w) <= tol * scale;
    if (!ok && bad++ == 0) first = i;
  }
  INFO(what << ": " << bad << " of " << got.size() << " elements differ from PyTorch's rule; "
            << "first at " << first << ": got " << (got.empty() ? 0.0 : double(got[first]))
            << ", want " << (want.empty() ? 0.0 : want[first]));
  CHECK(bad == 0);
}

// -- bfloat16 -------------------------------------------------------------------------------------

/// Whether input i of the case holds values (converted to bfloat16) rather than indices.
inline bool holds_values(const OpCase& c, size_t i) {
  return c.inputs[i].fill == Fill::Normal || c.inputs[i].fill == Fill::Positive;
}

/// The case's inputs with every value input rounded to bfloat16 (indices stay float32).
inline std::vector<tp::Tensor> make_bfloat16_inputs(const OpCase& c, uint64_t seed) {
  std::vector<tp::Tensor> base = make_inputs(c, seed);
  for (size_t i = 0; i < base.size(); ++i)
    if (holds_values(c, i)) base[i] = base[i].to(tp::DType::BFloat16);
  return base;
}

/// Output gradients for a bfloat16 run: random, rounded to bfloat16.
inline std::vector<tp::Tensor> bfloat16_seeds(const OpCase& c, uint64_t seed) {
  tp::Generator gen(seed + 1);
  std::vector<tp::Tensor> seeds;
  for (const auto& s : c.out_shapes)
    seeds.push_back(tp::randn(s, {}, &gen).to(tp::DType::BFloat16));
  return seeds;
}

/// Tolerances of a bfloat16 run (relative to the largest reference value): each op rounds its
/// result to 8 significant bits (2^-9 relative), composite cases a few times over.
constexpr double kBfloat16ForwardTol = 2e-2;
constexpr double kBfloat16GradTol = 4e-2;

/// Checks one case in bfloat16 on the CPU: outputs and gradients are bfloat16, both match the
/// float64 reference evaluated at the same (bfloat16) inputs, and I then W equals full exactly.
inline void check_cpu_bfloat16(const OpCase& c, uint64_t seed) {
  std::vector<tp::Tensor> base = make_bfloat16_inputs(c, seed);
  std::vector<Values> xs;
  for (const auto& t : base) xs.push_back(to_double(values_of(t)));
  std::vector<Values> want = c.reference(xs);
  std::vector<tp::Tensor> seeds = bfloat16_seeds(c, seed);
  std::vector<Values> seed_values;
  for (const auto& s : seeds) seed_values.push_back(to_double(values_of(s)));

  std::vector<tp::Tensor> in = leaves(c, base, tp::cpu());
  std::vector<tp::Tensor> outs = c.run(in);
  for (size_t k = 0; k < outs.size(); ++k) {
    INFO("output " << k << " of an op on bfloat16 values is bfloat16");
    CHECK(outs[k].dtype() == tp::DType::BFloat16);
  }
  tp::autograd::backward(outs, seeds);
  RunResult full = collect(outs, in);
  REQUIRE(full.outputs.size() == want.size());
  for (size_t k = 0; k < want.size(); ++k)
    check_close("bfloat16 output " + std::to_string(k), full.outputs[k], want[k],
                std::max(c.fwd_tol, kBfloat16ForwardTol));
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    if (!c.inputs[i].grad) continue;
    if (in[i].grad().defined()) {
      INFO("gradient of bfloat16 input " << i << " is bfloat16");
      CHECK(in[i].grad().dtype() == in[i].dtype());
    }
    Values fd = finite_difference(c, xs, i, seed_values);
    check_close("bfloat16 gradient of input " + std::to_string(i), full.grads[i], fd,
                std::max(c.grad_tol, kBfloat16GradTol));
  }
  RunResult split = run_split(c, base, seeds);
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    INFO("bfloat16 split backward (I then W) of input " << i << " equals full bit for bit");
    CHECK(split.grads[i] == full.grads[i]);
  }
}

inline std::vector<tp::Tensor> with_nonfinite(const OpCase& c, std::vector<tp::Tensor> base,
                                              const NonFinite& variant) {
  for (size_t i = 0; i < base.size(); ++i) {
    if (!holds_values(c, i) || base[i].numel() == 0) continue;
    std::vector<float> v = base[i].to_vector();
    for (const auto& [where, value] : variant.at) {
      auto index = static_cast<size_t>(where * static_cast<double>(v.size() - 1) + 0.5);
      v[index] = static_cast<float>(value);
    }
    base[i] = tp::from_vector(v, base[i].shape()).to(base[i].dtype());
  }
  return base;
}

/// Runs the forward of one case on `device` with NaN and infinities in its value inputs (in
/// `dtype`), and checks the outputs against the float64 reference at the same inputs, whose
/// formulas follow PyTorch's (relu(NaN) is NaN, a dropped NaN stays NaN, ...).
inline void check_nonfinite(const OpCase& c, uint64_t seed, tp::Device device, tp::DType dtype) {
  for (const NonFinite& variant : nonfinite_variants()) {
    std::vector<tp::Tensor> base = make_inputs(c, seed);
    if (dtype == tp::DType::BFloat16)
      for (size_t i = 0; i < base.size(); ++i)
        if (holds_values(c, i)) base[i] = base[i].to(tp::DType::BFloat16);
    base = with_nonfinite(c, base, variant);
    std::vector<Values> xs;
    for (const auto& t : base) xs.push_back(to_double(values_of(t)));
    std::vector<Values> want = c.reference(xs);
    std::vector<tp::Tensor> in;
    for (const auto& t : base) in.push_back(t.to(device));
    std::vector<tp::Tensor> outs;
    {
      tp::NoGradGuard no_grad;
      outs = c.run(in);
    }
    REQUIRE(outs.size() == want.size());
    double tol = dtype == tp::DType::BFloat16 ? std::max(c.fwd_tol, kBfloat16ForwardTol)
                                              : std::max(c.fwd_tol, 1e-5);
    for (size_t k = 0; k < outs.size(); ++k)
      check_nonfinite_close(variant.label + " in the inputs, output " + std::to_string(k),
                            values_of(outs[k]), want[k], tol);
  }
}

/// Runs one case in bfloat16 on CUDA and on the CPU and compares outputs and gradients. The two
/// may round differently where the float32 sums differ in order: one bfloat16 step at most.
inline void check_cuda_bfloat16(const OpCase& c, uint64_t seed) {
  compare_cuda_with_cpu(c, make_bfloat16_inputs(c, seed), bfloat16_seeds(c, seed), 1e-2, 2e-2,
                        "cuda bfloat16");
}

/// Every CPU check of the table on each case (float32 and bfloat16: forward, gradients, split
/// backward, NaN and Inf), for op tables kept beside the op they test.
inline void check_table_on_cpu(const std::vector<OpCase>& table, uint64_t seed) {
  for (size_t i = 0; i < table.size(); ++i) {
    DYNAMIC_SECTION(table[i].name) {
      check_cpu(table[i], seed + i);
      check_cpu_bfloat16(table[i], seed + i);
      check_nonfinite(table[i], seed + i, tp::cpu(), tp::DType::Float32);
      check_nonfinite(table[i], seed + i, tp::cpu(), tp::DType::BFloat16);
    }
  }
}

/// Every CUDA check of the table on each case (against the CPU in float32 and bfloat16, NaN and
/// Inf); warns and returns without a CUDA device.
inline void check_table_on_cuda(const std::vector<OpCase>& table, uint64_t seed) {
  if (!tp::cuda_available()) {
    WARN("no CUDA device: CUDA comparison skipped");
    return;
  }
  for (size_t i = 0; i < table.size(); ++i) {
    DYNAMIC_SECTION(table[i].name) {
      check_cuda(table[i], seed + i);
      check_cuda_bfloat16(table[i], seed + i);
      check_nonfinite(table[i], seed + i, tp::Device("cuda:0"), tp::DType::Float32);
    }
  }
}

}  // namespace optest
