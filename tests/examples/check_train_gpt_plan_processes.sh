#!/usr/bin/env bash
# Plans for ranks in processes of their own time transfers with the profile's UCX channel: the
# profile holds ucx_shm, tp-plan --processes and train_gpt --plan auto under tp-launch plan over it
# (every rank running rank 0's plan), and tp-trace predicts a launched run's step over it.
# Usage: check_train_gpt_plan_processes.sh TRAIN_GPT TP_PLAN TP_TRACE TP_LAUNCH SCRATCH_DIR
set -euo pipefail
train_gpt=$1 tp_plan=$2 tp_trace=$3 tp_launch=$4 scratch=$5
rm -rf "$scratch" && mkdir -p "$scratch"
small=(--layers 2 --width 32 --heads 2 --context 16 --batch 8 --microbatches 2 --val-interval 0
       --val-batches 1 --sample-chars 0 --trace-step 0 --checkpoint-dir "" --steps 3 --quiet)
launch=(timeout 120 "$tp_launch" --nproc-per-node 2 --)

fail() { echo "FAIL: $*"; exit 1; }

"$train_gpt" "${small[@]}" --profile-out "$scratch/profile.json" > "$scratch/profile.out" 2>&1 ||
  { cat "$scratch/profile.out"; fail "--profile-out failed"; }
grep -q '"kind": "ucx_shm"' "$scratch/profile.json" ||
  { cat "$scratch/profile.out"; fail "the profile has no ucx_shm channel"; }
"$tp_plan" --profile "$scratch/profile.json" --world 2 --batch 8 --processes \
  --out "$scratch/plan.json" > "$scratch/tp_plan.out" 2>&1 || { cat "$scratch/tp_plan.out"; fail "tp-plan failed"; }
grep -q "transfers over the ucx_shm channel" "$scratch/tp_plan.out" ||
  { cat "$scratch/tp_plan.out"; fail "tp-plan --processes did not plan over ucx_shm"; }

"${launch[@]}" "$train_gpt" "${small[@]}" --plan "$scratch/plan.json" --log-dir "$scratch/logs" \
  > "$scratch/run.out" 2>&1 || { cat "$scratch/run.out"; fail "the launched planned run failed"; }
text=$("$tp_trace" "$scratch/logs" --step 3 --plan "$scratch/plan.json" \
  --profile "$scratch/profile.json" 2> "$scratch/trace.err") || { cat "$scratch/trace.err"; fail "tp-trace --plan failed"; }
grep -q "transfers predicted over the profile's ucx_shm channel (ranks in processes of their own)" \
  <<<"$text" || fail "tp-trace did not predict the launched run over ucx_shm: $text"

"${launch[@]}" "$train_gpt" "${small[@]}" --plan auto > "$scratch/auto.out" 2>&1 ||
  { cat "$scratch/auto.out"; fail "--plan auto under tp-launch failed"; }
grep -q "transfers over the ucx_shm channel" "$scratch/auto.out" ||
  { cat "$scratch/auto.out"; fail "--plan auto under tp-launch did not plan over ucx_shm"; }
[ "$(grep -o '^\[rank [0-9]*\] plan auto:' "$scratch/auto.out" | sort -u | wc -l)" -eq 1 ] ||
  { cat "$scratch/auto.out"; fail "--plan auto: not exactly one rank planned"; }
echo "ok"
