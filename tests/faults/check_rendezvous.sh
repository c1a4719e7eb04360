#!/usr/bin/env bash
# Rendezvous that ends: ranks started by hand on loopback (MASTER_ADDR=127.0.0.1, a free port),
# each a rendezvous_rank process. Passes when every rank's rendezvous ended as the case expects,
# with the expected words, within the time bound.
# Usage: check_rendezvous.sh RENDEZVOUS_RANK CASE [TP_LAUNCH]
#   missing       4 ranks, rank 2 never started, TENSORPLAY_RDZV_TIMEOUT=2: each of the others fails
#                 within about 2 s naming rank 2.
#   no-rank0      rank 1 of 2 alone, TENSORPLAY_RDZV_TIMEOUT=2: fails within about 2 s naming rank 0.
#   world-size    ranks 0 and 1 of 3 join; then a rank with WORLD_SIZE=4: every rank fails at once
#                 (TENSORPLAY_RDZV_TIMEOUT=30) with the reason.
#   token         the same with a rank holding another TENSORPLAY_CLUSTER_TOKEN.
#   out-of-range  the same with RANK=5 WORLD_SIZE=6.
#   duplicate     the same with a second RANK=1.
#   bad-timeout   TENSORPLAY_RDZV_TIMEOUT=soon: an error naming the variable and an example, at once.
#   launcher      node 0 of a 2-node tp-launch job with --rdzv-timeout 2, node 1 never started:
#                 the ranks fail within about 2 s naming ranks 2 and 3, and tp-launch with them.
set -uo pipefail
program=$1 case=$2 launch=${3:-}
work=$(mktemp -d)
pids=()
cleanup() {
  # Every rank started here is ended and reaped, whatever happened.
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
# A port nobody listens on (below the ephemeral range, like tp-launch's own choice).
for _ in $(seq 50); do
  port=$(( 21000 + RANDOM % 8000 ))
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || break
done
export MASTER_ADDR=127.0.0.1 MASTER_PORT=$port UCX_VFS_ENABLE=n UCX_MEM_EVENTS=no
export TENSORPLAY_CLUSTER_TOKEN="rendezvous-check-$$"
unset TP_LOG_DIR TENSORPLAY_LOG_DIR

# start NAME [VAR=VALUE ...]: one rank in the background (its own hard limit of 40 s).
start() {
  local name=$1
  shift
  env "$@" timeout -k 2 40 "$program" >"$work/$name" 2>&1 &
  pids+=($!)
}

status=0
fail() {
  echo "FAIL: $*"
  status=1
}

# expect NAME MAX_MS WORD...: rank NAME failed within MAX_MS of its start, naming every WORD.
expect() {
  local name=$1 max_ms=$2
  shift 2
  local line
  line=$(grep "rendezvous rank" "$work/$name")
  echo "$name: $line"
  [[ "$line" == *"failed after"* ]] || { fail "$name did not fail its rendezvous"; return; }
  local ms=${line#*failed after }
  ms=${ms%% ms*}
  ((ms <= max_ms)) || fail "$name took $ms ms (at most $max_ms expected)"
  for word in "$@"; do
    [[ "$line" == *"$word"* ]] || fail "$name's error does not say '$word'"
  done
}

wait_all() {
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null; done
}

case $case in
  missing)
    export TENSORPLAY_RDZV_TIMEOUT=2
    for r in 0 1 3; do start "rank$r" RANK=$r WORLD_SIZE=4; done
    wait_all
    for r in 0 1 3; do
      expect "rank$r" 3500 "rank(s) [2] of 4 did not join" "timeout of 2000 ms" "TENSORPLAY_RDZV_TIMEOUT"
    done
    ;;
  no-rank0)
    export TENSORPLAY_RDZV_TIMEOUT=2
    start rank1 RANK=1 WORLD_SIZE=2
    wait_all
    expect rank1 3500 "could not reach rank 0 at 127.0.0.1:$port" "timeout of 2000 ms"
    ;;
  world-size | token | out-of-range | duplicate)
    export TENSORPLAY_RDZV_TIMEOUT=30
    start rank0 RANK=0 WORLD_SIZE=3
    start rank1 RANK=1 WORLD_SIZE=3
    sleep 1  # ranks 0 and 1 have joined and wait for rank 2
    case $case in
      world-size)
        start bad RANK=2 WORLD_SIZE=4
        why="started with WORLD_SIZE=4, rank 0 with WORLD_SIZE=3"
        ;;
      token)
        start bad RANK=2 WORLD_SIZE=3 TENSORPLAY_CLUSTER_TOKEN=another-job
        why="a different cluster token (TENSORPLAY_CLUSTER_TOKEN)"
        ;;
      out-of-range)
        start bad RANK=5 WORLD_SIZE=6
        why="RANK=5 is out of range for rank 0's 3 ranks"
        ;;
      duplicate)
        start bad RANK=1 WORLD_SIZE=3
        why="rank 1 joined already"
        ;;
    esac
    wait_all
    # The refused rank gets the reason; the ranks that joined hear of it at once (well before
    # the 30 s timeout) and name who did not join.
    expect bad 5000 "rank 0 refused rank" "$why"
    for r in 0 1; do
      expect "rank$r" 6000 "the rendezvous ended: rank 0 refused rank" "$why" "did not join"
    done
    ;;
  launcher)
    timeout -k 2 40 "$launch" --nnodes 2 --node-rank 0 --nproc-per-node 2 --grace-seconds 2 \
      --master-addr 127.0.0.1 --master-port "$port" --rdzv-timeout 2 -- "$program" \
      >"$work/out" 2>&1 &
    pids+=($!)
    wait_all
    cat "$work/out"
    # The first rank to fail makes tp-launch stop the other: one report is enough.
    reported=0
    for r in 0 1; do
      grep "^\[rank $r\] rendezvous rank" "$work/out" >"$work/rank$r" || continue
      reported=$((reported + 1))
      expect "rank$r" 3500 "rank(s) [2, 3] of 4 did not join (joined: [0, 1])" \
        "timeout of 2000 ms"
    done
    ((reported > 0)) || fail "no rank reported the end of its rendezvous"
    grep -q "tp-launch: rank [01] exited with status 1" "$work/out" ||
      fail "tp-launch did not name the rank that failed"
    ;;
  bad-timeout)
    start rank0 RANK=0 WORLD_SIZE=2 TENSORPLAY_RDZV_TIMEOUT=soon
    wait_all
    expect rank0 2000 "TENSORPLAY_RDZV_TIMEOUT=soon: expected a number" "e.g. TENSORPLAY_RDZV_TIMEOUT=900"
    ;;
  *)
    echo "unknown case $case"
    exit 2
    ;;
esac
exit $status
