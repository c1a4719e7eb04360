#!/usr/bin/env bash
# examples/train_gpt with --dp 2 in four processes under tp-launch (a {pp 2, dp 2} mesh: two
# replicas of a two-rank ZBV pipeline, each on half of the batch) prints the losses of the
# embedded single-process run over the whole batch, writes each stage's checkpoint once (from
# its first replica), and resumes from it on all four ranks.
# Usage: check_train_gpt_dp.sh TP_LAUNCH TRAIN_GPT SCRATCH_DIR
set -euo pipefail
tp_launch=$1 train_gpt=$2 scratch=$3
rm -rf "$scratch" && mkdir -p "$scratch"
small=(--layers 4 --width 32 --heads 2 --context 16 --batch 16 --steps 6 --sample-chars 10
       --val-interval 3 --val-batches 1)
fail() { echo "FAIL: $*"; exit 1; }

# Microbatches of two sequences on both sides: 8 in one process, 4 per replica across two.
"$train_gpt" "${small[@]}" --microbatches 8 --checkpoint-dir "$scratch/embedded" \
  > "$scratch/embedded.out" 2>&1 || { cat "$scratch/embedded.out"; fail "the embedded run failed"; }
"$tp_launch" --nproc-per-node 4 --grace-seconds 2 -- "$train_gpt" "${small[@]}" --microbatches 4 \
  --dp 2 --checkpoint-dir "$scratch/launched" --stop-after 4 > "$scratch/launched.out" 2>&1 ||
  { cat "$scratch/launched.out"; fail "the four-process run failed"; }
"$tp_launch" --nproc-per-node 4 --grace-seconds 2 -- "$train_gpt" "${small[@]}" --microbatches 4 \
  --dp 2 --checkpoint-dir "$scratch/launched" --resume >> "$scratch/launched.out" 2>&1 ||
  { cat "$scratch/launched.out"; fail "the resumed four-process run failed"; }
grep -q "data parallel: 2 replicas" "$scratch/launched.out" || fail "the run did not replicate"
# One index per pipeline rank, written by its first replica.
[ "$(ls "$scratch"/launched/step_00000004/index_s*.txt | wc -l)" = 2 ] ||
  fail "step 4 has not one index per pipeline rank"
# One replica prints (the rank with the last stage of replica 0).
[ "$(grep -c "step    1/6" "$scratch/launched.out")" = 1 ] || fail "more than one rank printed step 1"
for step in 1 2 3 4 5 6; do
  a=$(grep "^step    $step/6" "$scratch/embedded.out" | awk '{print $4}')
  b=$(grep "step    $step/6" "$scratch/launched.out" | awk '{print $6}')
  [ -n "$a" ] && [ -n "$b" ] || fail "step $step: no loss printed"
  # The losses are averaged over the replicas in another order than one process sums them.
  awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 2e-4) }' ||
    fail "step $step: loss $b with --dp 2, $a embedded"
done
echo "train_gpt with --dp 2: the embedded losses, a checkpoint from the first replica, resumed"
