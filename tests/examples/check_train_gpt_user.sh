#!/usr/bin/env bash
# examples/train_gpt as a new user meets it, on a tiny model: flags checked against each other
# before any work, each error naming the flag passed and exiting 1; resumes that say what they do
# (a stopped run names the command that goes on, a finished run refuses, a fresh run will not
# overwrite checkpoints without --overwrite, a damaged checkpoint points to --resume-from); the
# pipeline line naming its recomputation; --init-from naming the flags it overrode; and tp-trace
# reading train_gpt's step N as --step N, skipping the validations between; metrics.jsonl, an
# event file of the same scalars and loss.svg beside the checkpoints.
# Usage: check_train_gpt_user.sh TRAIN_GPT TP_TRACE SCRATCH_DIR
set -euo pipefail
train_gpt=$1 tp_trace=$2 scratch=$3
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$scratch" && mkdir -p "$scratch"
cd "$scratch"
small=(--layers 2 --width 32 --heads 2 --context 16 --batch 8 --microbatches 2 --stages 2
       --schedule 1F1B --val-batches 1 --sample-chars 0 --quiet)

fail() { echo "FAIL: $*"; exit 1; }

# refused EXPECTED ARGS...: train_gpt exits 1, its error holding EXPECTED (a fixed string).
refused() {
  local expected=$1; shift
  local status=0
  "$train_gpt" "$@" >out.txt 2>&1 || status=$?
  [ "$status" -eq 1 ] || { cat out.txt; fail "train_gpt $*: exit status $status, not 1"; }
  grep -qF -- "$expected" out.txt || { cat out.txt; fail "train_gpt $*: no '$expected'"; }
  if grep -qE '[0-9]{40}' out.txt; then cat out.txt; fail "train_gpt $*: a number of 40 digits"; fi
}

# -- flags ----------------------------------------------------------------------------------------
refused "--steps: expected a whole number of at least 1, got '0'" --steps 0
refused "--dp: expected a positive whole number or auto, got 'two'" --dp two
refused "--stop-after 50 is past --steps 3" "${small[@]}" --stop-after 50 --steps 3
refused "--trace-step 50 is past --steps 3" "${small[@]}" --trace-step 50 --steps 3
refused "--recompute type:Bogus names no module type of this model" "${small[@]}" \
  --recompute type:Bogus --steps 1 --checkpoint-dir ""
refused "--dp 2 runs each replica's ranks in processes of their own" "${small[@]}" --dp 2 \
  --checkpoint-dir ""
refused "--resume continues the run in --checkpoint-dir and --overwrite deletes it" --resume \
  --overwrite
touch a_file
refused "--checkpoint-dir a_file/run: cannot create it" "${small[@]}" --checkpoint-dir a_file/run
TENSORPLAY_NUM_THREADS=abc refused "TENSORPLAY_NUM_THREADS=abc" "${small[@]}" --steps 1 \
  --checkpoint-dir ""
# The default --trace-step (20) past a short run's --steps is no error: nothing was asked.
"$train_gpt" "${small[@]}" --steps 2 --checkpoint-dir "" --recompute full >out.txt 2>&1 ||
  { cat out.txt; fail "a two-step run failed"; }
grep -q "^pipeline: .*, recompute full, " out.txt || { cat out.txt; fail "no recompute policy"; }

# -- resumes --------------------------------------------------------------------------------------
run=("${small[@]}" --checkpoint-interval 2 --checkpoint-dir run)
"$train_gpt" "${run[@]}" --steps 4 --stop-after 2 --prompt "two words" >stop.out 2>&1 ||
  { cat stop.out; fail "the stopped run failed"; }
grep -q "^stopped after step 2 of 4 (--stop-after 2), its checkpoint in run; go on with:" \
  stop.out || { cat stop.out; fail "the stopped run does not say where it stopped"; }
go_on=$(grep -A1 "^stopped after" stop.out | tail -1)
grep -qF -- "--prompt 'two words'" <<<"$go_on" || fail "the command to go on lost a quote: $go_on"
grep -qF -- "--resume" <<<"$go_on" || fail "the command to go on does not resume: $go_on"
if grep -qF -- "--stop-after" <<<"$go_on"; then fail "the command to go on stops again: $go_on"; fi
eval "$go_on" >resumed.out 2>&1 || { cat resumed.out; fail "the printed command failed: $go_on"; }
grep -q "^resumed step 2 written by" resumed.out || { cat resumed.out; fail "it did not resume"; }
cp run/metrics.jsonl stopped_metrics.jsonl

refused "the run in --checkpoint-dir run has finished: its checkpoint is step 4 and --steps is 4" \
  "${run[@]}" --steps 4 --resume
refused "--checkpoint-dir run holds the checkpoints of an earlier run (steps 2 and 4)" "${run[@]}" \
  --steps 4
