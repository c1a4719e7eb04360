// bench_reshard: loading a layout-free checkpoint (stages/named_checkpoint.h) of train_gpt's GPT,
// written by pp 4 (four writers), into pp 2 x dp 2 against loading it into pp 4, the layout that
// wrote it; and against reading the same files with `cat > /dev/null`. Every rank's load runs in
// this process, one after another (each rank of a job would run its own); times are the sums.
// Prints one JSON line per measurement, the last with "bench" and "ratio" (resharded load time
// over same-layout load time). Files are read warm from the page cache (they were just written).
//
//   bench_reshard            # a small GPT (about 0.8 M parameters): seconds
//   bench_reshard --large    # about 100 M parameters (width 768, 14 blocks): needs ~6 GB
//   bench_reshard --width 256 --layers 8   # another size (heads: 4, or 12 with --large)
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "stages/build_stage.h"
#include "stages/checkpoint_io.h"
#include "stages/named_checkpoint.h"
#include "stages/pipeline.h"
#include "tensors/tensors.h"

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;
namespace fs = std::filesystem;

namespace {

using Stages = std::vector<std::shared_ptr<pp::PipelineStage>>;
constexpr int64_t kVocab = 96, kContext = 64;

Stages split(tp::nn::GPT& model, int64_t layers, int stages) {
  pp::PipelineOptions options;
  for (int s = 1; s < stages; ++s)
    options.split_spec["blocks." + std::to_string(s * layers / stages)] = pp::SplitPoint::Beginning;
  return pp::build_stages(pp::pipeline(model, {tp::zeros({1, kContext})}, options), {tp::cpu()});
}

// Writes step 1 of `stages` under `dir`, one writer per stage, with AdamW state.
void write(const std::string& dir, const Stages& stages, const std::string& layout) {
  for (const auto& stage : stages) {
    tp::optim::AdamW opt(pp::parameters({stage}));
    for (tp::Tensor p : opt.parameters()) p.set_grad(tp::zeros_like(p));
    opt.step();
    pp::save_named_checkpoint(dir, {stage}, opt, 1, {.layout = layout});
  }
}

// Seconds to load `dir` into every rank of `replicas` (each rank one stage, its own optimizer).
double load(const std::string& dir, const std::vector<Stages>& replicas) {
  double seconds = 0;
  for (const Stages& replica : replicas)
    for (const auto& stage : replica) {
      tp::optim::AdamW opt(pp::parameters({stage}));
      const auto t0 = std::chrono::steady_clock::now();
      pp::load_named_checkpoint(dir, {stage}, opt);
      seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
  return seconds;
}

uint64_t folder_bytes(const std::string& folder) {
  uint64_t bytes = 0;
  for (const auto& entry : fs::directory_iterator(folder)) bytes += entry.file_size();
  return bytes;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t width = 128, layers = 4, heads = 4;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--large") {
      width = 768, layers = 14, heads = 12;
    } else if ((arg == "--width" || arg == "--layers") && i + 1 < argc) {
      (arg == "--width" ? width : layers) = std::atoll(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: bench_reshard [--large] [--width W] [--layers L]\n");
      return 2;
    }
  }
  const std::string root =
      (fs::temp_directory_path() / ("bench_reshard_" + std::to_string(::getpid()))).string();
  fs::remove_all(root);
  tp::manual_seed(1);
  auto model = tp::nn::GPT(tp::nn::GPTConfig{.vocab_size = kVocab,
                                             .context_length = kContext,
                                             .n_layer = layers,
                                             .n_head = heads,
                                             .width = width});
  int64_t parameters = 0;
  for (const auto& p : model->parameters()) parameters += p.numel();

  write(root + "/pp4", split(model, layers, 4), "pp 4 x dp 1");
  write(root + "/pp2", split(model, layers, 2), "pp 2 x dp 1");
  const std::string step = pp::checkpoint_io::step_folder(root + "/pp4", 1);
  const uint64_t bytes = folder_bytes(step);
  std::printf("{\"phase\":\"written\",\"parameters\":%lld,\"bytes\":%llu}\n",
              static_cast<long long>(parameters), static_cast<unsigned long long>(bytes));

  const std::vector<Stages> pp4{split(model, layers, 4)};
  const std::vector<Stages> pp2_dp2{split(model, layers, 2), split(model, layers, 2)};
  const double same = load(root + "/pp4", pp4);
  const double resharded = load(root + "/pp4", pp2_dp2);
  const double same_target = load(root + "/pp2", pp2_dp2);
  const auto t0 = std::chrono::steady_clock::now();
  const std::string cat = "cat " + step + "/* > /dev/null";
  if (std::system(cat.c_str()) != 0)
    std::fprintf(stderr, "bench_reshard: '%s' failed\n", cat.c_str());
  const double cat_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fs::remove_all(root);

  std::printf("{\"phase\":\"pp4 -> pp4\",\"seconds\":%.4f}\n", same);
  std::printf("{\"phase\":\"pp4 -> pp2 x dp2\",\"seconds\":%.4f}\n", resharded);
  std::printf("{\"phase\":\"pp2 -> pp2 x dp2\",\"seconds\":%.4f}\n", same_target);
  std::printf("{\"phase\":\"cat > /dev/null\",\"seconds\":%.4f}\n", cat_seconds);
  // pp 2 x dp 2 reads every byte twice (each replica loads the whole model): ratio_per_byte
  // divides that out; ratio_same_target compares with a checkpoint written by pp 2.
  std::printf(
      "{\"bench\":\"bench_reshard\",\"parameters\":%lld,\"bytes\":%llu,\"same_layout_seconds\":%."
      "4f,"
      "\"resharded_seconds\":%.4f,\"cat_seconds\":%.4f,\"ratio\":%.3f,\"ratio_per_byte\":%.3f,"
      "\"ratio_same_target\":%.3f}\n",
      static_cast<long long>(parameters), static_cast<unsigned long long>(bytes), same, resharded,
      cat_seconds, resharded / same, resharded / (2 * same), resharded / same_target);
  return 0;
}
