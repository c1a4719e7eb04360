#!/usr/bin/env bash
# train_gpt --tp 2 under tp-launch (the whole model split by tensor parallelism over 2 processes)
# trains the GPT and the Llama (4 query heads, 2 key-value heads) as --unsplit does: the same
# losses within float32 rounding, gradient clipping included; and --tp without --unsplit, or with
# the wrong number of processes, is a clear error.
# Usage: check_train_gpt_tp.sh TRAIN_GPT TP_LAUNCH SCRATCH_DIR
set -euo pipefail
train_gpt=$1 tp_launch=$2 scratch=$3
rm -rf "$scratch" && mkdir -p "$scratch"
small=(--layers 2 --width 32 --heads 4 --context 16 --batch 4 --val-interval 0 --val-batches 1
       --sample-chars 0 --trace-step 0 --checkpoint-dir "" --steps 4 --quiet --unsplit --clip 0.5)

fail() { echo "FAIL: $*"; exit 1; }

# The largest relative difference between two loss files ("step loss" lines).
compare() {
  paste "$1" "$2" | awk '{ d = $2 - $4; if (d < 0) d = -d; r = d / ($2 > 0 ? $2 : 1);
    if (r > worst) worst = r; n++ } END { if (n < 4) { print "few"; exit } print worst + 0 }'
}

for model in "--model gpt2" "--model llama --kv-heads 2 --mlp-width 64"; do
  name=$(echo "$model" | cut -d' ' -f2)
  # shellcheck disable=SC2086
  "$train_gpt" "${small[@]}" $model --losses-file "$scratch/$name.unsplit" \
    > "$scratch/$name.unsplit.out" 2>&1 || { cat "$scratch/$name.unsplit.out"; fail "$name --unsplit failed"; }
  # shellcheck disable=SC2086
  timeout 120 "$tp_launch" --nproc-per-node 2 -- "$train_gpt" "${small[@]}" $model --tp 2 \
    --losses-file "$scratch/$name.tp" > "$scratch/$name.tp.out" 2>&1 ||
    { cat "$scratch/$name.tp.out"; fail "$name --tp 2 failed"; }
  worst=$(compare "$scratch/$name.unsplit" "$scratch/$name.tp")
  [ "$worst" != "few" ] || fail "$name: fewer than 4 losses written"
  awk -v w="$worst" 'BEGIN { exit !(w < 1e-5) }' ||
    { paste "$scratch/$name.unsplit" "$scratch/$name.tp"; fail "$name: --tp 2 losses differ by $worst"; }
done

if "$train_gpt" --tp 2 --steps 1 > "$scratch/no_unsplit.out" 2>&1; then fail "--tp without --unsplit ran"; fi
grep -q "add --unsplit" "$scratch/no_unsplit.out" || { cat "$scratch/no_unsplit.out"; fail "--tp without --unsplit: no clear error"; }
if "$train_gpt" "${small[@]}" --tp 2 > "$scratch/one_process.out" 2>&1; then fail "--tp 2 in one process ran"; fi
grep -q "needs 2 processes" "$scratch/one_process.out" || { cat "$scratch/one_process.out"; fail "--tp 2 in one process: no clear error"; }
echo "ok"
