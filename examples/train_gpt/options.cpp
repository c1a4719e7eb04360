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

// A whole number of at least `min`; CLI11's own range checks print their bound with 309 digits.
CLI::Validator at_least(long long min) {
  return CLI::Validator(
      [min](std::string& text) -> std::string {
        const std::string want =
            "expected a whole number of at least " + std::to_string(min) + ", got '" + text + "'";
        if (text.empty() || text.size() > 18 ||
            text.find_first_not_of("0123456789", text[0] == '-' ? 1 : 0) != std::string::npos ||
            text == "-")
          return want;
        return std::stoll(text) >= min ? "" : want;
      },
      ">= " + std::to_string(min));
}

// A number above 0 (or at least 0 with `zero`), read as strtod reads it.
CLI::Validator real_above(bool zero) {
  return CLI::Validator(
      [zero](std::string& text) -> std::string {
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        if (text.empty() || *end != '\0' || !std::isfinite(value) || value < 0 ||
            (!zero && value == 0))
          return std::string("expected a number ") + (zero ? "of at least 0" : "above 0") +
                 ", got '" + text + "'";
        return "";
      },
      zero ? ">= 0" : "> 0");
}

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
      ->check(at_least(0));
  app.add_option("--mlp-width", o.mlp_width, "Llama MLP width (0: 8/3 --width, rounded up to 8)")
      ->check(at_least(0));
  app.add_option("--rope-theta", o.rope_theta, "Llama rotary base")->check(real_above(false));
  app.add_option("--tie", o.tie, "the head shares the token embedding (true or false)");
  app.add_option("--held-out", o.held_out, "fraction of the text kept for validation")
      ->check(CLI::Range(0.01, 0.5));
  app.add_option("--layers", o.layers, "transformer blocks")->check(at_least(1));
  app.add_option("--width", o.width, "embedding width")->check(at_least(1));
  app.add_option("--heads", o.heads, "attention heads (must divide --width)")->check(at_least(1));
  app.add_option("--context", o.context, "characters per sequence")->check(at_least(1));
  app.add_option("--dropout", o.dropout, "dropout probability")->check(CLI::Range(0.0, 0.9));
  app.add_option("--dtype", o.dtype, "float32 or bfloat16")
      ->check(CLI::IsMember({"float32", "bfloat16"}));
}

// The pipeline: stages, schedule, microbatches, replicas, device, threads, recomputation, plans.
// `dp` and `pp` take the text of --dp and --pp (a number or auto).
void add_pipeline_options(CLI::App& app, Options& o, std::string& dp, std::string& pp) {
  app.add_option("--stages", o.stages, "pipeline stages (cut at block boundaries)")
      ->check(at_least(1));
  app.add_option("--schedule", o.schedule,
                 "GPipe, 1F1B, Interleaved1F1B, LoopedBFS, InterleavedZeroBubble, "
                 "ZBVZeroBubble, DualPipeV, VHalf or VMin");
  app.add_option("--microbatches", o.n_microbatches, "microbatches per step")->check(at_least(1));
  app.add_option("--batch", o.batch, "sequences per step (over all data-parallel replicas)")
      ->check(at_least(1));
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
      ->check(at_least(1));
  app.add_flag("--unsplit", o.unsplit,
               "train the whole model in this thread without a pipeline (the baseline)");
  app.add_option("--tp", o.tp,
                 "tensor parallelism: split the model (with --unsplit) or each pipeline stage "
                 "over this many processes, started by tp-launch (the GPT's or the Llama's "
                 "plan; pipeline ranks x dp x tp processes on a {pp, dp, tp} mesh)")
      ->check(at_least(1));
  app.add_flag("--fsdp", o.fsdp,
               "shard each stage's parameters, gradients and AdamW state over its --dp replicas "
               "(fully_shard per block, then the stage); the schedule gathers them once a step "
               "and reduce-scatters the gradients once (no checkpoints written yet)");
  app.add_option("--mixed-precision", o.mixed_precision,
                 "bf16: with --fsdp, compute in bfloat16 on float32 master shards (gradients "
                 "reduced in float32)")
      ->check(CLI::IsMember({"bf16"}));
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
      ->check(real_above(true));
  app.add_option("--profile-out", o.profile_out,
                 "profile the GPT (per block times and bytes) into this JSON file for tp-plan, "
                 "then exit");
}

