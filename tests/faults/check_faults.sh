#!/usr/bin/env bash
# Runs one fault case under tp-launch: 4 ranks, 1F1B, and a victim rank killed (SIGKILL) or
# stopped (SIGSTOP) mid-step. Passes when every other rank reported its error on time naming the
# victim, tp-launch exited non-zero naming the rank that failed first, and no process of the job
# is left. Usage: check_faults.sh TP_LAUNCH FAULT_CHECK kill|stop VICTIM [extra fault_check flags]
set -uo pipefail
launch=$1 program=$2 fault=$3 victim=$4
shift 4
work=$(mktemp -d)
tag="faults-$$-$RANDOM"
cleanup() {
  pkill -KILL -f -- "--tag $tag" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
start=$(date +%s%N)
timeout -k 5 90 "$launch" --nproc-per-node 4 --grace-seconds 5 -- \
  "$program" --fault "$fault" --victim "$victim" --dir "$work" --tag "$tag" "$@" \
  >"$work/out" 2>"$work/err"
rc=$?
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
cat "$work/out" "$work/err"
status=0
if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ]; then
  echo "FAIL: tp-launch exited $rc (expected a failure, not success or a timeout)"
  status=1
fi
if ! grep -q "tp-launch: rank [0-9]" "$work/err"; then
  echo "FAIL: tp-launch did not name the rank that failed"
  status=1
fi
ok=$(grep -c "fault-check rank [0-9]*: OK" "$work/out")
if [ "$ok" -ne 3 ]; then
  echo "FAIL: $ok of 3 surviving ranks reported their error on time naming rank $victim"
  status=1
fi
sleep 0.2
if pgrep -f -- "--tag $tag" >/dev/null; then
  echo "FAIL: processes of the job are left behind:"
  pgrep -af -- "--tag $tag"
  status=1
fi
echo "{\"fault\": \"$fault\", \"victim\": $victim, \"launcher_exit\": $rc, \"job_ms\": $elapsed_ms}"
exit $status
