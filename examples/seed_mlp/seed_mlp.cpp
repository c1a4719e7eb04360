// The seed example: a model of two Blocks (Linear(128,128) + ReLU) split into two stages, trained
// with Schedule1F1B over 4 microbatches on a fixed synthetic regression task. Prints the loss.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "actors/schedule.h"
#include "tensors/tensors.h"

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;

struct BlockImpl : tp::nn::Module {
  explicit BlockImpl(int64_t dim) {
    net = register_module("net", tp::nn::Sequential(tp::nn::Linear(dim, dim), tp::nn::ReLU()));
  }
  tp::Tensor forward(const tp::Tensor& x) override { return net(x); }
  std::string type_name() const override { return "Block"; }
  tp::nn::Sequential net;
};
TENSORPLAY_MODULE(Block);

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 300;
  const int64_t dim = 128, batch = 32;
  tp::manual_seed(0);

  // One stage per Block. Each stage is built from its submodule and one microbatch of input.
  Block layer0(dim), layer1(dim);
  tp::Tensor example = tp::zeros({batch / 4, dim});
  std::vector<std::shared_ptr<pp::PipelineStage>> stages = {
      std::make_shared<pp::PipelineStage>(layer0.ptr(), 0, 2, tp::cpu(),
                                          std::vector<tp::Tensor>{example}),
      std::make_shared<pp::PipelineStage>(layer1.ptr(), 1, 2, tp::cpu(),
                                          std::vector<tp::Tensor>{example}),
  };
  pp::Schedule1F1B schedule(stages, /*n_microbatches=*/4, tp::nn::mse_loss);
  tp::optim::SGD opt(pp::parameters(stages), {.lr = 0.05f, .momentum = 0.9f});

  // A fixed regression task: targets from a random teacher network, ReLU'd so they are reachable.
  tp::Generator data(42);
  tp::Tensor teacher = tp::randn({dim, dim}, {}, &data) * (1.0f / 11.3f);
  tp::Tensor x = tp::randn({batch, dim}, {}, &data);
  tp::Tensor y = tp::relu(tp::matmul(x, teacher));

  for (int step = 1; step <= steps; ++step) {
    std::vector<tp::Tensor> losses;
    schedule.step({x}, {.target = y, .losses = &losses});
    opt.step();
    opt.zero_grad();
    if (step == 1 || step % 25 == 0) {
      float mean = 0;
      for (const auto& l : losses) mean += l.item() / losses.size();
      std::printf("step %4d  loss %.6f\n", step, mean);
    }
  }
  return 0;
}
