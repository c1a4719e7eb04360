#!/usr/bin/env bash
# train_gpt --unsplit --tp 2 writes named checkpoints of the unsplit model (weights and AdamW
# state gathered over tp): a run stopped after step 2 resumes at --tp 4 and as an unsplit
# pipeline (2 stages, 1F1B, no tp), and both train steps 3 and 4 as the run that went straight
# through did (the same losses within float32 rounding). For the GPT (a tied head) and the Llama;
# and a pipeline's checkpoint resumes at --unsplit --tp 2.
# Usage: check_train_gpt_tp_checkpoint.sh TRAIN_GPT TP_LAUNCH SCRATCH_DIR
set -euo pipefail
train_gpt=$1 tp_launch=$2 scratch=$3
rm -rf "$scratch" && mkdir -p "$scratch"
small=(--layers 2 --width 32 --heads 4 --context 16 --batch 4 --val-interval 0 --val-batches 1
       --sample-chars 0 --trace-step 0 --steps 4 --quiet --clip 0.5 --checkpoint-interval 1)

fail() { echo "FAIL: $*"; exit 1; }

# The largest relative difference between two loss files ("step loss" lines).
compare() {
  paste "$1" "$2" | awk '{ d = $2 - $4; if (d < 0) d = -d; r = d / ($2 > 0 ? $2 : 1);
    if (r > worst) worst = r; n++ } END { if (n < 4) { print "few"; exit } print worst + 0 }'
}

run() {  # run NAME PROCESSES FLAGS...: train_gpt under tp-launch (1: alone), output in NAME.out
  local name=$1 procs=$2; shift 2
  if [ "$procs" = 1 ]; then
    timeout 180 "$train_gpt" "${small[@]}" "$@" > "$scratch/$name.out" 2>&1 ||
      { cat "$scratch/$name.out"; fail "$name failed"; }
  else
    timeout 180 "$tp_launch" --nproc-per-node "$procs" -- "$train_gpt" "${small[@]}" "$@" \
      > "$scratch/$name.out" 2>&1 || { cat "$scratch/$name.out"; fail "$name failed"; }
  fi
}

for model in "--model gpt2" "--model llama --kv-heads 2 --mlp-width 64"; do
  name=$(echo "$model" | cut -d' ' -f2)
  d="$scratch/$name"
  # shellcheck disable=SC2086
  run "$name.straight" 2 $model --unsplit --tp 2 --checkpoint-dir "$d.straight" \
    --losses-file "$d.straight.losses"
  # shellcheck disable=SC2086
  run "$name.first" 2 $model --unsplit --tp 2 --checkpoint-dir "$d.first" --stop-after 2 \
    --losses-file "$d.first.losses"
  for target in "tp4 4 --unsplit --tp 4" "pipeline 1 --schedule 1F1B --stages 2 --microbatches 2"; do
    tag=${target%% *} rest=${target#* }
    procs=${rest%% *} flags=${rest#* }
    cp -r "$d.first" "$d.$tag"
    cp "$d.first.losses" "$d.$tag.losses"
    # shellcheck disable=SC2086
    run "$name.$tag" "$procs" $model $flags --checkpoint-dir "$d.$tag" --resume \
      --losses-file "$d.$tag.losses"
    grep -q "resumed step 2 written by unsplit, tp 2" "$scratch/$name.$tag.out" ||
      { cat "$scratch/$name.$tag.out"; fail "$name: $tag did not resume step 2"; }
    worst=$(compare "$d.straight.losses" "$d.$tag.losses")
    [ "$worst" != "few" ] || fail "$name $tag: fewer than 4 losses"
    awk -v w="$worst" 'BEGIN { exit !(w < 1e-5) }' ||
      { paste "$d.straight.losses" "$d.$tag.losses"; fail "$name: resumed at $tag, losses differ by $worst"; }
    echo "$name: tp 2 checkpoint resumed at $tag within $worst of the straight run"
  done
done
# And the other way: a pipeline's checkpoint (2 stages, no tp) resumes at --unsplit --tp 2.
d="$scratch/gpt2"
run pipeline.first 1 --model gpt2 --schedule 1F1B --stages 2 --microbatches 2 \
  --checkpoint-dir "$d.from_pipeline" --stop-after 2 --losses-file "$d.from_pipeline.losses"
run pipeline.tp2 2 --model gpt2 --unsplit --tp 2 --checkpoint-dir "$d.from_pipeline" --resume \
  --losses-file "$d.from_pipeline.losses"
grep -q "resumed step 2 written by pp 2 x dp 1" "$scratch/pipeline.tp2.out" ||
  { cat "$scratch/pipeline.tp2.out"; fail "--tp 2 did not resume the pipeline's step 2"; }
worst=$(compare "$d.straight.losses" "$d.from_pipeline.losses")
[ "$worst" != "few" ] || fail "pipeline to tp 2: fewer than 4 losses"
awk -v w="$worst" 'BEGIN { exit !(w < 1e-5) }' ||
  { paste "$d.straight.losses" "$d.from_pipeline.losses"; fail "pipeline to tp 2: losses differ by $worst"; }
echo "gpt2: a pipeline's checkpoint resumed at tp 2 within $worst of the straight run"
echo "ok"
