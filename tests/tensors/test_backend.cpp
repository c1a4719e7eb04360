// Tests for backend.h: a kernel a device table does not provide fails with a clear message.
#include <catch2/catch.hpp>

#include "tensorplay/core/backend.h"

namespace tp = tensorplay;

namespace {
// A table with only the required kernels, as a new device's table starts out.
class MinimalBackend final : public tp::Backend {
 public:
  const char* name() const override { return "minimal"; }
  void copy(void*, tp::Device, const void*, tp::Device, size_t) const override {}
  void fill(float*, int64_t, float) const override {}
  void convert(const void*, tp::DType, void*, tp::DType, int64_t) const override {}
  void gemm(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*,
            int64_t, float, float*, int64_t) const override {}
  void gemm_batched(bool, bool, int64_t, int64_t, int64_t, int64_t, float, const float*, int64_t,
                    int64_t, const float*, int64_t, int64_t, float, float*, int64_t,
                    int64_t) const override {}
  void binary(tp::BinaryOp, const float*, const int64_t*, const float*, const int64_t*, float*,
              const int64_t*, int) const override {}
  void affine(const float*, float*, int64_t, float, float) const override {}
  void unary(tp::UnaryOp, const float*, float*, int64_t) const override {}
  void unary_backward(tp::UnaryOp, const float*, const float*, const float*, float*,
                      int64_t) const override {}
  void sum_dim(const float*, float*, int64_t, int64_t, int64_t) const override {}
};
}  // namespace

TEST_CASE("a kernel missing from a device table names the device and kernel", "[backend]") {
  MinimalBackend b;
  CHECK_THROWS_WITH(b.softmax(nullptr, nullptr, 1, 1, 1, false),
                    "minimal: kernel softmax is not implemented on this device");
  CHECK_THROWS_WITH(b.layer_norm(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 1, 1, 0),
                    Catch::Contains("kernel layer_norm"));
  CHECK_THROWS_WITH(b.rms_norm(nullptr, nullptr, nullptr, nullptr, 1, 1, 0),
                    Catch::Contains("kernel rms_norm"));
  CHECK_THROWS_WITH(b.silu_mul(nullptr, nullptr, nullptr, 1), Catch::Contains("kernel silu_mul"));
  CHECK_THROWS_WITH(b.rotary(nullptr, nullptr, nullptr, nullptr, 1, 1, 1, 2, false),
                    Catch::Contains("kernel rotary"));
}
