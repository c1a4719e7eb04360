#!/usr/bin/env bash
# tp-launch end to end: the environment each rank gets, the "[rank R] " prefixes, stopping the
# other ranks when one fails, forwarding SIGTERM, --log-dir, and the errors for bad flags.
#   check_tp_launch.sh <tp-launch>
set -euo pipefail
launch=$1
work=$(mktemp -d "${TMPDIR:-/tmp}/check_tp_launch.XXXXXX")
passed=0

# A rank's pid is "running" unless gone or a zombie (a container's init may not reap orphans).
is_running() {
  [ -r "/proc/$1/status" ] || return 1
  ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status"
}
# Never leave a process behind, even when a check fails half way.
cleanup() {
  local pid_file pid
  for pid_file in "$work"/*.pid; do
    [ -e "$pid_file" ] || continue
    pid=$(cat "$pid_file")
    if [ -n "$pid" ] && is_running "$pid"; then kill -KILL "$pid" 2>/dev/null || true; fi
  done
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "check_tp_launch: FAILED: $*" >&2; exit 1; }
ok() { passed=$((passed + 1)); echo "check_tp_launch: ok: $*"; }
now_ms() { date +%s%3N; }

# -- environment and prefixes ---------------------------------------------------------------------
timeout 30 "$launch" --nproc-per-node 2 -- bash -c \
  'echo "env RANK=$RANK WORLD_SIZE=$WORLD_SIZE LOCAL_RANK=$LOCAL_RANK LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE MASTER_ADDR=$MASTER_ADDR MASTER_PORT=$MASTER_PORT TOKEN=$TENSORPLAY_CLUSTER_TOKEN"
   echo "to stderr from $RANK" >&2' >"$work/env.out" 2>"$work/env.err" ||
  fail "two ranks printing their environment: exit $?; $(cat "$work/env.err")"
for rank in 0 1; do
  pattern="^\[rank $rank\] env RANK=$rank WORLD_SIZE=2 LOCAL_RANK=$rank LOCAL_WORLD_SIZE=2 MASTER_ADDR=127\.0\.0\.1 MASTER_PORT=[0-9]+ TOKEN=[0-9a-f]{32}$"
  grep -Eq "$pattern" "$work/env.out" || fail "rank $rank environment line missing: $(cat "$work/env.out")"
done
ok "ranks 0 and 1 get RANK, WORLD_SIZE=2, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT"
[ "$(grep -Eo 'MASTER_PORT=[0-9]+ TOKEN=[0-9a-f]+' "$work/env.out" | sort -u | wc -l)" = 1 ] ||
  fail "ranks disagree on MASTER_PORT or TENSORPLAY_CLUSTER_TOKEN: $(cat "$work/env.out")"
ok "both ranks share one MASTER_PORT and one 32-hex-digit TENSORPLAY_CLUSTER_TOKEN"
grep -qx '\[rank 0\] to stderr from 0' "$work/env.err" &&
  grep -qx '\[rank 1\] to stderr from 1' "$work/env.err" ||
  fail "stderr lines not prefixed: $(cat "$work/env.err")"
ok "stdout and stderr lines carry '[rank R] ' on the launcher's stdout and stderr"

out=$(timeout 30 "$launch" --nproc-per-node 2 -- bash -c 'echo one; printf "no newline $RANK"')
grep -qx '\[rank 1\] no newline 1' <<<"$out" || fail "unterminated last line lost: $out"
ok "a last line without a newline is still relayed, prefixed, when the rank exits"

out=$(TENSORPLAY_CLUSTER_TOKEN=given-token timeout 30 "$launch" --nproc_per_node 2 -- \
  bash -c 'echo "token=$TENSORPLAY_CLUSTER_TOKEN"')
[ "$(grep -c 'token=given-token$' <<<"$out")" = 2 ] ||
  fail "TENSORPLAY_CLUSTER_TOKEN not passed through: $out"
ok "a TENSORPLAY_CLUSTER_TOKEN already set reaches every rank unchanged (--nproc_per_node spelling)"

out=$(TP_CLUSTER_TOKEN=old-token timeout 30 "$launch" --nproc-per-node 2 -- \
  bash -c 'echo "token=$TENSORPLAY_CLUSTER_TOKEN old=${TP_CLUSTER_TOKEN-unset}"' 2>"$work/alias.err")
[ "$(grep -c 'token=old-token old=unset$' <<<"$out")" = 2 ] ||
  fail "the old name TP_CLUSTER_TOKEN not read as TENSORPLAY_CLUSTER_TOKEN: $out"
[ "$(grep -c 'TP_CLUSTER_TOKEN is the old name of TENSORPLAY_CLUSTER_TOKEN' "$work/alias.err")" = 1 ] ||
  fail "no single warning about the old name: $(cat "$work/alias.err")"
ok "the old name TP_CLUSTER_TOKEN still works, with one warning, and ranks get the new name only"

rc=0
out=$(TENSORPLAY_PEER_TIMEOUT=soon timeout 30 "$launch" --nproc-per-node 2 -- echo started 2>&1) ||
  rc=$?
[ "$rc" = 1 ] && grep -q 'TENSORPLAY_PEER_TIMEOUT=soon: expected' <<<"$out" &&
  ! grep -q started <<<"$out" || fail "a bad knob: exit $rc, $out"
ok "a bad knob stops tp-launch before any rank starts (exit 1), naming the variable"

# -- a failing rank stops the others --------------------------------------------------------------
# Rank 1 leaves a helper behind that holds its output pipes; stopping the job must end it too.
start=$(now_ms)
rc=0
timeout 30 "$launch" --nproc-per-node 2 -- bash -c \
  'if [ "$RANK" = 1 ]; then sleep 60 & echo $! >"'"$work"'/helper.pid"; sleep 0.3; exit 3; fi
   exec sleep 60' 2>"$work/fail.err" || rc=$?
elapsed=$(($(now_ms) - start))
[ "$rc" = 3 ] || fail "rank 1 exiting 3: tp-launch exited $rc, expected 3; $(cat "$work/fail.err")"
[ "$elapsed" -lt 10000 ] || fail "the sleeping rank 0 was stopped only after ${elapsed} ms"
grep -q 'rank 1 exited with status 3; stopped the other ranks' "$work/fail.err" ||
  fail "no message: $(cat "$work/fail.err")"
ok "rank 1 exiting 3 makes tp-launch exit 3, naming the rank, and stops rank 0 in ${elapsed} ms"
for _ in $(seq 50); do is_running "$(cat "$work/helper.pid")" || break; sleep 0.1; done
is_running "$(cat "$work/helper.pid")" && fail "the helper rank 1 left running survived the stop"
ok "a helper process the failed rank left running is stopped too"

start=$(now_ms)
rc=0
timeout 30 "$launch" --nproc-per-node 2 --grace-seconds 1 -- bash -c \
  'if [ "$RANK" = 0 ]; then sleep 0.3; kill -KILL $$; fi; trap "" TERM; sleep 60' \
  2>"$work/kill.err" || rc=$?
elapsed=$(($(now_ms) - start))
[ "$rc" = 137 ] || fail "rank 0 killed by SIGKILL: tp-launch exited $rc, expected 137"
grep -q 'rank 0 was killed by signal SIGKILL (9)' "$work/kill.err" ||
  fail "no signal name: $(cat "$work/kill.err")"
[ "$elapsed" -lt 10000 ] || fail "rank 1, ignoring SIGTERM, was killed only after ${elapsed} ms"
ok "rank 0 killed by SIGKILL is reported by signal name (exit 137); rank 1, ignoring SIGTERM, got SIGKILL after --grace-seconds 1 (${elapsed} ms in all)"

# -- SIGTERM to the launcher reaches every rank ---------------------------------------------------
# Each rank is a shell with a child of its own, so the check also covers a rank's helpers.
"$launch" --nproc-per-node 2 -- bash -c \
  'sleep 60 & echo $! >"'"$work"'/sleep_$RANK.pid"; echo $$ >"'"$work"'/rank_$RANK.pid"; wait' \
  >/dev/null 2>"$work/term.err" &
launcher=$!
echo "$launcher" >"$work/launcher.pid"
for _ in $(seq 100); do
  [ -s "$work/rank_0.pid" ] && [ -s "$work/rank_1.pid" ] && [ -s "$work/sleep_0.pid" ] &&
    [ -s "$work/sleep_1.pid" ] && break
  sleep 0.1
done
[ -s "$work/rank_1.pid" ] && [ -s "$work/sleep_1.pid" ] || fail "ranks did not start within 10 s"
kill -TERM "$launcher"
for _ in $(seq 100); do is_running "$launcher" || break; sleep 0.1; done
is_running "$launcher" && fail "tp-launch still running 10 s after SIGTERM"
rc=0
wait "$launcher" || rc=$?
[ "$rc" = 143 ] || fail "tp-launch after SIGTERM exited $rc, expected 143"
for pid_file in "$work"/rank_*.pid "$work"/sleep_*.pid; do
  for _ in $(seq 50); do is_running "$(cat "$pid_file")" || break; sleep 0.1; done
  is_running "$(cat "$pid_file")" && fail "$(basename "$pid_file") still running after SIGTERM"
done
ok "SIGTERM to tp-launch stops both ranks and their children (exit 143, no process left)"

# -- --log-dir ------------------------------------------------------------------------------------
timeout 30 "$launch" --nproc-per-node 2 --log-dir "$work/logs" -- bash -c \
  'echo "hello from $RANK"; echo "log dir $TENSORPLAY_LOG_DIR" >&2' >/dev/null 2>&1 ||
  fail "--log-dir run failed"
for rank in 0 1; do
  log="$work/logs/rank_$rank.log"
  [ -f "$log" ] || fail "$log not written"
  grep -qx "hello from $rank" "$log" || fail "$log lacks its unprefixed stdout: $(cat "$log")"
  grep -qx "log dir $work/logs" "$log" || fail "$log lacks stderr or TENSORPLAY_LOG_DIR: $(cat "$log")"
done
ok "--log-dir writes rank_0.log and rank_1.log (unprefixed stdout and stderr) and sets TENSORPLAY_LOG_DIR"

# -- --max-restarts ---------------------------------------------------------------------------------
# Rank 1 fails on the first attempt only: one restart of every rank, then success. It fails only
# once rank 0 has printed (a marker file says so, at most 5 s later): stopped before its first
# line, rank 0 would have nothing to show for the attempt.
rc=0
MARKS="$work" timeout 60 "$launch" --nproc-per-node 2 --grace-seconds 1 --max-restarts 2 -- bash -c \
  'echo "attempt $TORCHELASTIC_RESTART_COUNT of $TORCHELASTIC_MAX_RESTARTS port $MASTER_PORT";
   [ "$RANK" = 0 ] && touch "$MARKS/printed_$TORCHELASTIC_RESTART_COUNT";
   if [ "$RANK" = 1 ] && [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then
     for _ in $(seq 50); do [ -e "$MARKS/printed_0" ] && break; sleep 0.1; done; exit 7
   fi; sleep 0.2' \
  >"$work/restart.out" 2>"$work/restart.err" || rc=$?
[ "$rc" = 0 ] || fail "a job that fails once under --max-restarts 2 exited $rc: $(cat "$work/restart.err")"
[ "$(grep -c 'attempt 0 of 2' "$work/restart.out")" = 2 ] || fail "first attempt: $(cat "$work/restart.out")"
[ "$(grep -c 'attempt 1 of 2' "$work/restart.out")" = 2 ] || fail "restart: $(cat "$work/restart.out")"
grep -q 'attempt 2' "$work/restart.out" && fail "restarted after success: $(cat "$work/restart.out")"
grep -q "rank 1 exited with status 7" "$work/restart.err" || fail "failure not named: $(cat "$work/restart.err")"
grep -q "restarting every rank (restart 1 of 2)" "$work/restart.err" || fail "restart not announced"
ok "--max-restarts 2: a rank failing once restarts every rank once, with TORCHELASTIC_RESTART_COUNT"
rc=0
timeout 60 "$launch" --nproc-per-node 2 --grace-seconds 1 --max-restarts 1 -- bash -c \
  'echo "attempt $TORCHELASTIC_RESTART_COUNT"; [ "$RANK" = 0 ] || exit 5' \
  >"$work/restart.out" 2>"$work/restart.err" || rc=$?
[ "$rc" = 5 ] || fail "a job failing every time exited $rc, expected 5"
# Rank 1 fails at once each time (rank 0 may be stopped before it prints).
[ "$(grep -c '\[rank 1\] attempt' "$work/restart.out")" = 2 ] ||
  fail "expected 2 attempts of rank 1: $(cat "$work/restart.out")"
ok "--max-restarts 1: a job failing every time runs twice and exits with the failure's code"

# -- bad command lines ----------------------------------------------------------------------------
expect_error() {
  local flag=$1
  shift
  local rc=0
  timeout 10 "$launch" "$@" >"$work/usage.out" 2>"$work/usage.err" || rc=$?
  [ "$rc" != 0 ] || fail "tp-launch $* succeeded"
  [ "$rc" != 124 ] || fail "tp-launch $* hung"
  grep -qe "$flag" "$work/usage.err" || fail "tp-launch $*: message lacks '$flag': $(cat "$work/usage.err")"
  ok "tp-launch $* fails (exit $rc) naming $flag"
}
expect_error --nproc-per-node --nproc-per-node 0 -- true
expect_error --master-addr --nproc-per-node 2 --nnodes 2 --node-rank 0 --master-port 29500 -- true
expect_error --node-rank --nproc-per-node 2 --nnodes 2 --node-rank 2 --master-addr h --master-port 1 -- true
expect_error --master-port --nproc-per-node 1 --master-port 70000 -- true
expect_error --max-restarts --nproc-per-node 1 --max-restarts -1 -- true
expect_error --max-restarts --nproc-per-node 2 --nnodes 2 --node-rank 0 --master-addr h \
  --master-port 29500 --max-restarts 1 -- true
expect_error --rdzv-endpoint --nproc-per-node 1 --nnodes 1:2 -- true
expect_error 'rdzv-endpoint takes HOST:PORT' --nproc-per-node 1 --nnodes 1:2 --rdzv-endpoint h -- true
expect_error --master-addr --nproc-per-node 1 --rdzv-endpoint 127.0.0.1:1 --master-addr h -- true
expect_error 'MIN <= MAX' --nproc-per-node 1 --nnodes 3:2 --rdzv-endpoint 127.0.0.1:1 -- true
expect_error --nnodes --nproc-per-node 1 --nnodes two --rdzv-endpoint 127.0.0.1:1 -- true
expect_error --bogus --nproc-per-node 1 --bogus -- true
expect_error 'no program' --nproc-per-node 2
expect_error 'no program' --nproc-per-node 2 --
timeout 10 "$launch" --help | grep -q -- '--nproc-per-node' || fail "--help lacks --nproc-per-node"
ok "--help prints usage"

echo "check_tp_launch: $passed passed, 0 failed"
