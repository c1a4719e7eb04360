#!/usr/bin/env bash
# train_gpt with plans, end to end on a small model: --profile-out writes a profile tp-plan reads,
# the plan it writes runs (train_gpt --plan FILE, and --plan auto), the run reports the predicted
# and measured step, tp-trace sets the plan's simulated step beside the run's message log, and a
# plan cutting at blocks the model lacks, or made for a model of other sizes, is an error naming
# them.
# Usage: check_train_gpt_plan.sh TRAIN_GPT TP_PLAN TP_TRACE SCRATCH_DIR
set -euo pipefail
train_gpt=$1 tp_plan=$2 tp_trace=$3 scratch=$4
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

"$train_gpt" "${small[@]}" --plan "$scratch/plan.json" --log-dir "$scratch/logs" \
  > "$scratch/run.out" 2>&1 || { cat "$scratch/run.out"; fail "the planned run failed"; }
grep -q "^plan: predicted .* s per step, measured" "$scratch/run.out" ||
  { cat "$scratch/run.out"; fail "no predicted against measured step"; }

# tp-trace: the plan's simulated step beside the run's last training step (3; a forward-only
# evaluation follows it in the log, which tp-trace skips). Every figure is there with a finite
# error (a JSON null would be an infinite or undefined one), and the predicted step is positive.
predicted=(--plan "$scratch/plan.json" --profile "$scratch/profile.json")
json=$("$tp_trace" "$scratch/logs" --step 3 "${predicted[@]}" --json --trace "$scratch/both.json" \
  --svg "$scratch/both.svg" 2> "$scratch/trace.err") || { cat "$scratch/trace.err"; fail "tp-trace --plan failed"; }
number='[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?'
grep -qE '"predicted":\{"step_us":\{"predicted":([1-9][0-9]*(\.[0-9]+)?|0\.[0-9]*[1-9][0-9]*)([eE][-+]?[0-9]+)?,"measured":'"$number"',"error":-?'"$number" <<<"$json" ||
  fail "tp-trace --plan: no positive predicted step with a finite error: $json"
[ "$(grep -oE '"busy_us":\{"predicted":' <<<"$json" | wc -l)" -eq 2 ] ||
  fail "tp-trace --plan: expected both ranks' busy times: $json"
grep -qE '"peak_activation_bytes":\{"predicted":'"$number" <<<"$json" ||
  fail "tp-trace --plan: expected the ranks' bytes: $json"
grep -qE '"kinds":\[\{"kind":"F","actions":[1-9]' <<<"$json" ||
  fail "tp-trace --plan: expected the error per action kind: $json"
if grep -q '"error":null' <<<"$json"; then fail "tp-trace --plan: an error is not finite: $json"; fi
grep -q '"pid":1' "$scratch/both.json" && grep -q '"name":"predicted"' "$scratch/both.json" ||
  fail "tp-trace --plan: the trace has no predicted tracks"
[ "$(grep -c '<svg' "$scratch/both.svg")" -eq 3 ] || fail "tp-trace --plan: the SVG is not two timelines"
text=$("$tp_trace" "$scratch/logs" --step 3 "${predicted[@]}") || fail "tp-trace --plan (text) failed"
grep -qE "^  rank 1: step $number / $number us \([-+]$number%\), busy" <<<"$text" ||
  fail "tp-trace --plan: no per-rank comparison: $text"
grep -q "transfers predicted over the profile's in_process channel (ranks in one process)" \
  <<<"$text" || fail "tp-trace --plan: an embedded run not predicted over in_process: $text"
# By default tp-trace reads the last training step (3), not the evaluation logged after it.
json=$("$tp_trace" "$scratch/logs" "${predicted[@]}" --json 2> "$scratch/trace.err") ||
  { cat "$scratch/trace.err"; fail "tp-trace --plan without --step failed"; }
grep -q '"step":3,"log_step":3,"steps_logged":3,"evaluations_logged":1' <<<"$json" ||
  fail "tp-trace did not default to the last training step: $json"
# The evaluation ran forwards only: not the plan's step, and tp-trace says so when asked for it.
if "$tp_trace" "$scratch/logs" --eval 1 "${predicted[@]}" > /dev/null 2> "$scratch/trace.err"; then
  fail "tp-trace compared an evaluation step with a training step"
fi
grep -q "the measured step ran .* F and the prediction .* B" "$scratch/trace.err" ||
  fail "unexpected error: $(cat "$scratch/trace.err")"
if "$tp_trace" "$scratch/logs" --plan "$scratch/plan.json" > /dev/null 2> "$scratch/trace.err"; then
  fail "tp-trace --plan without --profile succeeded"
fi
grep -q -- "--plan and --profile go together" "$scratch/trace.err" ||
  fail "unexpected error: $(cat "$scratch/trace.err")"

"$train_gpt" "${small[@]}" --plan auto --log-dir "$scratch/auto_logs" > "$scratch/auto.out" 2>&1 ||
  { cat "$scratch/auto.out"; fail "--plan auto failed"; }
grep -q "^plan auto:" "$scratch/auto.out" || fail "--plan auto printed no plan"
grep -q "^plan auto: profiling the GPT's 2 blocks" "$scratch/auto.out" ||
  fail "--plan auto was silent while profiling"
# It keeps the plan and the profile beside the message log, for tp-trace to set beside the run.
"$tp_trace" "$scratch/auto_logs" --plan "$scratch/auto_logs/plan_auto.json" \
  --profile "$scratch/auto_logs/profile.json" > "$scratch/auto_trace.out" 2>&1 ||
  { cat "$scratch/auto_trace.out"; fail "tp-trace with --plan auto's plan and profile failed"; }
grep -q "transfers predicted over" "$scratch/auto_trace.out" ||
  { cat "$scratch/auto_trace.out"; fail "no prediction beside --plan auto's run"; }
grep -q "transfers over the in_process channel" "$scratch/auto.out" ||
  fail "--plan auto in one process did not plan over in_process"

sed 's/"blocks\./"layers./g' "$scratch/plan.json" > "$scratch/other.json"
if "$train_gpt" "${small[@]}" --plan "$scratch/other.json" > "$scratch/other.out" 2>&1; then
  fail "a plan for other block names ran"
fi
grep -q "which this model does not have" "$scratch/other.out" ||
  { cat "$scratch/other.out"; fail "the mismatch is not named"; }
# A plan for 2 blocks on a model of 3 cut the model as if the third were not there, silently.
bigger=(--layers 3 "${small[@]:2}")
status=0
"$train_gpt" "${bigger[@]}" --plan "$scratch/plan.json" > "$scratch/bigger.out" 2>&1 || status=$?
[ "$status" -eq 1 ] || { cat "$scratch/bigger.out"; fail "a plan for 2 blocks ran on 3 ($status)"; }
grep -qF "was made for a train_gpt GPT (2 blocks, width 32), but --layers 3 --width 32 make a" \
  "$scratch/bigger.out" || { cat "$scratch/bigger.out"; fail "the model mismatch is not named"; }
echo "ok"
