#!/usr/bin/env bash
# train_gpt's TensorBoard event files read back by the tensorboard package's own event reader, to
# the scalars of its metrics.jsonl. Uses the Python of the test virtual environment
# ($TENSORPLAY_TORCH_VENV, else DEFAULT_VENV, made by scripts/make_torch_venv.sh); without one,
# or without tensorboard in it, exits 77 (skipped), saying why.
# Usage: check_train_gpt_tensorboard.sh TRAIN_GPT DEFAULT_VENV SCRATCH_DIR
set -euo pipefail
train_gpt=$1 venv=${TENSORPLAY_TORCH_VENV:-$2} scratch=$3
python=$venv/bin/python
if [ ! -x "$python" ] || ! "$python" -c 'import tensorboard' 2>/dev/null; then
  echo "no tensorboard package in $venv (run scripts/make_torch_venv.sh, or set" \
       "TENSORPLAY_TORCH_VENV): the event files' check against tensorboard skipped"
  exit 77
fi
rm -rf "$scratch" && mkdir -p "$scratch"
"$train_gpt" --layers 2 --width 32 --heads 2 --context 16 --batch 8 --microbatches 2 --stages 2 \
  --schedule 1F1B --val-batches 1 --sample-chars 0 --quiet --steps 4 --val-interval 2 \
  --checkpoint-dir "$scratch/run" >"$scratch/run.out" 2>&1 || { cat "$scratch/run.out"; exit 1; }
exec "$python" "$(dirname "$0")/check_train_gpt_events.py" "$scratch/run" --require-tensorboard
