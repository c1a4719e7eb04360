#!/usr/bin/env bash
# examples/train_gpt with a Llama on BPE token shards: tp-tokenize writes the shards, a run
# learns from them and exports a Hugging Face folder, and a run started from that folder
# (--init-from) sees the exported weights (the same validation loss); the same under tp-launch in
# two processes, each rank writing its stages' part of the folder, and reading its stages' own
# tensors back. A GPT-2 on BPE pieces of a text file exports and reloads the same ways.
# Usage: check_train_gpt_llama.sh TRAIN_GPT TP_TOKENIZE TP_LAUNCH SCRATCH_DIR
set -euo pipefail
train_gpt=$1 tp_tokenize=$2 tp_launch=$3 scratch=$4
rm -rf "$scratch" && mkdir -p "$scratch"
fail() { echo "FAIL: $*"; exit 1; }
cat /usr/share/common-licenses/GPL-3 /usr/share/common-licenses/Apache-2.0 >"$scratch/text.txt"
"$tp_tokenize" "$scratch/text.txt" --out "$scratch/shards" --tokenizer bpe:400 \
  --shard-tokens 8000 >/dev/null 2>&1 || fail "tp-tokenize failed"

small=(--layers 4 --width 32 --heads 4 --kv-heads 2 --context 16 --batch 8 --microbatches 4
       --stages 4 --schedule ZBVZeroBubble --val-batches 2 --sample-chars 8 --lr 1e-2 --warmup 2)
val_of() { grep "val " "$1" | tail -1 | sed 's/.*val \([0-9.]*\).*/\1/'; }
same_val() { a=$(val_of "$1"); b=$(val_of "$2"); [ -n "$a" ] && [ "$a" = "$b" ]; }
reload() {  # folder, output: one step at a negligible learning rate from the folder
  "$train_gpt" --init-from "$1" --data "$scratch/shards" --context 16 --batch 8 --microbatches 4 \
    --stages 4 --schedule ZBVZeroBubble --val-batches 2 --steps 1 --lr 1e-12 --min-lr 1e-12 \
    --warmup 0 --sample-chars 0 --checkpoint-dir "$2.ckpt" >"$2" 2>&1 || { cat "$2"; fail "reload of $1"; }
}

launched() {  # output, arguments: train_gpt in two processes under tp-launch
  local out=$1; shift
  "$tp_launch" --nproc-per-node 2 --grace-seconds 2 -- "$train_gpt" "$@" >"$out" 2>&1 ||
    { cat "$out"; fail "two processes: train_gpt $*"; }
}

"$train_gpt" "${small[@]}" --model llama --data "$scratch/shards" --steps 6 --val-interval 3 \
  --checkpoint-dir "$scratch/run" --export "$scratch/hf" >"$scratch/run.out" 2>&1 ||
  { cat "$scratch/run.out"; fail "the Llama run failed"; }
grep -q "model: Llama, 4 blocks, width 32, 4 heads (2 key-value)" "$scratch/run.out" || fail "not a Llama"
grep -q "exported the model to" "$scratch/run.out" || fail "no export"
[ -f "$scratch/hf/config.json" ] && [ -f "$scratch/hf/model.safetensors" ] || fail "no folder"
grep -q '"model_type": "llama"' "$scratch/hf/config.json" || fail "not a llama config"
reload "$scratch/hf" "$scratch/reload.out"
same_val "$scratch/run.out" "$scratch/reload.out" ||
  fail "reloaded validation loss $(val_of "$scratch/reload.out") != $(val_of "$scratch/run.out")"

# Stopped after step 3 and resumed, the run reads the same windows: the same step-6 checkpoint.
for phase in "--stop-after 3" "--resume"; do
  # shellcheck disable=SC2086
  "$train_gpt" "${small[@]}" --model llama --data "$scratch/shards" --steps 6 --val-interval 3 \
    --checkpoint-dir "$scratch/stopped" $phase >>"$scratch/stopped.out" 2>&1 ||
    { cat "$scratch/stopped.out"; fail "the stopped or resumed run failed ($phase)"; }
