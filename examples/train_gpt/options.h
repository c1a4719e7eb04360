// train_gpt's command line: the model, the pipeline, the optimizer, the run's files. The defaults
// are the fastest configuration bench_train_gpt found on a 2-core machine (see the README).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace train_gpt {

/// Every flag of train_gpt, with its default.
struct Options {
  // -- text ---------------------------------------------------------------------------------------
  std::string data;  ///< UTF-8 file or token shards; empty: /usr/share/common-licenses
  std::string tokenizer = "char";  ///< char, bpe:VOCAB, FILE.model, tokenizer.json or DIR
  double held_out = 0.1;

  // -- model --------------------------------------------------------------------------------------
  std::string model = "gpt2";  ///< gpt2 or llama
  std::string init_from;       ///< a Hugging Face folder to start from
  std::string export_dir;      ///< a Hugging Face folder written at the end
  int64_t kv_heads = 0;        ///< Llama's key-value heads (0: --heads)
  int64_t mlp_width = 0;       ///< Llama's MLP width (0: 8/3 --width rounded up to 8)
  float rope_theta = 10000.0f;
  bool tie = true;  ///< the head shares the token embedding
  int64_t layers = 4;
  int64_t width = 128;
  int64_t heads = 4;
  int64_t context = 64;
  float dropout = 0.0f;
  std::string dtype = "float32";

  // -- pipeline -----------------------------------------------------------------------------------
  int stages = 4;
  std::string schedule = "ZBVZeroBubble";
  int n_microbatches = 8;  ///< per replica
  int64_t batch = 32;    ///< sequences per step, over all data-parallel replicas
  int dp = 1;            ///< data-parallel replicas of the pipeline (tp-launch: stages/spr x dp)
  /// --pp: pipeline ranks (stages = pp x stages per rank); 0: from --stages. --pp auto and
  /// --dp auto pick them from the world size (auto_layout.h).
  int pp = 0;
  bool pp_auto = false, dp_auto = false;
  /// How --stages was set when not by that flag ("--pp 3 x 2 stages per rank of ZBVZeroBubble",
  /// "the plan p.json"), for errors to name the flag the user passed; empty: --stages itself.
  std::string stages_from;
  std::string device = "cpu";
  int blas_threads = 1;
  bool unsplit = false;  ///< train the whole model in this thread, without a pipeline
  /// Tensor parallelism over tp processes of those tp-launch starts; 1: none. With --unsplit the
  /// whole model is split over them; with a pipeline each stage is (a {pp, dp, tp} mesh).
  int tp = 1;
  /// Shard each stage's parameters, gradients and AdamW state over its --dp replicas
  /// (fully_shard per block, then the stage), gathered once per step by the schedule.
  bool fsdp = false;
  /// --mixed-precision: "bf16" computes in bfloat16 on float32 master shards (--fsdp); empty: off.
  std::string mixed_precision;
  std::string recompute =
      "none";  ///< none, full, every:K or type:Name,... (tensorplay/pipelining/recompute.h)
  /// A plan file (tp-plan) or "auto" (profile and plan here); empty: the flags above decide.
  std::string plan;
  std::string profile_out;  ///< write the GPT's profile (for tp-plan) there and exit
  double memory_cap = 0;    ///< --plan auto: bytes per rank (0: none)

  // -- optimisation -------------------------------------------------------------------------------
  int steps = 400;
  float lr = 3e-3f;
  float min_lr = 3e-4f;
  int warmup = 20;
  float clip = 1.0f;
  float weight_decay = 0.01f;
  uint64_t seed = 1337;

  // -- what the run writes ------------------------------------------------------------------------
  std::string checkpoint_dir = "train_gpt_run";
  int checkpoint_interval = 100;  ///< 0: only at the end
  bool resume = false;
  int resume_from = 0;     ///< --resume-from: the checkpoint step to resume (0: the newest)
  bool overwrite = false;  ///< start over in a --checkpoint-dir that holds checkpoints
  int stop_after = 0;  ///< stop (with a checkpoint) after this step, as if interrupted; 0: never
  std::string log_dir;
  int trace_step = 20;            ///< 0: none
  bool trace_step_given = false;  ///< --trace-step was passed (the default may pass --steps)
  int val_interval = 50;
  int val_batches = 4;
  int sample_chars = 300;
  float temperature = 0.8f;
  std::string prompt = "This License";
  bool json = false;        ///< also print the summary as one JSON line
  bool quiet = false;       ///< no per-step lines
  std::string losses_file;  ///< append "step loss" per step, with every digit (empty: none)
  bool verbose = false;     ///< also the libraries' own logs (SentencePiece's training)
  /// The command line as given (the program first), for the command that goes on after a stop.
  std::vector<std::string> command;
  /// The model-size flags given on the command line (--layers, --width, ...): --init-from says
  /// which of them its folder overrides.
  std::vector<std::string> given_model_flags;

  /// The learning rate of `step` (1-based): linear warm-up over `warmup` steps, then cosine decay
  /// from lr to min_lr at the last step.
  float lr_at(int step) const;
};

/// Parses argv (CLI11). On --help prints and exits 0; on a bad flag prints CLI11's message naming
/// it and exits 1, as every error of train_gpt does.
Options parse_options(int argc, char** argv);

/// Checks the flags against each other before any work starts; throws std::invalid_argument
/// naming the flags given and what to change.
void check_options(const Options& o);

/// The command that continues a run stopped by --stop-after: `command` without --stop-after and
/// --resume-from, with --resume, each argument quoted for a POSIX shell where it needs it.
std::string continue_command(const std::vector<std::string>& command);

}  // namespace train_gpt
