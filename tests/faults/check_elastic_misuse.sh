#!/usr/bin/env bash
# Elastic rendezvous misuse, each a clear error and no launcher left waiting: two nodes claiming
# the same node rank, a node with a wrong cluster token, fewer than MIN nodes until the timeout.
# Usage: check_elastic_misuse.sh TP_LAUNCH
set -uo pipefail
launch=$1
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$work"/*.err; do echo "== $f"; cat "$f"; done; exit 1; }
export TENSORPLAY_CLUSTER_TOKEN="misuse-$$"
port=$((25000 + RANDOM % 3000))
node() {  # node NAME [flags...]: a launcher of a 2:2 job in the background
  local name=$1
  shift
  timeout -k 2 30 "$launch" --nnodes 2:2 --rdzv-endpoint "127.0.0.1:$port" --rdzv-id misuse \
    --rdzv-timeout 2 --nproc-per-node 1 "$@" -- true 2> "$work/$name.err" &
  pids+=($!)
}
expect() {  # expect PID NAME PATTERN: the launcher fails within the bound, saying PATTERN
  local rc=0
  wait "$1" || rc=$?
  [ "$rc" != 0 ] || fail "$2 succeeded"
  [ "$rc" != 124 ] || fail "$2 hung"
  grep -q -- "$3" "$work/$2.err" || fail "$2: no '$3' in its message"
}

node first --node-rank 0
sleep 0.5
node second --node-rank 0
expect "${pids[1]}" second "claims node rank 0"
# ... and the first, alone, times out below MIN.
expect "${pids[0]}" first "only 1 node joined round 0 within --rdzv-timeout 2 s, at least 2"

port=$((port + 7))
node host --node-rank 0
sleep 0.5
TENSORPLAY_CLUSTER_TOKEN=wrong node intruder --node-rank 1
expect "${pids[3]}" intruder "another cluster token"
grep -q "misuse-$$\|wrong" "$work/intruder.err" && fail "a token was printed"
expect "${pids[2]}" host "only 1 node joined"
echo "elastic misuse: a node rank claimed twice, a wrong token, too few nodes: each a clear error"