// The optimizer and the length of the run.
void add_training_options(CLI::App& app, Options& o) {
  app.add_option("--steps", o.steps, "optimizer steps in all (a resumed run goes on to it)")
      ->check(at_least(1));
  app.add_option("--lr", o.lr, "peak learning rate (AdamW)")->check(real_above(false));
  app.add_option("--min-lr", o.min_lr, "learning rate at the end of the cosine decay");
  app.add_option("--warmup", o.warmup, "steps of linear warm-up")->check(at_least(0));
  app.add_option("--clip", o.clip, "gradient clipping: largest global norm (0: off)")
      ->check(real_above(true));
  app.add_option("--weight-decay", o.weight_decay, "AdamW weight decay");
  app.add_option("--seed", o.seed, "seed of the weights, the batches and the samples");
}

// Checkpoints, logs, traces, validation, samples and the summary.
void add_output_options(CLI::App& app, Options& o) {
  app.add_option("--checkpoint-dir", o.checkpoint_dir,
                 "where checkpoints, the timeline and the trace go (empty: no checkpoints)");
  app.add_option("--checkpoint-interval", o.checkpoint_interval,
                 "save every N steps (0: only at the end)")
      ->check(at_least(0));
  app.add_flag("--resume", o.resume,
               "continue from the newest complete checkpoint in --checkpoint-dir (up to --steps)");
  app.add_option("--resume-from", o.resume_from,
                 "continue from this step's checkpoint instead of the newest (an earlier one, when "
                 "the newest is damaged); implies --resume")
      ->check(at_least(1));
  app.add_flag("--overwrite", o.overwrite,
               "start over in a --checkpoint-dir that holds checkpoints of an earlier run, "
               "deleting them (without it such a run refuses to start)");
  app.add_option("--stop-after", o.stop_after,
                 "stop after this step with a checkpoint, as if interrupted (--resume goes on)")
      ->check(at_least(0));
  app.add_option("--log-dir", o.log_dir, "write the message log to DIR/messages_rank_R.log");
  app.add_option("--trace-step", o.trace_step,
                 "write this step's timeline (SVG) and Chrome trace (0: none)")
      ->check(at_least(0));
  app.add_option("--val-interval", o.val_interval,
                 "validation loss every N steps (0: only at the end)")
      ->check(at_least(0));
  app.add_option("--val-batches", o.val_batches, "held-out batches per validation")
      ->check(at_least(1));
  app.add_option("--sample-chars", o.sample_chars, "characters generated at the end (0: none)")
      ->check(at_least(0));
  app.add_option("--temperature", o.temperature, "temperature of the sampled text")
      ->check(real_above(false));
  app.add_option("--prompt", o.prompt, "text the samples start from");
  app.add_flag("--json", o.json, "print the summary as one JSON line too");
  app.add_flag("--quiet", o.quiet, "no line per step");
  app.add_flag("--verbose", o.verbose,
               "also the libraries' own logs (SentencePiece's, while it trains a tokenizer)");
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
    // --help is a success; a bad flag (CLI11's message names it) exits 1 like every other error.
    std::exit(app.exit(e) == 0 ? 0 : 1);
  }
  o.command.assign(argv, argv + argc);
  o.trace_step_given = app.count("--trace-step") > 0;
  for (const char* flag : {"--model", "--layers", "--width", "--heads", "--kv-heads", "--mlp-width",
                           "--rope-theta", "--tie"})
    if (app.count(flag) > 0) o.given_model_flags.push_back(flag);
  if (o.resume_from > 0) o.resume = true;
  o.dp_auto = dp == "auto";
  o.dp = o.dp_auto ? 1 : std::stoi(dp);
  o.pp_auto = pp == "auto";
  o.pp = o.pp_auto || pp.empty() ? 0 : std::stoi(pp);
  return o;
}

