#!/usr/bin/env bash
# The seed example under tp-launch (one stage per process) prints the same falling losses as its
# embedded single-process run, and its per-rank message logs read back as one timeline.
# Usage: check_seed_distributed.sh <tp-launch> <seed_mlp> <tp-trace>
set -euo pipefail
launch=$1 seed=$2 trace=$3
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
embedded=$(timeout 120 "$seed" 100 | grep '^step')
distributed=$(timeout 120 "$launch" --nproc-per-node 2 --grace-seconds 2 --log-dir "$logs" -- \
              "$seed" 100 | grep '^\[rank 1\] step' | sed 's/^\[rank 1\] //')
echo "embedded:"; echo "$embedded"
echo "two processes:"; echo "$distributed"
[ -n "$embedded" ] || { echo "FAIL: the embedded run printed no loss"; exit 1; }
[ "$embedded" = "$distributed" ] || { echo "FAIL: the losses differ"; exit 1; }
first=$(echo "$embedded" | head -1 | awk '{print $4}')
last=$(echo "$embedded" | tail -1 | awk '{print $4}')
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }' || { echo "FAIL: the loss did not fall"; exit 1; }
for r in 0 1; do
  [ -s "$logs/messages_rank_$r.log" ] || { echo "FAIL: no message log for rank $r"; exit 1; }
done
timeline=$(timeout 60 "$trace" "$logs" --step 50 --json)
echo "timeline of step 50 from both ranks' logs: $timeline"
echo "$timeline" | grep -qE '"ranks": *2' ||
  { echo "FAIL: the merged timeline does not hold both ranks"; exit 1; }
echo "$timeline" | grep -qE ': *-[0-9]' && { echo "FAIL: a negative figure"; exit 1; }
echo "PASS: the same losses in one process and in two, falling from $first to $last; the two"
echo "ranks' message logs merge into one timeline"
