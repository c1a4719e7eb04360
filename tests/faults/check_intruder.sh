#!/usr/bin/env bash
# A 4-rank job trains while a process without the cluster token reaches its rendezvous port
# (raw garbage over TCP, then CAF: hellos with a wrong and with no token, a forged collective
# contribution, a clock sample request). Passes when every attempt is refused, rank 0 logs the
# refusals with the intruder's address, and the job still trains to the end.
# Usage: check_intruder.sh TP_LAUNCH FAULT_CHECK INTRUDER
set -uo pipefail
launch=$1 program=$2 intruder=$3
work=$(mktemp -d)
tag="intruder-$$-$RANDOM"
cleanup() {
  pkill -KILL -f -- "--tag $tag" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
# A port nobody listens on (below the ephemeral range, like tp-launch's own choice).
for _ in $(seq 50); do
  port=$(( 21000 + RANDOM % 8000 ))
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || break
done
timeout -k 5 90 "$launch" --nproc-per-node 4 --grace-seconds 5 --master-port "$port" -- \
  "$program" --fault none --steps 60 --dir "$work" --tag "$tag" >"$work/out" 2>"$work/err" &
job=$!
# Wait until rank 0 listens (a bounded number of tries).
for _ in $(seq 100); do
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  sleep 0.1
done
timeout 30 "$intruder" 127.0.0.1 "$port" >"$work/intruder" 2>&1
intruder_rc=$?
wait "$job"
job_rc=$?
cat "$work/intruder" "$work/out" "$work/err"
status=0
[ "$intruder_rc" = 0 ] || { echo "FAIL: the intruder was not refused everywhere ($intruder_rc)"; status=1; }
[ "$job_rc" = 0 ] || { echo "FAIL: the job did not finish cleanly ($job_rc)"; status=1; }
grep -q "fault-check rank 3: trained 60 steps" "$work/out" || { echo "FAIL: training did not end"; status=1; }
grep -q "rank 0 dropped a hello claiming rank 1 with a wrong cluster token from 127.0.0.1:" \
  "$work/err" || { echo "FAIL: the wrong token was not logged with its address"; status=1; }
grep -q "rank 0 dropped a hello claiming rank 1 without a cluster token from 127.0.0.1:" \
  "$work/err" || { echo "FAIL: the missing token was not logged"; status=1; }
grep -q "rank 0 dropped a collective contribution from 127.0.0.1:" "$work/err" ||
  { echo "FAIL: the forged contribution was not logged"; status=1; }
grep -q "rank 0 dropped a clock sample request from 127.0.0.1:" "$work/err" ||
  { echo "FAIL: the clock sample request was not logged"; status=1; }
exit $status