done
grep -q "resumed step 3 written by" "$scratch/stopped.out" || fail "the second run did not resume"
files=("$scratch"/run/step_00000006/*)
[ -e "${files[0]}" ] || fail "no checkpoint at step 6"
for file in "${files[@]}"; do
  cmp -s "$file" "$scratch/stopped/step_00000006/$(basename "$file")" ||
    fail "$(basename "$file") differs after a resume"
done

"$tp_launch" --nproc-per-node 2 --grace-seconds 2 -- "$train_gpt" "${small[@]}" --model llama \
  --data "$scratch/shards" --steps 6 --val-interval 3 --checkpoint-dir "$scratch/launched" \
  --export "$scratch/hf2" >"$scratch/launched.out" 2>&1 ||
  { cat "$scratch/launched.out"; fail "the two-process Llama run failed"; }
[ -f "$scratch/hf2/model.safetensors.index.json" ] || fail "no index of the parts"
reload "$scratch/hf2" "$scratch/reload2.out"
same_val "$scratch/launched.out" "$scratch/reload2.out" ||
  fail "two processes: reloaded $(val_of "$scratch/reload2.out") != $(val_of "$scratch/launched.out")"
launched "$scratch/reload3.out" --init-from "$scratch/hf2" --data "$scratch/shards" --context 16 \
  --batch 8 --microbatches 4 --stages 4 --schedule ZBVZeroBubble --val-batches 2 --steps 1 \
  --lr 1e-12 --min-lr 1e-12 --warmup 0 --sample-chars 0 --checkpoint-dir "$scratch/reload3.ckpt"
grep -q "each stage its own tensors" "$scratch/reload3.out" || fail "not read by stage"
same_val "$scratch/launched.out" "$scratch/reload3.out" ||
  fail "read by stage: $(val_of "$scratch/reload3.out") != $(val_of "$scratch/launched.out")"

"$train_gpt" --layers 2 --width 32 --heads 2 --context 16 --batch 8 --microbatches 2 --stages 2 \
  --schedule 1F1B --tokenizer bpe:400 --data "$scratch/text.txt" --steps 4 --val-batches 1 \
  --sample-chars 8 --checkpoint-dir "$scratch/gpt" --export "$scratch/gpt_hf" >"$scratch/gpt.out" 2>&1 ||
  { cat "$scratch/gpt.out"; fail "the GPT-2 BPE run failed"; }
grep -q '"model_type": "gpt2"' "$scratch/gpt_hf/config.json" || fail "not a gpt2 config"
"$train_gpt" --init-from "$scratch/gpt_hf" --tokenizer "$scratch/gpt/tokenizer.model" \
  --data "$scratch/text.txt" --context 16 --batch 8 --microbatches 2 --stages 2 --schedule 1F1B \
  --steps 1 --lr 1e-12 --min-lr 1e-12 --warmup 0 --val-batches 1 --sample-chars 0 \
  --checkpoint-dir "$scratch/gpt2.ckpt" >"$scratch/gpt_reload.out" 2>&1 ||
  { cat "$scratch/gpt_reload.out"; fail "GPT-2 reload"; }
same_val "$scratch/gpt.out" "$scratch/gpt_reload.out" || fail "GPT-2 reload differs"

# GPT-2 in two processes (the pieces above): each stage writes its shard (Conv1D weights
# transposed); the folder reloads in one process and, each stage its own tensors, in two.
gpt=(--data "$scratch/text.txt" --context 16 --batch 8 --microbatches 2
     --stages 2 --schedule 1F1B --val-batches 1 --sample-chars 0)
launched "$scratch/gpt_l.out" "${gpt[@]}" --tokenizer "$scratch/gpt/tokenizer.model" --model gpt2 \
  --layers 2 --width 32 --heads 2 --steps 4 --checkpoint-dir "$scratch/gpt_l" \
  --export "$scratch/gpt_hf2"
[ -f "$scratch/gpt_hf2/model.safetensors.index.json" ] || fail "GPT-2: no index of the parts"
[ ! -e "$scratch/gpt_hf2/model.safetensors" ] || fail "GPT-2: a whole-model file beside the parts"
grep -q '"model_type": "gpt2"' "$scratch/gpt_hf2/config.json" || fail "GPT-2 parts: not gpt2"
gpt_reload=("${gpt[@]}" --tokenizer "$scratch/gpt/tokenizer.model" --init-from "$scratch/gpt_hf2"
            --steps 1 --lr 1e-12 --min-lr 1e-12 --warmup 0)
"$train_gpt" "${gpt_reload[@]}" --checkpoint-dir "$scratch/gpt_r1.ckpt" >"$scratch/gpt_r1.out" \
  2>&1 || { cat "$scratch/gpt_r1.out"; fail "GPT-2 parts reload in one process"; }
same_val "$scratch/gpt_l.out" "$scratch/gpt_r1.out" ||
  fail "GPT-2 parts: reloaded $(val_of "$scratch/gpt_r1.out") != $(val_of "$scratch/gpt_l.out")"
launched "$scratch/gpt_r2.out" "${gpt_reload[@]}" --checkpoint-dir "$scratch/gpt_r2.ckpt"
grep -q "each stage its own tensors" "$scratch/gpt_r2.out" || fail "GPT-2 not read by stage"
same_val "$scratch/gpt_l.out" "$scratch/gpt_r2.out" ||
  fail "GPT-2 read by stage: $(val_of "$scratch/gpt_r2.out") != $(val_of "$scratch/gpt_l.out")"
echo "train_gpt: Llama on token shards and GPT-2 on BPE pieces, exported and reloaded"
