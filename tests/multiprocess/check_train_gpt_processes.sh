#!/usr/bin/env bash
# examples/train_gpt in two processes under tp-launch (ZBV: each rank holds two stages of the V)
# prints the losses of the embedded single-process run, saves a complete checkpoint from both
# ranks into one folder, and resumes from it.
# Usage: check_train_gpt_processes.sh TP_LAUNCH TRAIN_GPT SCRATCH_DIR
set -euo pipefail
tp_launch=$1 train_gpt=$2 scratch=$3
rm -rf "$scratch" && mkdir -p "$scratch"
small=(--layers 4 --width 32 --heads 2 --context 16 --batch 16 --microbatches 4 --steps 6
       --sample-chars 10 --val-interval 3 --val-batches 1)
fail() { echo "FAIL: $*"; exit 1; }

"$train_gpt" "${small[@]}" --checkpoint-dir "$scratch/embedded" > "$scratch/embedded.out" 2>&1 ||
  { cat "$scratch/embedded.out"; fail "the embedded run failed"; }
"$tp_launch" --nproc-per-node 2 --grace-seconds 2 -- "$train_gpt" "${small[@]}" \
  --checkpoint-dir "$scratch/launched" --stop-after 4 > "$scratch/launched.out" 2>&1 ||
  { cat "$scratch/launched.out"; fail "the two-process run failed"; }
"$tp_launch" --nproc-per-node 2 --grace-seconds 2 -- "$train_gpt" "${small[@]}" \
  --checkpoint-dir "$scratch/launched" --resume >> "$scratch/launched.out" 2>&1 ||
  { cat "$scratch/launched.out"; fail "the resumed two-process run failed"; }
grep -q "(one process each)" "$scratch/launched.out" || fail "the launched run did not go across processes"
# One index per rank (each saves the stages it holds).
[ "$(ls "$scratch"/launched/step_00000004/index_s*.txt | wc -l)" = 2 ] ||
  fail "step 4 has not one index per rank"
for step in 1 2 3 4 5 6; do
  a=$(grep "^step    $step/6" "$scratch/embedded.out" | awk '{print $4}')
  b=$(grep "step    $step/6" "$scratch/launched.out" | awk '{print $6}')
  [ -n "$a" ] && [ "$a" = "$b" ] || fail "step $step: loss $b in two processes, $a embedded"
done
echo "train_gpt in two processes: the embedded losses, a checkpoint from both ranks, resumed"
