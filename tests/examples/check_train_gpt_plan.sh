#!/usr/bin/env bash
# train_gpt with plans, end to end on a small model: --profile-out writes a profile tp-plan reads,
# the plan it writes runs (train_gpt --plan FILE, and --plan auto), the run reports the predicted
# and measured step, and a plan cutting at blocks the model lacks is an error naming them.
# Usage: check_train_gpt_plan.sh TRAIN_GPT TP_PLAN SCRATCH_DIR
set -euo pipefail
train_gpt=$1 tp_plan=$2 scratch=$3
rm -rf "$scratch" && mkdir -p "$scratch"
small=(--layers 2 --width 32 --heads 2 --context 16 --batch 8 --microbatches 2 --val-interval 0
       --val-batches 1 --sample-chars 0 --trace-step 0 --checkpoint-dir "" --steps 3 --quiet)

fail() { echo "FAIL: $*"; exit 1; }

"$train_gpt" "${small[@]}" --profile-out "$scratch/profile.json" > "$scratch/profile.out" 2>&1 ||
  { cat "$scratch/profile.out"; fail "--profile-out failed"; }
grep -q '"blocks.1"' "$scratch/profile.json" || fail "the profile has no segment blocks.1"
"$tp_plan" --profile "$scratch/profile.json" --world 2 --batch 8 --out "$scratch/plan.json" \
  > "$scratch/tp_plan.out" 2>&1 || { cat "$scratch/tp_plan.out"; fail "tp-plan failed"; }
grep -q "^  1\. " "$scratch/tp_plan.out" || { cat "$scratch/tp_plan.out"; fail "no ranked list"; }
grep -q "why the others lost" "$scratch/tp_plan.out" || fail "no reasons for the losers"

"$train_gpt" "${small[@]}" --plan "$scratch/plan.json" > "$scratch/run.out" 2>&1 ||
  { cat "$scratch/run.out"; fail "the planned run failed"; }
grep -q "^plan: predicted .* s per step, measured" "$scratch/run.out" ||
  { cat "$scratch/run.out"; fail "no predicted against measured step"; }

"$train_gpt" "${small[@]}" --plan auto > "$scratch/auto.out" 2>&1 ||
  { cat "$scratch/auto.out"; fail "--plan auto failed"; }
grep -q "^plan auto:" "$scratch/auto.out" || fail "--plan auto printed no plan"

sed 's/"blocks\./"layers./g' "$scratch/plan.json" > "$scratch/other.json"
if "$train_gpt" "${small[@]}" --plan "$scratch/other.json" > "$scratch/other.out" 2>&1; then
  fail "a plan for other block names ran"
fi
grep -q "which this model does not have" "$scratch/other.out" ||
  { cat "$scratch/other.out"; fail "the mismatch is not named"; }
echo "ok"
