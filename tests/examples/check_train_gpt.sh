#!/usr/bin/env bash
# examples/train_gpt end to end on a small model: it learns (the loss falls), writes the timeline and trace of its trace step and its checkpoints, and a run stopped
# and resumed ends with checkpoint files identical, byte for byte, to a run that never stopped
# (parameters, optimizer state and generators), under the given schedule; so does a run that
# recomputes every block (--recompute full).
# Usage: check_train_gpt.sh TRAIN_GPT SCRATCH_DIR SCHEDULE STAGES
set -euo pipefail
train_gpt=$1 scratch=$2 schedule=$3 stages=$4
rm -rf "$scratch" && mkdir -p "$scratch"
small=(--layers 4 --width 32 --heads 2 --context 16 --batch 16 --microbatches 4 --stages "$stages"
       --schedule "$schedule" --val-interval 4 --val-batches 1 --sample-chars 20 --lr 1e-2
       --warmup 2 --trace-step 2 --checkpoint-interval 4)

fail() { echo "FAIL: $*"; exit 1; }

"$train_gpt" "${small[@]}" --steps 8 --checkpoint-dir "$scratch/straight" > "$scratch/straight.out" 2>&1 ||
  { cat "$scratch/straight.out"; fail "the straight run failed"; }
out="$scratch/straight.out"
grep -q "^step    8/8  loss" "$out" || { cat "$out"; fail "no progress line for step 8"; }
grep -q "bubble" "$out" || fail "no measured bubble in the progress lines"
first=$(grep "^step    1/8" "$out" | awk '{print $4}')
last=$(grep "^step    8/8" "$out" | awk '{print $4}')
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }' || fail "the loss did not fall: $first -> $last"
grep -q "^summary: " "$out" || fail "no summary"
grep -q "rank 1: busy" "$out" || fail "no per-rank figures"
grep -q -- "--- greedy ---" "$out" || fail "no generated text"
[ -s "$scratch/straight/step_2_timeline.svg" ] || fail "no timeline SVG of step 2"
grep -q '"traceEvents"\|"ph"' "$scratch/straight/step_2_trace.json" || fail "no Chrome trace of step 2"
[ -f "$scratch/straight/step_00000004/index_s0.txt" ] || fail "no checkpoint at step 4"

# Stop after 4 steps, then resume to 8.
"$train_gpt" "${small[@]}" --steps 8 --stop-after 4 --checkpoint-dir "$scratch/resumed" > "$scratch/first.out" 2>&1 ||
  { cat "$scratch/first.out"; fail "the first half failed"; }
"$train_gpt" "${small[@]}" --steps 8 --checkpoint-dir "$scratch/resumed" --resume \
  > "$scratch/second.out" 2>&1 || { cat "$scratch/second.out"; fail "the resumed run failed"; }
grep -q "resumed step 4 written by pp [0-9]* x dp 1 as pp [0-9]* x dp 1" "$scratch/second.out" || fail "the second run did not resume"
for step_line in 5 6 7 8; do
  a=$(grep "^step    $step_line/8" "$out" | awk '{print $4}')
  b=$(grep "^step    $step_line/8" "$scratch/second.out" | awk '{print $4}')
  [ -n "$a" ] && [ "$a" = "$b" ] || fail "step $step_line: loss $b after resuming, $a straight"
done
for file in "$scratch"/straight/step_00000008/*_s[0-9]*; do
  cmp -s "$file" "$scratch/resumed/step_00000008/$(basename "$file")" ||
    fail "$(basename "$file") at step 8 differs between the straight and the resumed run"
done

# Recomputation changes memory, not results: the run under --recompute full ends with the same
# checkpoint files.
"$train_gpt" "${small[@]}" --steps 8 --recompute full --checkpoint-dir "$scratch/recomputed" \
  > "$scratch/recomputed.out" 2>&1 || { cat "$scratch/recomputed.out"; fail "the --recompute full run failed"; }
grep -q "^recomputation: full" "$scratch/recomputed.out" || fail "no recomputation line"
for file in "$scratch"/straight/step_00000008/*_s[0-9]*; do
  cmp -s "$file" "$scratch/recomputed/step_00000008/$(basename "$file")" ||
    fail "$(basename "$file") at step 8 differs between the plain and the recomputing run"
done

# Bad input is a clear error, not a crash.
if "$train_gpt" --recompute every:0 > "$scratch/bad.out" 2>&1; then fail "--recompute every:0 ran"; fi
grep -q "at least 1" "$scratch/bad.out" || { cat "$scratch/bad.out"; fail "no clear error"; }
if "$train_gpt" --stages 6 --layers 4 > "$scratch/bad.out" 2>&1; then fail "--stages 6 --layers 4 ran"; fi
grep -q "more than --layers" "$scratch/bad.out" || { cat "$scratch/bad.out"; fail "no clear error"; }
if "$train_gpt" --dp two > "$scratch/bad.out" 2>&1; then fail "--dp two ran"; fi
grep -q "positive whole number or auto" "$scratch/bad.out" || { cat "$scratch/bad.out"; fail "no clear error"; }
if "$train_gpt" --resume --checkpoint-dir "$scratch/none" > "$scratch/bad.out" 2>&1; then
  fail "--resume without a checkpoint ran"
fi
grep -q "no complete checkpoint" "$scratch/bad.out" || { cat "$scratch/bad.out"; fail "no clear error"; }
echo "train_gpt $schedule over $stages stages: learns, writes its timeline, resumes exactly"
