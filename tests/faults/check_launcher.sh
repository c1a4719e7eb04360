#!/usr/bin/env bash
# tp-launch under the faults a launcher meets itself, on loopback:
#   parent-death  tp-launch killed with SIGKILL: every rank (one that has exec'd another program
#                 included) dies with it within 5 s.
#   sighup        SIGHUP to tp-launch: ranks that ignore SIGHUP (as UCX's debug handler does) still
#                 stop at once (SIGTERM), tp-launch exits 129 saying so. With IDLE_RANK (a program
#                 that joins the process group and waits), the same for real ranks, with no UCX
#                 debug output.
#   long-lines    a 200,000-byte line: pieces of 64 KiB, each further one marked "[rank R+] ",
#                 joined back to the line, and the line whole in --log-dir's file.
# Usage: check_launcher.sh TP_LAUNCH parent-death|sighup|long-lines [IDLE_RANK]
set -uo pipefail
launch=$1 mode=$2 idle_rank=${3:-}
work=$(mktemp -d "${TMPDIR:-/tmp}/check_launcher.XXXXXX")
launcher=

# A pid is "running" unless gone or a zombie (a container's init may not reap orphans).
is_running() {
  [ -n "$1" ] && [ -r "/proc/$1/status" ] || return 1
  ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status"
}
# Never leave a process behind, even when a check fails half way.
cleanup() {
  local pid_file
  if is_running "$launcher"; then kill -KILL "$launcher" 2>/dev/null; wait "$launcher" 2>/dev/null; fi
  for pid_file in "$work"/*.pid; do
    [ -e "$pid_file" ] || continue
    is_running "$(cat "$pid_file")" && kill -KILL "$(cat "$pid_file")" 2>/dev/null
  done
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "check_launcher $mode: FAILED: $*"
  for f in "$work"/out "$work"/err; do [ -s "$f" ] && head -c 4000 "$f" | cut -c1-200; done
  exit 1
}
now_ms() { date +%s%3N; }
# Waits (at most 10 s) until every rank has written its pid and exec'd `sleep`.
wait_for_sleeping_ranks() {
  local rank pid
  for rank in 0 1; do
    for _ in $(seq 100); do
      pid=$(cat "$work/rank_$rank.pid" 2>/dev/null)
      [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = sleep ] && break
      sleep 0.1
    done
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = sleep ] || fail "rank $rank did not start within 10 s"
  done
}
# Waits (at most 10 s) for the launcher to exit; sets rc and elapsed (ms since `start`).
wait_for_launcher() {
  for _ in $(seq 100); do is_running "$launcher" || break; sleep 0.1; done
  is_running "$launcher" && fail "tp-launch still running 10 s after the signal"
  rc=0
  wait "$launcher" || rc=$?
  elapsed=$(($(now_ms) - start))
}
# Fails unless every rank's process has ended within 5 s.
expect_ranks_gone() {
  local pid_file
  for pid_file in "$work"/rank_*.pid; do
    for _ in $(seq 50); do is_running "$(cat "$pid_file")" || break; sleep 0.1; done
    is_running "$(cat "$pid_file")" && fail "$(basename "$pid_file" .pid) still running $1"
  done
}

case $mode in
parent-death)
  # Before: each rank ran on in its own process group, for ever (here 60 s).
  "$launch" --nproc-per-node 2 -- bash -c \
    'echo $$ >"'"$work"'/rank_$RANK.pid"; exec sleep 60' >"$work/out" 2>"$work/err" &
  launcher=$!
  wait_for_sleeping_ranks
  start=$(now_ms)
  kill -KILL "$launcher"
  wait "$launcher" 2>/dev/null
  expect_ranks_gone "5 s after tp-launch was killed with SIGKILL"
  echo "check_launcher parent-death: ok: both ranks (exec'd into sleep) died with tp-launch" \
       "within $(($(now_ms) - start)) ms"
  ;;
sighup)
  # Before: the ranks got SIGHUP, ignored it, and were killed after --grace-seconds (5 s).
  "$launch" --nproc-per-node 2 --grace-seconds 5 -- bash -c \
    'trap "" HUP; echo $$ >"'"$work"'/rank_$RANK.pid"; exec sleep 60' >"$work/out" 2>"$work/err" &
  launcher=$!
  wait_for_sleeping_ranks
  start=$(now_ms)
  kill -HUP "$launcher"
  wait_for_launcher
  [ "$rc" = 129 ] || fail "tp-launch exited $rc after SIGHUP, expected 129 (128 + SIGHUP)"
  [ "$elapsed" -lt 2500 ] || fail "ranks ignoring SIGHUP were stopped only after $elapsed ms"
  grep -q 'tp-launch: received SIGHUP; sent SIGTERM to every rank and stopped them' "$work/err" ||
    fail "no message saying what tp-launch did"
  expect_ranks_gone "after SIGHUP"
  echo "check_launcher sighup: ok: ranks ignoring SIGHUP stopped in $elapsed ms, exit 129"
  if [ -n "$idle_rank" ]; then
    rm -f "$work"/*.pid
    "$launch" --nproc-per-node 2 --grace-seconds 5 -- "$idle_rank" >"$work/out" 2>"$work/err" &
    launcher=$!
    for _ in $(seq 300); do
      [ "$(grep -c 'ready' "$work/out")" = 2 ] && break
      is_running "$launcher" || break
      sleep 0.1
    done
    [ "$(grep -c 'ready' "$work/out")" = 2 ] || fail "the idle ranks did not join within 30 s"
    grep -o 'pid [0-9]*' "$work/out" | while read -r _ pid; do echo "$pid" >"$work/rank_$pid.pid"; done
    start=$(now_ms)
    kill -HUP "$launcher"
    wait_for_launcher
    [ "$rc" = 129 ] || fail "tp-launch exited $rc after SIGHUP to real ranks, expected 129"
    [ "$elapsed" -lt 2500 ] || fail "real ranks were stopped only after $elapsed ms"
    grep -qi 'ucx' "$work/out" "$work/err" && fail "UCX printed debug output after SIGHUP"
    expect_ranks_gone "after SIGHUP"
    echo "check_launcher sighup: ok: ranks with UCX stopped in $elapsed ms, no UCX output"
  fi
  ;;
long-lines)
  # Before: the pieces all read "[rank 0] ...", nothing said that they continue a line.
  timeout -k 5 30 "$launch" --nproc-per-node 1 --log-dir "$work/logs" -- bash -c \
    'head -c 200000 /dev/zero | tr "\0" a; echo; echo next' >"$work/out" 2>"$work/err" ||
    fail "tp-launch exited $?"
  line=$(head -c 200000 /dev/zero | tr '\0' a)
  [ "$(wc -l <"$work/out")" = 5 ] || fail "expected 4 pieces and 1 line, got $(wc -l <"$work/out") lines"
  [ "$(grep -c '^\[rank 0\] a' "$work/out")" = 1 ] || fail "the first piece is not '[rank 0] '"
  [ "$(grep -c '^\[rank 0+\] a' "$work/out")" = 3 ] || fail "3 pieces are not marked '[rank 0+] '"
  [ "$(head -1 "$work/out" | wc -c)" = $((9 + 65536 + 1)) ] || fail "the first piece is not 64 KiB"
  tail -1 "$work/out" | grep -qx '\[rank 0\] next' || fail "the next line is not a fresh one"
  joined=$(head -4 "$work/out" | sed -e 's/^\[rank 0\] //' -e 's/^\[rank 0+\] //' | tr -d '\n')
  [ "$joined" = "$line" ] || fail "the pieces do not join back to the line"
  [ "$(head -1 "$work/logs/rank_0.log")" = "$line" ] || fail "the log file does not hold the line whole"
  echo "check_launcher long-lines: ok: 4 pieces, 3 marked '[rank 0+] ', joined back; whole in the log"
  ;;
*)
  echo "usage: check_launcher.sh TP_LAUNCH parent-death|sighup|long-lines [IDLE_RANK]" >&2
  exit 2
  ;;
esac
