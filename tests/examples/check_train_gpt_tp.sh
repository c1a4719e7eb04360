#!/usr/bin/env bash
# train_gpt --tp 2 under tp-launch (the whole model split by tensor parallelism over 2 processes)
# trains the GPT and the Llama (4 query heads, 2 key-value heads) as --unsplit does: the same
# losses within float32 rounding, gradient clipping included; --export under --tp writes the whole
# model; and --tp with a pipeline in one process, or with the wrong number of processes, is a
# clear error.
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

# --export under --tp writes the whole model: the same tensors as --unsplit's export.
"$train_gpt" "${small[@]}" --export "$scratch/export.unsplit" > "$scratch/export.unsplit.out" 2>&1 ||
  { cat "$scratch/export.unsplit.out"; fail "--unsplit --export failed"; }
timeout 120 "$tp_launch" --nproc-per-node 2 -- "$train_gpt" "${small[@]}" --tp 2 \
  --export "$scratch/export.tp" > "$scratch/export.tp.out" 2>&1 ||
  { cat "$scratch/export.tp.out"; fail "--tp 2 --export failed"; }
python3 - "$scratch/export.unsplit/model.safetensors" "$scratch/export.tp/model.safetensors" <<'PY' ||
import json, struct, sys
def read(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    out = {}
    for name, e in header.items():
        assert e["dtype"] == "F32", e["dtype"]
        a, b = e["data_offsets"]
        raw = data[8 + n + a:8 + n + b]
        out[name] = (e["shape"], struct.unpack("<%df" % (len(raw) // 4), raw))
    return out
x, y = read(sys.argv[1]), read(sys.argv[2])
assert x.keys() == y.keys(), (sorted(x), sorted(y))
for name in x:
    assert x[name][0] == y[name][0], (name, x[name][0], y[name][0])
    worst = max(abs(p - q) for p, q in zip(x[name][1], y[name][1]))
    assert worst < 1e-4, (name, worst)
PY
  fail "--tp 2 --export differs from --unsplit --export"

if "$train_gpt" --tp 2 --steps 1 > "$scratch/no_unsplit.out" 2>&1; then fail "--tp 2 with a pipeline ran in one process"; fi
grep -q "needs pipeline ranks x dp x 2 processes" "$scratch/no_unsplit.out" || { cat "$scratch/no_unsplit.out"; fail "--tp 2 with a pipeline in one process: no clear error"; }
if "$train_gpt" "${small[@]}" --tp 2 > "$scratch/one_process.out" 2>&1; then fail "--tp 2 in one process ran"; fi
grep -q "needs 2 processes" "$scratch/one_process.out" || { cat "$scratch/one_process.out"; fail "--tp 2 in one process: no clear error"; }
echo "ok"
