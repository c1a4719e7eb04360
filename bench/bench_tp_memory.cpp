// Memory of tensor parallelism, per rank: the parameter bytes of the GPT's blocks at tp 2 over
// tp 1 ("param_ratio", goal <= 0.55), and the activation bytes a forward of the GPT leaves for
// its backward at tp 2 with sequence parallelism over without ("activation_ratio", goal <= 0.75;
// also with the column-parallel layers keeping only their input shards,
// "activation_ratio_keep_input_shards").
// Ranks are threads of this process (join_job), each charging its allocations to an account of
// its own. Prints JSON lines; the last one holds the figures.
//
//   ./build/bench/bench_tp_memory [--layers 2] [--width 512] [--heads 8] [--batch 4] [--time 128]
#include <chrono>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tensorplay/core/memory_accounting.h"
#include "tensorplay/distributed.h"
#include "tensorplay/nn.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace dist = tensorplay::distributed;
namespace tpar = tensorplay::distributed::tensor_parallel;

namespace {

struct Settings {
  int64_t layers = 2, width = 512, heads = 8, batch = 4, time = 128, vocab = 512;
};

tp::nn::GPTConfig config_of(const Settings& s) {
  return {.vocab_size = s.vocab,
          .context_length = s.time,
          .n_layer = s.layers,
          .n_head = s.heads,
          .width = s.width,
          .dropout = 0.1f};
}

int64_t block_param_bytes(tp::nn::Module& model) {
  int64_t bytes = 0;
  for (const auto& [name, p] : model.named_parameters())
    if (name.rfind("blocks.", 0) == 0) bytes += static_cast<int64_t>(p.nbytes());
  return bytes;
}

struct RankFigures {
  int64_t param_bytes = 0, activation_bytes = 0;
  std::string error;
};

// Rank 0's figures of a GPT split over `size` ranks (threads) with `options`.
RankFigures measure(const Settings& s, int size, tpar::ModelPlanOptions options) {
  std::vector<tp::nn::GPT> models;
  for (int r = 0; r < size; ++r) {
    tp::manual_seed(0);
    models.emplace_back(config_of(s));
  }
  tp::manual_seed(1);
  const tp::Tensor ids = tp::randint(0, s.vocab, {s.batch, s.time});
  std::vector<RankFigures> figures(size);
  const int port = dist::free_loopback_port();
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r)
    threads.emplace_back([&, r] {
      try {
        auto& model = *models[r];
        std::optional<dist::ProcessGroup> world;
        if (size > 1) {
          world =
              dist::join_job({.backend = "ucx", .env = dist::loopback_launch_env(r, size, port)});
          tpar::parallelize_module(model, *world, tpar::gpt_tp_plan(config_of(s), size, options));
        }
        figures[r].param_bytes = block_param_bytes(model);
        auto account = std::make_shared<tp::MemoryAccount>();
        tp::Tensor logits;
        {
          tp::MemoryScope scope(account);
          logits = model(ids);
        }
        figures[r].activation_bytes = account->current();
        tp::mean(logits).backward();
        if (world) world->barrier();
      } catch (const std::exception& e) {
        figures[r].error = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (const auto& f : figures)
    if (!f.error.empty()) return f;
  return figures[0];
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const long long v = std::stoll(argv[i + 1]);
    if (flag == "--layers")
      s.layers = v;
    else if (flag == "--width")
      s.width = v;
    else if (flag == "--heads")
      s.heads = v;
    else if (flag == "--batch")
      s.batch = v;
    else if (flag == "--time")
      s.time = v;
    else {
      std::cerr << "unknown flag " << flag << "\n";
      return 2;
    }
  }
  const RankFigures whole = measure(s, 1, {});
  const RankFigures split = measure(s, 2, {});
  const RankFigures sequence = measure(s, 2, {.sequence_parallel = true});
  const RankFigures shards = measure(s, 2, {.sequence_parallel = true, .keep_input_shards = true});
  for (const auto* f : {&whole, &split, &sequence, &shards})
    if (!f->error.empty()) {
      std::cout << "{\"error\":\"" << f->error << "\"}" << std::endl;
      return 1;
    }
  std::cout << "{\"run\":\"tp1\",\"block_param_bytes\":" << whole.param_bytes
            << ",\"activation_bytes\":" << whole.activation_bytes << "}" << std::endl;
  std::cout << "{\"run\":\"tp2\",\"block_param_bytes\":" << split.param_bytes
            << ",\"activation_bytes\":" << split.activation_bytes << "}" << std::endl;
  std::cout << "{\"run\":\"tp2_sequence_parallel\",\"block_param_bytes\":" << sequence.param_bytes
            << ",\"activation_bytes\":" << sequence.activation_bytes << "}" << std::endl;
  std::cout << "{\"run\":\"tp2_sequence_parallel_keep_input_shards\",\"activation_bytes\":"
            << shards.activation_bytes << "}" << std::endl;
  std::cout << "{\"bench\":\"bench_tp_memory\",\"param_ratio\":"
            << static_cast<double>(split.param_bytes) / static_cast<double>(whole.param_bytes)
            << ",\"activation_ratio\":"
            << static_cast<double>(sequence.activation_bytes) /
                   static_cast<double>(split.activation_bytes)
            << ",\"activation_ratio_keep_input_shards\":"
            << static_cast<double>(shards.activation_bytes) /
                   static_cast<double>(split.activation_bytes)
            << ",\"width\":" << s.width << ",\"layers\":" << s.layers
            << ",\"tokens\":" << s.batch * s.time << "}" << std::endl;
  return 0;
}
