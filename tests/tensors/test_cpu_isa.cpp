// Tests for cpu_isa.h: every dispatch target this machine has computes the kernels within float
// rounding of the scalar loops, reruns give the same bits, and NaN and Inf propagate.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "tensorplay/core/cpu_isa.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;

namespace {

// Restores the target the process started with when a test ends.
struct RestoreIsa {
  std::string saved = tp::cpu_isa();
  ~RestoreIsa() { tp::set_cpu_isa(saved); }
};

// Outputs and gradients of the vectorised kernels on one input, in a fixed order. Lengths that
// are not a multiple of any vector width exercise the tails.
std::vector<std::vector<float>> run_kernels() {
  tp::Generator gen(7);
  tp::Tensor x = tp::randn({5, 37}, {}, &gen);
  x.requires_grad_();
  tp::Tensor b = tp::randn({37}, {}, &gen);
  tp::Tensor w = tp::randn({37}, {}, &gen);
  tp::Tensor targets = tp::from_vector({0, 5, 36, 2, 11}, {5});
  std::vector<tp::Tensor> outs = {tp::relu(x),
                                  tp::gelu(x),
                                  tp::tanh(x),
                                  tp::exp(x),
                                  tp::sigmoid(x),
                                  tp::sqrt(tp::square(x) + 1.0f),
                                  tp::log(tp::square(x) + 1.0f),
                                  x + b,
                                  x * b,
                                  x / (tp::square(b) + 1.0f),
                                  x - 2.0f,
                                  x * 3.0f + 1.0f,
                                  tp::softmax(x, 1),
                                  tp::log_softmax(x, 1),
                                  tp::layer_norm(x, 37, w, b),
                                  tp::sum(x, 0),
                                  tp::cross_entropy(x, targets),
                                  tp::rms_norm(x, 37, w),
                                  tp::rms_norm(x, 37),
                                  tp::silu_mul(x, tp::tanh(x))};
  std::vector<std::vector<float>> result;
  tp::Tensor total = tp::zeros({});
  for (auto& o : outs) {
    result.push_back(o.to_vector());
    total = total + tp::sum(o * tp::randn(o.shape(), {}, &gen));
  }
  total.backward();
  result.push_back(x.grad().to_vector());
  return result;
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float f : v) m = std::max(m, std::abs(double(f)));
  return m;
}

}  // namespace

TEST_CASE("the dispatch targets are listed, and a bad one is a clear error", "[cpu_isa]") {
  RestoreIsa restore;
  auto isas = tp::available_cpu_isas();
  REQUIRE(!isas.empty());
  CHECK(isas.back() == "scalar");
  CHECK(std::find(isas.begin(), isas.end(), tp::cpu_isa()) != isas.end());
  CHECK_THROWS_WITH(tp::set_cpu_isa("avx9"),
                    Catch::Contains("unknown target") && Catch::Contains("scalar"));
  tp::set_cpu_isa("scalar");
  CHECK(tp::cpu_isa() == "scalar");
}

TEST_CASE("every dispatch target agrees with the scalar loops and reruns bit for bit",
          "[cpu_isa]") {
  RestoreIsa restore;
  tp::set_cpu_isa("scalar");
  const auto reference = run_kernels();
  for (const std::string& isa : tp::available_cpu_isas()) {
    CAPTURE(isa);
    tp::set_cpu_isa(isa);
    const auto first = run_kernels();
    const auto second = run_kernels();
    CHECK(first == second);  // the same bits on a rerun
    REQUIRE(first.size() == reference.size());
    for (size_t k = 0; k < first.size(); ++k) {
      CAPTURE(k);
      REQUIRE(first[k].size() == reference[k].size());
      const double scale = std::max(1.0, max_abs(reference[k]));
      double worst = 0;
      for (size_t i = 0; i < first[k].size(); ++i)
        worst = std::max(worst, std::abs(double(first[k][i]) - double(reference[k][i])));
      CHECK(worst <= 1e-5 * scale);  // the op table's forward tolerance
    }
  }
}

TEST_CASE("vector targets propagate NaN and Inf as PyTorch does", "[cpu_isa]") {
  RestoreIsa restore;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (const std::string& isa : tp::available_cpu_isas()) {
    if (isa == "scalar") continue;  // the scalar loops are checked by their own tests
    CAPTURE(isa);
    tp::set_cpu_isa(isa);
    tp::Tensor x = tp::from_vector({nan, inf, -inf, 1.0f, -1.0f, 0.0f, nan, 2.0f, 3.0f}, {9});
    auto relu = tp::relu(x).to_vector();
    CHECK(std::isnan(relu[0]));
    CHECK(relu[1] == inf);
    CHECK(relu[2] == 0.0f);
    auto e = tp::exp(x).to_vector();
    CHECK(std::isnan(e[0]));
    CHECK(e[1] == inf);
    CHECK(e[2] == 0.0f);
    auto gelu = tp::gelu(x).to_vector();
    CHECK(std::isnan(gelu[0]));
    CHECK(gelu[1] == inf);
    CHECK(std::isnan(gelu[2]));  // -inf * (1 + tanh(-inf)) = -inf * 0
    CHECK(std::isnan(tp::tanh(x).to_vector()[0]));
    CHECK(tp::tanh(x).to_vector()[1] == 1.0f);
    CHECK(std::isnan(tp::sigmoid(x).to_vector()[0]));
    auto lg = tp::log(x).to_vector();
    CHECK(std::isnan(lg[0]));
    CHECK(lg[1] == inf);
    CHECK(std::isnan(lg[2]));
    CHECK(lg[5] == -inf);
    // A row holding NaN softmaxes to NaN everywhere; a row without it is untouched.
    tp::Tensor rows = tp::from_vector({1.0f, nan, 2.0f, 1.0f, 2.0f, 3.0f}, {2, 3});
    auto sm = tp::softmax(rows, 1).to_vector();
    for (int j = 0; j < 3; ++j) CHECK(std::isnan(sm[j]));
    for (int j = 3; j < 6; ++j) CHECK(std::isfinite(sm[j]));
  }
}
