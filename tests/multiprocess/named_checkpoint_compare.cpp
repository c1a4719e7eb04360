// Compares the model tensors of two layout-free checkpoints
// (tensorplay/pipelining/checkpoints/named_checkpoint.h) by name, whatever layouts wrote them:
// exits 0 when both hold the same names and shapes and every value is within the relative
// tolerance, 1 naming the first tensor that differs. With "per-tensor", a difference is relative to
// the tensor's largest magnitude (for runs whose rounding differs, where values near zero have no
// meaningful relative difference). Usage: named_checkpoint_compare DIR_A DIR_B STEP TOLERANCE
// [per-tensor]
#include <cmath>
#include <cstdio>
#include <string>

#include "tensorplay/pipelining/checkpoints/named_checkpoint.h"

namespace pp = tensorplay::pipelining;

int main(int argc, char** argv) {
  if (argc != 5 && !(argc == 6 && std::string(argv[5]) == "per-tensor")) {
    std::fprintf(stderr,
                 "usage: named_checkpoint_compare DIR_A DIR_B STEP TOLERANCE [per-tensor]\n");
    return 2;
  }
  try {
    const int64_t step = std::stoll(argv[3]);
    const double tolerance = std::stod(argv[4]);
    const auto a = pp::read_named_model(argv[1], step), b = pp::read_named_model(argv[2], step);
    if (a.keys().size() != b.keys().size()) {
      std::printf("the checkpoints hold %zu and %zu tensors\n", a.size(), b.size());
      return 1;
    }
    double worst = 0;
    for (const auto& [name, ta] : a) {
      const auto* tb = b.find(name);
      if (tb == nullptr || tb->shape() != ta.shape()) {
        std::printf("tensor '%s' is missing or of another shape in %s\n", name.c_str(), argv[2]);
        return 1;
      }
      const auto va = ta.to_vector(), vb = tb->to_vector();
      double largest = 0;
      for (float v : va) largest = std::max(largest, static_cast<double>(std::fabs(v)));
      for (size_t i = 0; i < va.size(); ++i) {
        const double scale = argc == 6 ? largest : std::max(std::fabs(va[i]), std::fabs(vb[i]));
        const double rel = va[i] == vb[i] ? 0.0 : std::fabs(va[i] - vb[i]) / scale;
        worst = std::max(worst, rel);
        if (!(rel <= tolerance)) {
          std::printf("tensor '%s' element %zu: %.9g and %.9g (relative %.3g > %.3g)\n",
                      name.c_str(), i, va[i], vb[i], rel, tolerance);
          return 1;
        }
      }
    }
    std::printf("%zu tensors equal within %.3g relative (largest %.3g)\n", a.size(), tolerance,
                worst);
    return 0;
  } catch (const std::exception& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
}
