#!/usr/bin/env bash
# The seed example under tp-launch (one stage per process) prints the same falling losses as its
# embedded single-process run. Usage: check_seed_distributed.sh <tp-launch> <seed_mlp>
set -euo pipefail
launch=$1 seed=$2
embedded=$(timeout 120 "$seed" 100 | grep '^step')
distributed=$(timeout 120 "$launch" --nproc-per-node 2 --grace-seconds 2 -- "$seed" 100 |
              grep '^\[rank 1\] step' | sed 's/^\[rank 1\] //')
echo "embedded:"; echo "$embedded"
echo "two processes:"; echo "$distributed"
[ -n "$embedded" ] || { echo "FAIL: the embedded run printed no loss"; exit 1; }
[ "$embedded" = "$distributed" ] || { echo "FAIL: the losses differ"; exit 1; }
first=$(echo "$embedded" | head -1 | awk '{print $4}')
last=$(echo "$embedded" | tail -1 | awk '{print $4}')
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }' || { echo "FAIL: the loss did not fall"; exit 1; }
echo "PASS: the same losses in one process and in two, falling from $first to $last"
