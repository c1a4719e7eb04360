// Outside the project: a program built against the installed package (find_package(tensorplay))
// that splits a two-layer model into two stages and trains them under Schedule1F1B. Exits with 0
// when the loss fell to less than half its first value, 1 otherwise (and on an error, printed).
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "tensorplay/pipelining/build_stage.h"
#include "tensorplay/pipelining/pipeline.h"
#include "tensorplay/pipelining/runtime/schedule.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;

struct NetImpl : tp::nn::Module {
  NetImpl() {
    layer0 = register_module("layer0", tp::nn::Sequential(tp::nn::Linear(32, 64), tp::nn::Tanh()));
    layer1 = register_module("layer1", tp::nn::Linear(64, 8));
  }
  tp::Tensor forward(const tp::Tensor& x) override { return layer1(layer0(x)); }
  std::string type_name() const override { return "Net"; }
  tp::nn::Sequential layer0{nullptr};
  tp::nn::Linear layer1{nullptr};
};
TENSORPLAY_MODULE(Net);

namespace {

int train() {
  tp::manual_seed(0);
  Net model;
  auto pipe = pp::pipeline(model, {tp::zeros({4, 32})},
                           {.split_spec = {{"layer1", pp::SplitPoint::Beginning}}});
  auto stages = pp::build_stages(pipe, {tp::cpu()});
  pp::Schedule1F1B schedule(stages, /*n_microbatches=*/4, tp::nn::mse_loss);
  tp::optim::AdamW opt(pp::parameters(stages), {.lr = 1e-2f});

  tp::Tensor x = tp::randn({16, 32}), y = tp::randn({16, 8});
  float first = 0, last = 0;
  for (int step = 1; step <= 100; ++step) {
    std::vector<tp::Tensor> losses;
    schedule.step({x}, {.target = y, .losses = &losses});
    opt.step();
    opt.zero_grad();
    float mean = 0;
    for (const auto& l : losses) mean += l.item() / losses.size();
    if (step == 1) first = mean;
    last = mean;
  }
  std::printf("consumer: %zu stages, loss %.4f -> %.4f\n", stages.size(), first, last);
  return last < 0.5f * first ? 0 : 1;
}

}  // namespace

int main() {
  // An error ends the program with its message and status 1 (not an abort).
  try {
    return train();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "consumer: %s\n", e.what());
    return 1;
  }
}
