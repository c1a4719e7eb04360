#!/usr/bin/env bash
# The command-line tools end to end: tp-sim's figures for a known schedule, and tp-trace reading
# back the message log of the seed example.
#   check_tools.sh <tp-sim> <tp-trace> <seed_mlp> <work dir>
set -euo pipefail
sim=$1 trace=$2 seed=$3 work=$4
mkdir -p "$work"
fail() { echo "check_tools: $*" >&2; exit 1; }

out=$("$sim" --schedule 1F1B --ranks 4 --microbatches 8 --json)
grep -q '"makespan":33' <<<"$out" || fail "tp-sim 1F1B p=4 m=8: expected makespan 33, got $out"

SPDLOG_LEVEL=debug "$seed" 2 >/dev/null 2>"$work/run.log"
json=$("$trace" "$work/run.log" --json --trace "$work/step.json" --svg "$work/step.svg")
grep -q '"steps_logged":2' <<<"$json" || fail "tp-trace: expected 2 steps, got $json"
grep -q '"actions":16' <<<"$json" || fail "tp-trace: expected 16 actions, got $json"
grep -q '"peak_activations":\[2,1\]' <<<"$json" || fail "tp-trace: expected peaks [2,1], got $json"
[ -s "$work/step.json" ] && [ -s "$work/step.svg" ] || fail "tp-trace wrote no trace or SVG"
if "$trace" "$work/run.log" --step 99 2>"$work/err.txt"; then fail "tp-trace --step 99 succeeded"; fi
grep -q "step 99 is not in the log" "$work/err.txt" || fail "unexpected error: $(cat "$work/err.txt")"
echo "check_tools: ok"