void check_options(const Options& o) {
  const std::string steps = " --steps " + std::to_string(o.steps);
  if (o.stop_after > o.steps)
    throw std::invalid_argument("--stop-after " + std::to_string(o.stop_after) + " is past" +
                                steps +
                                " (the run ends there): lower --stop-after or raise --steps");
  if (o.trace_step_given && o.trace_step > o.steps)
    throw std::invalid_argument("--trace-step " + std::to_string(o.trace_step) + " is past" +
                                steps +
                                ": no step's timeline would be written; pass a step up to " +
                                std::to_string(o.steps) + " (0: none)");
  if (o.resume_from > o.steps)
    throw std::invalid_argument("--resume-from " + std::to_string(o.resume_from) + " is past" +
                                steps + ": raise --steps to train on from it");
  if (o.resume && o.overwrite)
    throw std::invalid_argument(
        "--resume continues the run in --checkpoint-dir and --overwrite deletes it: pass one");
  const std::string needs = o.resume ? "--resume" : "--stop-after";
  if ((o.resume || o.stop_after > 0) && o.checkpoint_dir.empty())
    throw std::invalid_argument(needs + " needs checkpoints: pass a --checkpoint-dir");
  if (o.tp > 1 && !o.unsplit && (o.resume || o.stop_after > 0 || !o.export_dir.empty()))
    throw std::invalid_argument(
        "--tp " + std::to_string(o.tp) +
        " with a pipeline writes no checkpoints or exports yet: leave out " +
        (o.export_dir.empty() ? needs : std::string("--export")) +
        " (or train the whole model with --unsplit --tp)");
  if (o.unsplit && o.tp == 1 && (o.resume || o.stop_after > 0))
    throw std::invalid_argument(needs +
                                " needs checkpoints, which --unsplit writes only under --tp");
  if (o.fsdp && o.tp > 1)
    throw std::invalid_argument("--fsdp with --tp " + std::to_string(o.tp) +
                                " is not built yet: shard over --dp or split over --tp, not both");
  if (!o.mixed_precision.empty() && (!o.fsdp || o.dtype != "float32"))
    throw std::invalid_argument(
        "--mixed-precision " + o.mixed_precision +
        " keeps float32 master shards: it needs --fsdp and --dtype float32");
  if (o.fsdp &&
      (o.unsplit || !o.plan.empty() || o.resume || o.stop_after > 0 || !o.init_from.empty()))
    throw std::invalid_argument(
        "--fsdp shards the stages of a pipeline over --dp: it does not go with --unsplit, --plan, "
        "--resume, --stop-after or --init-from yet (sharded checkpoints are not written)");
}

std::string continue_command(const std::vector<std::string>& command) {
  std::vector<std::string> kept;
  bool resumes = false;
  for (size_t i = 0; i < command.size(); ++i) {
    const std::string& a = command[i];
    // --stop-after and --resume-from (the run goes on from its newest checkpoint now).
    if (i > 0 && (a == "--stop-after" || a == "--resume-from")) {
      ++i;  // and its value
      continue;
    }
    if (i > 0 && (a.starts_with("--stop-after=") || a.starts_with("--resume-from="))) continue;
    if (i > 0 && a == "--resume") resumes = true;
    kept.push_back(a);
  }
  if (!resumes) kept.push_back("--resume");
  std::string out;
  for (const std::string& a : kept) {
    const bool plain = !a.empty() && a.find_first_not_of(
                                         "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMN"
                                         "OPQRSTUVWXYZ0123456789_-./:=,+@%") == std::string::npos;
    std::string quoted = a;
    if (!plain) {
      quoted = "'";
      for (char c : a) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
      quoted += "'";
    }
    out += (out.empty() ? "" : " ") + quoted;
  }
  return out;
}

}  // namespace train_gpt
