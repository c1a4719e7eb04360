#!/usr/bin/env bash
# train_gpt --tp 2 with a pipeline under tp-launch: the GPT and the Llama (4 query heads, 2
# key-value heads) cut into stages, each split over 2 processes, on pp 2 x tp 2 (4 processes,
# 1F1B, and ZBVZeroBubble recomputing every block) and pp 2 x dp 2 x tp 2 (8 processes,
# Interleaved1F1B) train to the losses of --unsplit within float32 rounding, gradient clipping
# included.
# Usage: check_train_gpt_tp_pipeline.sh TRAIN_GPT TP_LAUNCH SCRATCH_DIR
set -euo pipefail
train_gpt=$1 tp_launch=$2 scratch=$3
rm -rf "$scratch" && mkdir -p "$scratch"
small=(--layers 4 --width 32 --heads 4 --context 16 --batch 8 --val-interval 0 --val-batches 1
       --sample-chars 0 --trace-step 0 --checkpoint-dir "" --steps 4 --quiet --clip 0.5)

fail() { echo "FAIL: $*"; exit 1; }

# The largest relative difference between two loss files ("step loss" lines).
compare() {
  paste "$1" "$2" | awk '{ d = $2 - $4; if (d < 0) d = -d; r = d / ($2 > 0 ? $2 : 1);
    if (r > worst) worst = r; n++ } END { if (n < 4) { print "few"; exit } print worst + 0 }'
}

for model in "--model gpt2" "--model llama --kv-heads 2 --mlp-width 64"; do
  name=$(echo "$model" | cut -d' ' -f2)
  # shellcheck disable=SC2086
  "$train_gpt" "${small[@]}" $model --unsplit --losses-file "$scratch/$name.unsplit" \
    > "$scratch/$name.unsplit.out" 2>&1 || { cat "$scratch/$name.unsplit.out"; fail "$name --unsplit failed"; }
  for layout in "4 --pp 2 --schedule 1F1B --microbatches 2" \
                "4 --pp 2 --schedule ZBVZeroBubble --microbatches 4 --recompute full" \
                "8 --pp 2 --dp 2 --schedule Interleaved1F1B --microbatches 2"; do
    procs=${layout%% *} flags=${layout#* }
    tag="$name.$(echo "$flags" | tr -c 'A-Za-z0-9' '_')"
    # shellcheck disable=SC2086
    timeout 180 "$tp_launch" --nproc-per-node "$procs" -- "$train_gpt" "${small[@]}" $model \
      --tp 2 $flags --losses-file "$scratch/$tag" > "$scratch/$tag.out" 2>&1 ||
      { cat "$scratch/$tag.out"; fail "$name --tp 2 $flags failed"; }
    worst=$(compare "$scratch/$name.unsplit" "$scratch/$tag")
    [ "$worst" != "few" ] || fail "$name --tp 2 $flags: fewer than 4 losses written"
    awk -v w="$worst" 'BEGIN { exit !(w < 1e-5) }' ||
      { paste "$scratch/$name.unsplit" "$scratch/$tag"; fail "$name --tp 2 $flags: losses differ by $worst"; }
    echo "$name --tp 2 $flags: losses within $worst of --unsplit"
  done
done

# Checkpoints and exports are not written under --tp with a pipeline yet: a clear error.
if "$train_gpt" "${small[@]}" --tp 2 --export "$scratch/export" > "$scratch/export.out" 2>&1; then
  fail "--tp 2 --export with a pipeline ran"
fi
grep -q "writes no checkpoints or exports yet" "$scratch/export.out" ||
  { cat "$scratch/export.out"; fail "--tp 2 --export with a pipeline: no clear error"; }
echo "ok"
