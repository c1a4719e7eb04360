// CLI11 definitions of train_gpt's flags and the learning-rate schedule.
#include "options.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

#include "tensorplay/pipelining/recompute.h"

namespace train_gpt {

float Options::lr_at(int step) const {
  if (warmup > 0 && step <= warmup) return lr * static_cast<float>(step) / warmup;
  const int span = std::max(1, steps - warmup);
  const double progress = std::clamp(static_cast<double>(step - warmup) / span, 0.0, 1.0);
  return static_cast<float>(min_lr + 0.5 * (lr - min_lr) * (1.0 + std::cos(M_PI * progress)));
}

namespace {

std::string positive_or_auto(const std::string& text) {
  if (text == "auto") return "";
  if (!text.empty() && text.size() < 6 &&
      text.find_first_not_of("0123456789") == std::string::npos && std::stoi(text) > 0)
    return "";
  return "expected a positive whole number or auto, got '" + text + "'";
}

// The model and its data: sizes, tokenizer, Hugging Face folders in and out.
void add_model_options(CLI::App& app, Options& o) {
  app.add_option("--data", o.data,
                 "UTF-8 text file (default: the license texts in /usr/share/common-licenses)");
  app.add_option("--tokenizer", o.tokenizer,
                 "char (characters), bpe:VOCAB (a SentencePiece BPE model of VOCAB pieces trained "
                 "on --data, saved in the checkpoint folder), FILE.model, a Hugging Face "
                 "tokenizer.json or a model folder holding one; token shards bring their own");
  app.add_option("--model", o.model, "gpt2 or llama")->check(CLI::IsMember({"gpt2", "llama"}));
  app.add_option("--init-from", o.init_from,
                 "start from a Hugging Face folder (config.json + safetensors, GPT-2 or Llama): "
                 "its sizes replace --model, --layers, --width, --heads")
      ->check(CLI::ExistingDirectory);
  app.add_option("--export", o.export_dir,
                 "write the trained model as a Hugging Face folder that transformers loads");
  app.add_option("--kv-heads", o.kv_heads, "Llama key-value heads (0: --heads)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--mlp-width", o.mlp_width, "Llama MLP width (0: 8/3 --width, rounded up to 8)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--rope-theta", o.rope_theta, "Llama rotary base")->check(CLI::PositiveNumber);
  app.add_option("--tie", o.tie, "the head shares the token embedding (true or false)");
  app.add_option("--held-out", o.held_out, "fraction of the text kept for validation")
      ->check(CLI::Range(0.01, 0.5));
  app.add_option("--layers", o.layers, "transformer blocks")->check(CLI::PositiveNumber);
  app.add_option("--width", o.width, "embedding width")->check(CLI::PositiveNumber);
  app.add_option("--heads", o.heads, "attention heads (must divide --width)")
      ->check(CLI::PositiveNumber);
  app.add_option("--context", o.context, "characters per sequence")->check(CLI::PositiveNumber);
  app.add_option("--dropout", o.dropout, "dropout probability")->check(CLI::Range(0.0, 0.9));
  app.add_option("--dtype", o.dtype, "float32 or bfloat16")
      ->check(CLI::IsMember({"float32", "bfloat16"}));
}

// The pipeline: stages, schedule, microbatches, replicas, device, threads, recomputation, plans.
// `dp` and `pp` take the text of --dp and --pp (a number or auto).
void add_pipeline_options(CLI::App& app, Options& o, std::string& dp, std::string& pp) {
  app.add_option("--stages", o.stages, "pipeline stages (cut at block boundaries)")
      ->check(CLI::PositiveNumber);
  app.add_option("--schedule", o.schedule,
                 "GPipe, 1F1B, Interleaved1F1B, LoopedBFS, InterleavedZeroBubble, "
                 "ZBVZeroBubble, DualPipeV, VHalf or VMin");
  app.add_option("--microbatches", o.microbatches, "microbatches per step")
      ->check(CLI::PositiveNumber);
  app.add_option("--batch", o.batch, "sequences per step (over all data-parallel replicas)")
      ->check(CLI::PositiveNumber);
  app.add_option("--dp", dp,
                 "data-parallel replicas of the pipeline, or auto: tp-launch starts (pipeline "
                 "ranks) x dp processes on a {pp, dp} device mesh; each replica trains on its "
                 "share of the batch and gradients are averaged every step; auto: the largest "
                 "that divides the world size and the batch into microbatches")
      ->check(positive_or_auto);
  app.add_option("--pp", pp,
                 "pipeline ranks, or auto (the world size over dp); sets --stages to pp times "
                 "the schedule's stages per rank")
      ->check(positive_or_auto);
  app.add_option("--device", o.device, "cpu, cuda or cuda:N");
  app.add_option("--blas-threads", o.blas_threads,
                 "product threads of each computing thread (oneDNN)")
      ->check(CLI::PositiveNumber);
  app.add_flag("--unsplit", o.unsplit,
               "train the whole model in this thread without a pipeline (the baseline)");
  app.add_option("--recompute", o.recompute,
                 "activation recomputation in every stage: none, full (every block), every:K "
                 "(every K-th block) or type:Name[,Name...] (modules of those types); the blocks "
                 "keep only their inputs and run their forward again in the backward")
      ->check([](const std::string& text) -> std::string {
        try {
          tensorplay::pipelining::RecomputePolicy::parse(text);
          return "";
        } catch (const std::invalid_argument& e) {
          return e.what();
        }
      });
  app.add_option("--plan", o.plan,
                 "a plan file from tp-plan, or auto (profile and plan here; under tp-launch rank "
                 "0 does, for ranks in separate processes, and every rank runs its plan): sets "
                 "the schedule, cut, stages, microbatches, recomputation and threads");
  app.add_option("--memory-cap", o.memory_cap,
                 "--plan auto: bytes each rank may hold (0: no cap); configurations over it lose")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--profile-out", o.profile_out,
                 "profile the GPT (per block times and bytes) into this JSON file for tp-plan, "
                 "then exit");
}

// The optimizer and the length of the run.
void add_training_options(CLI::App& app, Options& o) {
  app.add_option("--steps", o.steps, "optimizer steps in all (a resumed run goes on to it)")
      ->check(CLI::PositiveNumber);
  app.add_option("--lr", o.lr, "peak learning rate (AdamW)")->check(CLI::PositiveNumber);
  app.add_option("--min-lr", o.min_lr, "learning rate at the end of the cosine decay");
  app.add_option("--warmup", o.warmup, "steps of linear warm-up")->check(CLI::NonNegativeNumber);
  app.add_option("--clip", o.clip, "gradient clipping: largest global norm (0: off)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--weight-decay", o.weight_decay, "AdamW weight decay");
  app.add_option("--seed", o.seed, "seed of the weights, the batches and the samples");
}

// Checkpoints, logs, traces, validation, samples and the summary.
void add_output_options(CLI::App& app, Options& o) {
  app.add_option("--checkpoint-dir", o.checkpoint_dir,
                 "where checkpoints, the timeline and the trace go (empty: no checkpoints)");
  app.add_option("--checkpoint-interval", o.checkpoint_interval,
                 "save every N steps (0: only at the end)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--resume", o.resume, "continue from the newest complete checkpoint");
  app.add_option("--stop-after", o.stop_after,
                 "stop after this step with a checkpoint, as if interrupted (--resume goes on)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--log-dir", o.log_dir, "write the message log to DIR/messages_rank_R.log");
  app.add_option("--trace-step", o.trace_step,
                 "write this step's timeline (SVG) and Chrome trace (0: none)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--val-interval", o.val_interval,
                 "validation loss every N steps (0: only at the end)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--val-batches", o.val_batches, "held-out batches per validation")
      ->check(CLI::PositiveNumber);
  app.add_option("--sample-chars", o.sample_chars, "characters generated at the end (0: none)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--temperature", o.temperature, "temperature of the sampled text")
      ->check(CLI::PositiveNumber);
  app.add_option("--prompt", o.prompt, "text the samples start from");
  app.add_flag("--json", o.json, "print the summary as one JSON line too");
  app.add_flag("--quiet", o.quiet, "no line per step");
  app.add_option("--losses-file", o.losses_file,
                 "append each step's loss to this file with every digit (\"step loss\" lines)");
}

}  // namespace

Options parse_options(int argc, char** argv) {
  Options o;
  CLI::App app{
      "Trains a GPT-2 or Llama language model (on characters, BPE pieces or token shards) cut "
      "into pipeline stages at its blocks, on the embedded single-process runtime, or one rank "
      "per process under tp-launch."};
  app.option_defaults()->always_capture_default();
  std::string dp = "1", pp;
  add_model_options(app, o);
  add_pipeline_options(app, o, dp, pp);
  add_training_options(app, o);
  add_output_options(app, o);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::exit(app.exit(e));
  }
  o.dp_auto = dp == "auto";
  o.dp = o.dp_auto ? 1 : std::stoi(dp);
  o.pp_auto = pp == "auto";
  o.pp = o.pp_auto || pp.empty() ? 0 : std::stoi(pp);
  return o;
}

}  // namespace train_gpt
