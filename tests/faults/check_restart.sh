#!/usr/bin/env bash
# A 4-process train_gpt run of 20 steps (1F1B, a checkpoint every step) in which one rank is
# killed with SIGKILL after step 11 (in step 12 or just after), restarted by tp-launch --max-restarts 1, ends with the same
# loss at every step and the same final checkpoint files, byte for byte (parameters, optimizer
# state, generators), as a run that was never interrupted.
# Usage: check_restart.sh TP_LAUNCH TRAIN_GPT
set -uo pipefail
launch=$1 train_gpt=$2
work=$(mktemp -d)
tag="restart-$$-$RANDOM"
cleanup() {
  pkill -KILL -f -- "--tag-$tag" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
small=(--stages 4 --schedule 1F1B --layers 4 --width 32 --heads 2 --context 16 --batch 16
       --microbatches 4 --steps 20 --checkpoint-interval 1 --sample-chars 0 --val-interval 10
       --val-batches 1 --trace-step 0)

timeout -k 5 300 "$launch" --nproc-per-node 4 --grace-seconds 2 -- "$train_gpt" "${small[@]}" \
  --checkpoint-dir "$work/straight" >"$work/straight.out" 2>&1 ||
  { cat "$work/straight.out"; fail "the uninterrupted run failed"; }

# The interrupted run: rank 2 is killed once the last rank has printed step 11 (steps are a few
# milliseconds: it dies somewhere in steps 12 to 14, after the checkpoint of the step before).
timeout -k 5 300 "$launch" --nproc-per-node 4 --grace-seconds 2 --max-restarts 1 -- \
  bash -c 'exec -a "train_gpt --tag-'"$tag"'-rank-$RANK" "$0" "$@"' "$train_gpt" "${small[@]}" \
  --checkpoint-dir "$work/restarted" >"$work/restarted.out" 2>&1 &
job=$!
killed=no
for _ in $(seq 1200); do
  if grep -q "step   11/20" "$work/restarted.out"; then
    pkill -KILL -f -- "--tag-$tag-rank-2" && killed=yes
    break
  fi
  kill -0 "$job" 2>/dev/null || break
  sleep 0.05
done
wait "$job"
rc=$?
cat "$work/restarted.out"
[ "$killed" = yes ] || fail "rank 2 was not killed during the run"
[ "$rc" = 0 ] || fail "the restarted job exited $rc"
grep -q "rank 2 was killed by signal SIGKILL" "$work/restarted.out" || fail "tp-launch did not name rank 2"
grep -q "restarting every rank (restart 1 of 1)" "$work/restarted.out" || fail "no restart"
grep -q "resumed step" "$work/restarted.out" || fail "the restarted ranks did not resume"
for step in $(seq 1 20); do
  want=$(grep "step *$step/20 " "$work/straight.out" | tail -1 | sed 's/.*loss \([0-9.]*\).*/\1/')
  got=$(grep "step *$step/20 " "$work/restarted.out" | tail -1 | sed 's/.*loss \([0-9.]*\).*/\1/')
  [ -n "$want" ] && [ "$want" = "$got" ] || fail "step $step: loss '$got' after the restart, '$want' straight"
done
for file in "$work"/straight/step_00000020/*_s[0-9]*; do
  cmp "$file" "$work/restarted/step_00000020/$(basename "$file")" ||
    fail "$(basename "$file") of the final checkpoint differs from the uninterrupted run's"
done
sleep 0.2
pgrep -f -- "--tag-$tag" >/dev/null && fail "processes of the job are left behind"
echo "restart: killed after step 11, restarted, every loss and the final state bit for bit as straight"
