#!/usr/bin/env bash
# The command-line tools end to end: tp-sim's figures for a known schedule, tp-trace reading
# back the message log of the seed example, and tp-trace merging a directory of per-rank logs
# whose clocks differ.
#   check_tools.sh <tp-sim> <tp-trace> <seed_mlp> <work dir>
set -euo pipefail
sim=$1 trace=$2 seed=$3 work=$4
mkdir -p "$work"
fail() { echo "check_tools: $*" >&2; exit 1; }

out=$("$sim" --schedule 1F1B --ranks 4 --microbatches 8 --json)
grep -q '"makespan":33' <<<"$out" || fail "tp-sim 1F1B p=4 m=8: expected makespan 33, got $out"
# The memory model: 1F1B's rank r holds p - r microbatches (100 bytes each) besides 10 fixed.
out=$("$sim" --schedule 1F1B --ranks 4 --microbatches 8 --memory act=100,stash=100,fixed=10 --json)
grep -q '"peak_bytes":\[410.0,310.0,210.0,110.0\]' <<<"$out" ||
  fail "tp-sim --memory: expected peak bytes [410,310,210,110], got $out"
# Its text gives bytes in KiB, MiB, GiB: 4 microbatches of 1 MiB on rank 0, not 4194304.
out=$("$sim" --schedule 1F1B --ranks 4 --microbatches 8 --memory act=1M,stash=1M)
grep -q "rank 0: .*, peak bytes 4.00 MiB" <<<"$out" && grep -q "rank 3: .*, peak bytes 1.00 MiB" <<<"$out" ||
  fail "tp-sim --memory: expected peak bytes 4.00 MiB and 1.00 MiB, got $out"
# Sent outputs stay with their maker until the next stage's F takes them (tests/schedules).
out=$("$sim" --schedule GPipe --ranks 3 --microbatches 2 --latency 0.5 \
  --memory act=100,stash=100,sent=10 --json)
grep -q '"peak_bytes":\[220.0,220.0,200.0\]' <<<"$out" ||
  fail "tp-sim --memory sent=: expected peak bytes [220,220,200], got $out"
# Recomputation from the memory costs alone (no time share C=): 1F1B's last stage runs each F
# right before its own backward, so it keeps its activations (100, not 120); the others keep 20
# per microbatch and rebuild 100 in their backward.
out=$("$sim" --schedule 1F1B --ranks 4 --microbatches 8 --memory act=100,recompute=20 --recompute --json)
grep -q '"peak_bytes":\[180.0,160.0,140.0,100.0\]' <<<"$out" ||
  fail "tp-sim --memory recompute= --recompute: expected peak bytes [180,160,140,100], got $out"
if "$sim" --schedule dynamic --ranks 2 --microbatches 4 --memory act=100 \
  --max-activation-bytes 50 2>"$work/err.txt"; then fail "tp-sim accepted a cap below one microbatch"; fi
grep -q "below what one microbatch needs at its peak.*raise the cap to at least 100" "$work/err.txt" ||
  fail "unexpected error: $(cat "$work/err.txt")"

SPDLOG_LEVEL=debug "$seed" 2 >/dev/null 2>"$work/run.log"
json=$("$trace" "$work/run.log" --json --trace "$work/step.json" --svg "$work/step.svg")
grep -q '"steps_logged":2' <<<"$json" || fail "tp-trace: expected 2 steps, got $json"
grep -q '"actions":16' <<<"$json" || fail "tp-trace: expected 16 actions, got $json"
grep -q '"peak_activations":\[2,1\]' <<<"$json" || fail "tp-trace: expected peaks [2,1], got $json"
grep -q '"bytes_held_max":\[' <<<"$json" || fail "tp-trace: expected the memory track, got $json"
[ -s "$work/step.json" ] && [ -s "$work/step.svg" ] || fail "tp-trace wrote no trace or SVG"
if "$trace" "$work/run.log" --step 99 2>"$work/err.txt"; then fail "tp-trace --step 99 succeeded"; fi
grep -q "step 99 is not in the log" "$work/err.txt" || fail "unexpected error: $(cat "$work/err.txt")"

# A launched run's log directory: one file per rank, each with its clock line. Rank 1's clock reads
# 5 s behind rank 0's (another host), so only its offset lines the two up: rank 0 runs F0 F1 B0 B1
# in [0, 50) us, rank 1 F0 B0 in [12, 30). rank_0.log, the launcher's copy of the output, is not
# a message log to read even though it holds the same lines.
logs="$work/per_rank_logs"
rm -rf "$logs" && mkdir -p "$logs"
lines() {  # rank, offset_us, then "what start end" triples relative to t=1000 on rank 0's clock
  local head="[12:00:00.000000] [tensorplay] rank=$1" offset=$2
  shift 2
  echo "$head step=0 event=clock what=offset_us:$offset t_us=$((500 - offset))"
  while [ $# -gt 0 ]; do
    echo "$head step=1 event=start what=$1 t_us=$((1000 + $2 - offset))"
    echo "$head step=1 event=finish what=$1 t_us=$((1000 + $3 - offset))"
    shift 3
  done
}
lines 0 0 0F0 0 10 0F1 10 20 0B0 30 40 0B1 40 50 >"$logs/messages_rank_0.log"
lines 1 5000000 1F0 12 22 1B0 22 30 >"$logs/messages_rank_1.log"
cp "$logs/messages_rank_0.log" "$logs/rank_0.log"
json=$("$trace" "$logs" --json) || fail "tp-trace on a log directory failed"
grep -q '"ranks":2' <<<"$json" || fail "tp-trace $logs: expected 2 ranks, got $json"
grep -q '"actions":6' <<<"$json" || fail "tp-trace $logs: expected 6 actions, got $json"
grep -q '"makespan_us":50[.,]' <<<"$json" || fail "tp-trace $logs: clock offsets not applied: $json"
grep -q '"idle_us":\[10.*,32' <<<"$json" || fail "tp-trace $logs: expected idle [10,32], got $json"
if grep -qE '[:,[]-' <<<"$json"; then fail "tp-trace printed a negative figure: $json"; fi
text=$("$trace" "$logs") || fail "tp-trace on a log directory failed"
if grep -qE '(^|[^0-9A-Za-z_])-[0-9]' <<<"$text"; then fail "tp-trace printed a negative figure: $text"; fi
grep -q "rank 1: busy 18 us, idle 32 us" <<<"$text" || fail "tp-trace $logs: unexpected $text"
# The same rank from two files is refused, naming both, rather than read as overlapping actions.
if "$trace" "$logs" "$logs/rank_0.log" >"$work/out.txt" 2>"$work/err.txt"; then
  fail "tp-trace accepted rank 0 twice: $(cat "$work/out.txt")"
fi
grep -q "rank 0 is in both '$logs/messages_rank_0.log' and '$logs/rank_0.log'" "$work/err.txt" ||
  fail "unexpected error: $(cat "$work/err.txt")"
echo "check_tools: ok"