# --resume-from: an earlier checkpoint; a damaged newest one names it.
"$train_gpt" "${run[@]}" --steps 4 --resume-from 2 >from.out 2>&1 || { cat from.out; fail "--resume-from 2"; }
grep -q "^resumed step 2 written by" from.out || { cat from.out; fail "--resume-from 2 ignored"; }
"$train_gpt" "${run[@]}" --steps 6 --resume >/dev/null 2>&1 ||
  fail "training on to step 6 failed"
for file in run/step_00000006/data_*; do truncate -s 10 "$file"; done
refused "--resume-from 4 resumes from an earlier one" "${run[@]}" --steps 8 --resume
"$train_gpt" "${run[@]}" --steps 2 --overwrite >over.out 2>&1 || { cat over.out; fail "--overwrite failed"; }
grep -q "^--overwrite: deleted the checkpoints of steps 2, 4 and 6 in run" over.out ||
  { cat over.out; fail "--overwrite did not say what it deleted"; }
[ ! -e run/step_00000006 ] || fail "--overwrite left the old step 6"

# -- --init-from says what it overrode ------------------------------------------------------------
"$train_gpt" "${small[@]}" --steps 1 --checkpoint-dir "" --export hf >/dev/null 2>&1 ||
  fail "the export failed"
"$train_gpt" --heads 2 --context 16 --batch 8 --microbatches 2 --stages 2 --schedule 1F1B \
  --val-batches 1 --sample-chars 0 --quiet --steps 1 --checkpoint-dir "" --init-from hf \
  --layers 3 --width 32 >init.out 2>&1 || { cat init.out; fail "--init-from failed"; }
grep -q "^--init-from hf overrides --layers 3 (the folder's: 2)$" init.out ||
  { cat init.out; fail "--init-from did not say what it overrode"; }

# -- tp-trace counts train_gpt's steps ------------------------------------------------------------
"$train_gpt" "${small[@]}" --steps 4 --val-interval 2 --checkpoint-dir "" --log-dir logs \
  >logged.out 2>&1 || { cat logged.out; fail "the logged run failed"; }
json=$("$tp_trace" logs --json) || fail "tp-trace failed"
# Steps 1, 2, a validation, 3, 4 and the last validation: step 4 is the log's fifth.
grep -q '"step":4,"log_step":5,"steps_logged":4,"evaluations_logged":2' <<<"$json" ||
  fail "tp-trace did not default to the last training step: $json"
grep -q '"step":2,"log_step":2' <<<"$("$tp_trace" logs --step 2 --json)" ||
  fail "tp-trace --step 2 is not train_gpt's step 2"
grep -q '"evaluation":1,"log_step":3' <<<"$("$tp_trace" logs --eval 1 --json)" ||
  fail "tp-trace --eval 1 is not the first validation"

# -- metrics: a JSON line of scalars per step, and the loss curve -----------------------------------
# The resumed run above (steps 3 and 4 after a stop at 2, then --overwrite to step 2): its lines.
python3 - run/metrics.jsonl <<'PY' || fail "metrics.jsonl: $(cat run/metrics.jsonl)"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert [l["step"] for l in lines] == [1, 2], lines
for l in lines:
    for key in ("loss", "lr", "tokens_per_second", "bubble", "peak_bytes"):
        assert key in l, (key, l)
    assert set(l["peak_bytes"]) == {"0", "1"}, l
assert "val_loss" in lines[-1] and "val_loss" not in lines[0], lines
PY
grep -q 'class="training"' run/loss.svg && grep -q 'class="validation"' run/loss.svg ||
  fail "loss.svg lacks the training or validation curve"
grep -q "^wrote run/loss.svg" over.out || { cat over.out; fail "no line naming loss.svg"; }
# Without checkpoints the metrics go to --log-dir, and without one nowhere (not the working folder).
[ -s logs/metrics.jsonl ] || fail "no metrics.jsonl in --log-dir"
[ ! -e metrics.jsonl ] && [ ! -e loss.svg ] || fail "a run without checkpoints wrote its metrics here"
# The same scalars in a TensorBoard event file: TFRecord framing with its CRC32Cs, read back here.
python3 "$here/check_train_gpt_events.py" run ||
  fail "the event file does not hold the scalars of metrics.jsonl"
# A resumed run appends: the stopped run's steps and the resumed run's, in order.
python3 -c 'import json,sys; s=[json.loads(l)["step"] for l in open(sys.argv[1])]; assert s == [1, 2, 3, 4], s' \
  stopped_metrics.jsonl || fail "a resumed run did not append its steps: $(cat stopped_metrics.jsonl)"
echo "train_gpt: flags checked, resumes explained, tp-trace counts training steps, metrics drawn"
