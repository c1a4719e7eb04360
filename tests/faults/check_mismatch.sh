#!/usr/bin/env bash
# Runs one mismatch case under tp-launch on loopback: ranks whose stages disagree (a cut, a width
# or a dtype at a boundary, at construction or in a step), or agree (the control). Passes when
# every rank reported what it should (the expected error within its limit, well before any step
# timeout; none for the control), tp-launch exited 0, and no process of the job is left.
# Usage: check_mismatch.sh TP_LAUNCH MISMATCH_CHECK CASE NPROC
set -uo pipefail
launch=$1 program=$2 which=$3 nproc=$4
work=$(mktemp -d)
tag="mismatch-$$-$RANDOM"
cleanup() {
  pkill -KILL -f -- "--tag $tag" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
start=$(date +%s%N)
timeout -k 5 60 "$launch" --nproc-per-node "$nproc" --grace-seconds 2 -- \
  "$program" --case "$which" --tag "$tag" >"$work/out" 2>"$work/err"
rc=$?
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
cat "$work/out" "$work/err"
status=0
if [ "$rc" -ne 0 ]; then
  echo "FAIL: tp-launch exited $rc (a rank did not see what it should in time)"
  status=1
fi
ok=$(grep -c "mismatch-check rank [0-9]*: OK" "$work/out")
if [ "$ok" -ne "$nproc" ]; then
  echo "FAIL: $ok of $nproc ranks reported what they should in time"
  status=1
fi
sleep 0.2
if pgrep -f -- "--tag $tag" >/dev/null; then
  echo "FAIL: processes of the job are left behind:"
  pgrep -af -- "--tag $tag"
  status=1
fi
echo "{\"case\": \"$which\", \"ranks\": $nproc, \"launcher_exit\": $rc, \"job_ms\": $elapsed_ms}"
exit $status
