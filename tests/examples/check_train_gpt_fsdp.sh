#!/usr/bin/env bash
# train_gpt --fsdp --dp 2 --pp 2 under tp-launch (4 processes: each stage sharded over its two
# replicas) trains as the same run without --fsdp: the same losses within float32 rounding,
# gradient clipping included, under 1F1B and under ZBVZeroBubble (split backward); with
# --mixed-precision bf16 (float32 master shards, bfloat16 compute) within 2%; and --fsdp without
# --dp, or with --unsplit, and --mixed-precision without --fsdp, are clear errors.
# Usage: check_train_gpt_fsdp.sh TRAIN_GPT TP_LAUNCH SCRATCH_DIR
set -euo pipefail
train_gpt=$1 tp_launch=$2 scratch=$3
rm -rf "$scratch" && mkdir -p "$scratch"
small=(--layers 4 --width 32 --heads 4 --context 16 --batch 8 --microbatches 4 --val-interval 0
       --val-batches 1 --sample-chars 0 --trace-step 0 --checkpoint-dir "" --steps 4 --quiet
       --clip 0.5 --dp 2 --pp 2)

fail() { echo "FAIL: $*"; exit 1; }

# The largest relative difference between two loss files ("step loss" lines).
compare() {
  paste "$1" "$2" | awk '{ d = $2 - $4; if (d < 0) d = -d; r = d / ($2 > 0 ? $2 : 1);
    if (r > worst) worst = r; n++ } END { if (n < 4) { print "few"; exit } print worst + 0 }'
}

for schedule in 1F1B ZBVZeroBubble; do
  for mode in replicated fsdp; do
    flag=()
    [ "$mode" = fsdp ] && flag=(--fsdp)
    timeout 240 "$tp_launch" --nproc-per-node 4 -- "$train_gpt" "${small[@]}" "${flag[@]}" \
      --schedule "$schedule" --losses-file "$scratch/$schedule.$mode" \
      > "$scratch/$schedule.$mode.out" 2>&1 ||
      { cat "$scratch/$schedule.$mode.out"; fail "$schedule $mode failed"; }
  done
  worst=$(compare "$scratch/$schedule.replicated" "$scratch/$schedule.fsdp")
  [ "$worst" != "few" ] || fail "$schedule: fewer than 4 losses written"
  awk -v w="$worst" 'BEGIN { exit !(w < 1e-5) }' ||
    { paste "$scratch/$schedule.replicated" "$scratch/$schedule.fsdp"
      fail "$schedule: --fsdp losses differ by $worst"; }
  echo "$schedule: --fsdp losses within $worst of the replicated run's"
done

# --mixed-precision bf16: bfloat16 compute on float32 master shards trains within 2% of float32.
timeout 240 "$tp_launch" --nproc-per-node 4 -- "$train_gpt" "${small[@]}" --fsdp \
  --mixed-precision bf16 --schedule 1F1B --losses-file "$scratch/1F1B.bf16" \
  > "$scratch/1F1B.bf16.out" 2>&1 || { cat "$scratch/1F1B.bf16.out"; fail "--mixed-precision bf16 failed"; }
grep -q "parameters 0.05 MiB" "$scratch/1F1B.bf16.out" ||
  { cat "$scratch/1F1B.bf16.out"; fail "--mixed-precision bf16: the masters are not float32 shards"; }
worst=$(compare "$scratch/1F1B.fsdp" "$scratch/1F1B.bf16")
awk -v w="$worst" 'BEGIN { exit !(w < 0.02) }' ||
  { paste "$scratch/1F1B.fsdp" "$scratch/1F1B.bf16"; fail "--mixed-precision bf16 differs by $worst"; }
echo "1F1B: --mixed-precision bf16 losses within $worst of float32's"
if "$train_gpt" --mixed-precision bf16 --steps 1 > "$scratch/mp_alone.out" 2>&1; then
  fail "--mixed-precision without --fsdp ran"; fi
grep -q "it needs --fsdp" "$scratch/mp_alone.out" ||
  { cat "$scratch/mp_alone.out"; fail "--mixed-precision without --fsdp: no clear error"; }

if "$train_gpt" --fsdp --unsplit --steps 1 > "$scratch/unsplit.out" 2>&1; then fail "--fsdp --unsplit ran"; fi
grep -q "does not go with --unsplit" "$scratch/unsplit.out" ||
  { cat "$scratch/unsplit.out"; fail "--fsdp --unsplit: no clear error"; }
if timeout 120 "$tp_launch" --nproc-per-node 2 -- "$train_gpt" --layers 2 --width 32 --heads 4 \
    --context 16 --batch 4 --microbatches 2 --steps 1 --checkpoint-dir "" --quiet --pp 2 \
    --schedule 1F1B --fsdp \
    > "$scratch/no_dp.out" 2>&1; then fail "--fsdp without --dp ran"; fi
grep -q "pass --dp 2 or more" "$scratch/no_dp.out" ||
  { cat "$scratch/no_dp.out"; fail "--fsdp without --dp: no clear error"; }
echo "ok"
