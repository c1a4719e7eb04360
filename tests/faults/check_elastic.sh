#!/usr/bin/env bash
# Elastic training across two "nodes" (two tp-launch launchers, 2 ranks each; in two network
# namespaces joined by a veth pair with `netns`, on loopback with `loopback`): train_gpt --pp 2
# --dp auto, a checkpoint every 5 steps. Node B's launcher and ranks are killed once step 12 is
# printed and kept down: node A goes on as pp 2 x dp 1 from the newest checkpoint (step 10, or
# 15 when the kill lands late: steps take milliseconds) within 30 s of the kill. Node B starts
# again: its joining ends A's round and the job returns to pp 2 x dp 2 from A's newest
# checkpoint. Every step's loss equals a reference run that switched layouts at the same steps
# (one launcher per segment), and no process is left behind.
# Usage: check_elastic.sh TP_LAUNCH TRAIN_GPT loopback|netns
set -uo pipefail
launch=$1 train_gpt=$2 mode=$3
work=$(mktemp -d)
tag="elastic-$$-$RANDOM"
ns_a="tpa$$" ns_b="tpb$$"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do
    for child in $(pgrep -P "$pid" 2>/dev/null); do kill -KILL "$child" 2>/dev/null; done
    kill -KILL "$pid" 2>/dev/null
  done
  if [ "$mode" = netns ]; then ip netns del "$ns_a" 2>/dev/null; ip netns del "$ns_b" 2>/dev/null; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$work"/*.out; do echo "== $f"; cat "$f"; done; exit 1; }
export TENSORPLAY_CLUSTER_TOKEN="elastic-$tag" OPENBLAS_NUM_THREADS=1
small=(--schedule 1F1B --layers 4 --width 32 --heads 2 --context 16 --batch 16 --microbatches 4
       --steps 40 --checkpoint-interval 5 --sample-chars 0 --val-interval 0 --val-batches 1
       --trace-step 0 --clip 0)
port=$((22000 + RANDOM % 3000))
addr_a=127.0.0.1
run_a=() run_b=()
if [ "$mode" = netns ]; then
  if ! ip netns add "$ns_a" 2>/dev/null || ! ip netns add "$ns_b" 2>/dev/null ||
     ! ip link add "va$$" netns "$ns_a" type veth peer name "vb$$" netns "$ns_b" 2>/dev/null; then
    echo "SKIP: cannot make network namespaces here (needs root and ip netns)"; exit 77
  fi
  ip -n "$ns_a" addr add 10.77.0.1/24 dev "va$$" && ip -n "$ns_b" addr add 10.77.0.2/24 dev "vb$$"
  for ns in "$ns_a" "$ns_b"; do ip -n "$ns" link set lo up; done
  ip -n "$ns_a" link set "va$$" up && ip -n "$ns_b" link set "vb$$" up
  addr_a=10.77.0.1 run_a=(ip netns exec "$ns_a") run_b=(ip netns exec "$ns_b")
fi
elastic=(--nnodes 1:2 --rdzv-endpoint "$addr_a:$port" --rdzv-id "$tag" --nproc-per-node 2
         --rdzv-timeout 5 --max-restarts 4 --grace-seconds 2)

# start_node NAME NODE_RANK: a launcher in the background, its pid in pids and $last_pid.
start_node() {
  local runner=("${run_a[@]}")
  [ "$1" != a ] && runner=("${run_b[@]}")
  "${runner[@]}" timeout -k 5 240 "$launch" "${elastic[@]}" --node-rank "$2" -- "$train_gpt" \
    "${small[@]}" --pp 2 --dp auto --checkpoint-dir "$work/run" --losses-file "$work/losses" \
    >> "$work/$1.out" 2>&1 &
  last_pid=$!
  pids+=("$last_pid")
}
wait_for() {  # wait_for PATTERN FILES...: up to 120 s
  local pattern=$1; shift
  for _ in $(seq 6000); do grep -q -- "$pattern" "$@" 2>/dev/null && return 0; sleep 0.02; done
  return 1
}

start_node a 0
pid_a=$last_pid
start_node b 1
pid_b=$last_pid
wait_for "step   12/40" "$work/a.out" "$work/b.out" || fail "step 12 never came"
for child in $(pgrep -P "$pid_b"); do kill -KILL "$child"; done
kill -KILL "$pid_b"
killed_at=$(date +%s)
wait_for "resumed step 1[05] written by pp 2 x dp 2 as pp 2 x dp 1" "$work/a.out" ||
  fail "node A did not go on as pp 2 x dp 1 from step 10 (or 15)"
[ $(( $(date +%s) - killed_at )) -le 30 ] || fail "node A took more than 30 s to go on"
wait_for "step   2[0-9]/40" "$work/a.out" || fail "node A alone did not train on"
start_node b 1  # node B comes back: the next round has both nodes again
wait_for "written by pp 2 x dp 1 as pp 2 x dp 2" "$work/a.out" "$work/b.out" ||
  fail "the job did not return to pp 2 x dp 2"
wait "$pid_a" || fail "node A's launcher failed"
wait "$last_pid" || fail "node B's launcher failed"
sleep 0.3
for pid in "${pids[@]}"; do pgrep -P "$pid" > /dev/null && fail "ranks of launcher $pid are left"; done

# The reference: one launcher per segment, switching layouts at the steps the elastic run did.
lost=$(grep -ho "resumed step [0-9]* written by pp 2 x dp 2 as pp 2 x dp 1" "$work/a.out" |
       head -1 | awk '{print $3}')
back=$(grep -ho "resumed step [0-9]* written by pp 2 x dp 1 as pp 2 x dp 2" "$work/a.out" \
       "$work/b.out" | tail -1 | awk '{print $3}')
segment() {  # segment PROCESSES STOP_AFTER
  local stop=(); [ "$2" != 0 ] && stop=(--stop-after "$2")
  timeout -k 5 120 "$launch" --nproc-per-node "$1" --grace-seconds 2 -- "$train_gpt" "${small[@]}" \
    --pp 2 --dp auto --checkpoint-dir "$work/reference" --losses-file "$work/reference.losses" \
    "${stop[@]}" >> "$work/reference.out" 2>&1 || fail "a reference segment failed"
}
segment 4 "$lost"
segment 2 "$back"
segment 4 0
for step in $(seq 1 40); do
  got=$(awk -v s="$step" '$1 == s { v = $2 } END { print v }' "$work/losses")
  want=$(awk -v s="$step" '$1 == s { v = $2 } END { print v }' "$work/reference.losses")
  [ -n "$want" ] && [ "$got" = "$want" ] || fail "step $step: loss '$got' elastic, '$want' reference"
done
echo "elastic ($mode): node B lost at step 12, A on as pp 2 x dp 1 from step $lost, back to pp 2 x dp 2 at step $back, every loss as the reference"
