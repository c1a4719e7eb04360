// Helpers shared by the CUDA tests: skipping without a GPU, host/device pairs of buffers, and a
// closeness check that names the first element that differs.
#pragma once

#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "tensorplay/core/backend.h"
#include "tensorplay/tensor.h"

namespace cuda_test {

namespace tp = tensorplay;

/// True (after a visible warning) when there is no CUDA device to test on.
inline bool skip_without_gpu() {
  if (tp::cuda_available()) return false;
  WARN("no CUDA device: skipped ("
       << (tp::cuda_built() ? "CUDA built in, no GPU present" : "built without CUDA") << ")");
  return true;
}

inline const tp::Backend& cpu_kernels() { return tp::backend_for(tp::cpu()); }
inline const tp::Backend& gpu_kernels() { return tp::backend_for(tp::Device("cuda:0")); }

inline std::vector<float> random_values(int64_t n, float low, float high, uint64_t seed) {
  tp::Generator g(seed);
  return tp::rand_uniform({n}, low, high, {}, &g).to_vector();
}

/// Host and device copies of the same values, for calling both kernel tables.
struct Pair {
  tp::Tensor host, device;
  static Pair of(const std::vector<float>& values) {
    tp::Tensor h = tp::from_vector(values, {static_cast<int64_t>(values.size())});
    return {h, h.to("cuda:0")};
  }
  static Pair zeros(int64_t n) {
    return {tp::zeros({n}), tp::zeros({n}, {.device = tp::Device("cuda:0")})};
  }
  float* h() const { return host.data<float>(); }
  float* d() const { return device.data<float>(); }
};

/// Every element within atol + rtol * |expected| (NaN matches NaN); names the first mismatch.
inline void check_close(const tp::Tensor& device_result, const tp::Tensor& host_result, float rtol,
                        float atol, const std::string& what) {
  INFO(what);
  REQUIRE(device_result.defined());
  REQUIRE(host_result.defined());
  std::vector<float> got = device_result.to_vector();
  std::vector<float> want = host_result.to_vector();
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    bool both_nan = std::isnan(got[i]) && std::isnan(want[i]);
    if (!both_nan && !(std::fabs(got[i] - want[i]) <= atol + rtol * std::fabs(want[i]))) {
      FAIL(what << ": element " << i << " is " << got[i] << " on CUDA, " << want[i]
                << " on the CPU");
    }
  }
  SUCCEED(what);
}

}  // namespace cuda_test
