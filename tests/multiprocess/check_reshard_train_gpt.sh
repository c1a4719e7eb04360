#!/usr/bin/env bash
# The reshard matrix across processes with examples/train_gpt: 6 steps under layout A, a
# layout-free checkpoint, 6 more under layout B (another process count, stage count, schedule or
# pp x dp shape). The reference runs under B itself (the same processes, stages, schedule,
# microbatches and replicas, so it sums gradients in B's order) from A's step-6 state. B's layout
# trains from step 1 and writes its own step-6 checkpoint; named_checkpoint_transplant sets its
# tensors (parameters, optimizer state, generators) to A's by name. Where A and B sum alike that
# must change nothing, and the reference is B's 12 steps straight (no checkpoint read between).
# Where they do not (dp changes, or where a tied weight's gradient meets the replicas' average),
# parameters and optimizer state differ in the last bits, and the reference resumes the
# transplanted checkpoint under the layout that wrote it (the loader maps nothing across
# layouts). The losses of steps 7-12 and the final parameters must agree within 1e-6 relative;
# they agree bit for bit. (A reference in one process summed a step's gradients in another order
# than two averaged replicas do, and AdamW made that visible: 1e-5 in the losses, 2e-4 in the
# parameters.)
# Usage: check_reshard_train_gpt.sh TP_LAUNCH TRAIN_GPT COMPARE TRANSPLANT SCRATCH PAIR
set -euo pipefail
tp_launch=$1 train_gpt=$2 compare=$3 transplant=$4 scratch=$5 pair=$6
rm -rf "$scratch" && mkdir -p "$scratch"
fail() { echo "FAIL ($pair): $*"; exit 1; }
small=(--layers 4 --width 32 --heads 2 --context 16 --batch 16 --steps 12 --sample-chars 0
       --val-interval 0 --val-batches 1 --clip 0 --checkpoint-interval 6 --trace-step 0)

# run NAME PROCESSES ARGS...: train_gpt embedded (0) or under tp-launch, bounded in time.
run() {
  local name=$1 procs=$2
  shift 2
  if [ "$procs" = 0 ]; then
    timeout -k 5 120 "$train_gpt" "${small[@]}" "$@" > "$scratch/$name.out" 2>&1 ||
      { cat "$scratch/$name.out"; fail "$name failed"; }
  else
    timeout -k 5 120 "$tp_launch" --nproc-per-node "$procs" --grace-seconds 2 -- "$train_gpt" \
      "${small[@]}" "$@" > "$scratch/$name.out" 2>&1 || { cat "$scratch/$name.out"; fail "$name failed"; }
  fi
}

# Per pair: A and B (process count, then flags), and B's layout spelled out for the reference
# (the layout B resolves --pp/--dp auto to), in the words a checkpoint records. same_start: B's
# own first 6 steps reproduce A's state bit for bit.
resume=(--resume) same_start=yes
case "$pair" in
  embedded_to_2_processes)  # 1F1B over 2 stages, with dropout (generators named by module)
    a=(0 --schedule 1F1B --stages 2 --dropout 0.1) b=(2 --schedule 1F1B --stages 2 --dropout 0.1)
    reference=(2 --schedule 1F1B --pp 2 --dp 1 --dropout 0.1) written="pp 2 x dp 1" as="pp 2 x dp 1" ;;
  zbv_4_stages_to_1f1b_2_stages)  # 4 stages ZBV on 2 ranks -> 2 stages 1F1B on 2 ranks
    a=(2 --schedule ZBVZeroBubble --stages 4) b=(2 --schedule 1F1B --stages 2)
    reference=(2 --schedule 1F1B --pp 2 --dp 1) written="pp 2 x dp 1" as="pp 2 x dp 1" ;;
  pp4_to_pp2)  # 1F1B over 4 processes -> 2
    a=(4 --schedule 1F1B --stages 4) b=(2 --schedule 1F1B --pp auto --dp 1)
    reference=(2 --schedule 1F1B --pp 2 --dp 1) written="pp 4 x dp 1" as="pp 2 x dp 1" ;;
  pp2_dp2_to_pp2_dp1)  # a replica lost: 4 processes -> 2, the batch on one replica
    a=(4 --schedule 1F1B --stages 2 --dp 2 --microbatches 4)
    b=(2 --schedule 1F1B --pp 2 --dp auto --microbatches 4)
    reference=(2 --schedule 1F1B --pp 2 --dp 1 --microbatches 4) written="pp 2 x dp 2" as="pp 2 x dp 1"
    same_start=no ;;
  pp2_dp1_to_pp1_dp2)  # the pipeline folded into two replicas of the whole model
    a=(2 --schedule 1F1B --stages 2 --microbatches 4)
    b=(2 --schedule 1F1B --pp 1 --dp auto --microbatches 4)
    reference=(2 --schedule 1F1B --pp 1 --dp 2 --microbatches 4) written="pp 2 x dp 1" as="pp 1 x dp 2"
    same_start=no ;;
  auto_4_to_2_processes)  # --pp auto --dp auto: the largest dp the batch allows, resumed unasked
    a=(4 --schedule 1F1B --pp auto --dp auto --microbatches 8)
    b=(2 --schedule 1F1B --pp auto --dp auto --microbatches 8) resume=()
    reference=(2 --schedule 1F1B --pp 1 --dp 2 --microbatches 8) written="pp 2 x dp 2" as="pp 1 x dp 2"
    same_start=no ;;
  gpipe_to_interleaved)  # GPipe over 2 processes -> Interleaved1F1B, 4 stages on 2 ranks
    a=(2 --schedule GPipe --stages 2) b=(2 --schedule Interleaved1F1B --stages 4)
    reference=(2 --schedule Interleaved1F1B --pp 2 --dp 1) written="pp 2 x dp 1" as="pp 2 x dp 1" ;;
  *) fail "unknown pair" ;;
esac

run a "${a[0]}" "${a[@]:1}" --stop-after 6 --checkpoint-dir "$scratch/run"
ls "$scratch"/run/step_00000006/index_s*.txt > /dev/null || fail "A wrote no index at step 6"
# Every model tensor once over all writers' indexes (the tied embedding and head included).
twice=$(awk '$1 == "e" && $2 == "model" { print $3 }' "$scratch"/run/step_00000006/index_s*.txt |
        sort | uniq -d)
[ -z "$twice" ] || fail "saved by more than one writer: $twice"
grep -q "^e model wte.weight " "$scratch"/run/step_00000006/index_s*.txt || fail "no wte.weight saved"

# The reference's start: B's layout trains the first steps and writes its own step-6 checkpoint,
# set to A's state. Where A and B sum alike (same_start) that changes nothing and B's layout
# trains all 12 steps straight: the reference is then B uninterrupted.
if [ "$same_start" = yes ]; then
  run reference_start "${reference[0]}" "${reference[@]:1}" --checkpoint-dir "$scratch/reference" \
    --losses-file "$scratch/reference_start.losses"
else
  run reference_start "${reference[0]}" "${reference[@]:1}" --stop-after 6 \
    --checkpoint-dir "$scratch/reference"
fi
"$transplant" "$scratch/run" "$scratch/reference" 6 > "$scratch/transplant.out" ||
  { cat "$scratch/transplant.out"; fail "cannot set B's checkpoint to A's state"; }
cat "$scratch/transplant.out"
# The data and dropout generators never depend on the layout (a process's copy of a dropout
# generator it does not draw from must not be saved); the rest only where the sums differ.
! grep -q " rng " "$scratch/transplant.out" || fail "B's own first 6 steps left other generators"
[ "$same_start" = no ] || grep -q "changed: none" "$scratch/transplant.out" ||
  fail "B's own first 6 steps do not reproduce A's state"

run b "${b[0]}" "${b[@]:1}" "${resume[@]}" --checkpoint-dir "$scratch/run" --losses-file "$scratch/b.losses"
grep -q "resumed step 6 written by $written as $as" "$scratch/b.out" ||
  { cat "$scratch/b.out"; fail "no line 'resumed step 6 written by $written as $as'"; }
if [ "$same_start" = yes ]; then
  [ "$(wc -l < "$scratch/reference_start.losses")" = 12 ] || fail "B's layout did not train 12 steps"
  tail -n 6 "$scratch/reference_start.losses" > "$scratch/reference.losses"
else
  run reference "${reference[0]}" "${reference[@]:1}" --resume --checkpoint-dir "$scratch/reference" \
    --losses-file "$scratch/reference.losses"
  grep -q "resumed step 6 written by $as as $as" "$scratch/reference.out" ||
    { cat "$scratch/reference.out"; fail "the reference did not resume B's own checkpoint"; }
fi

[ "$(wc -l < "$scratch/b.losses")" = 6 ] || fail "B did not train steps 7 to 12"
[ "$(wc -l < "$scratch/reference.losses")" = 6 ] || fail "the reference did not train steps 7 to 12"
paste -d' ' "$scratch/b.losses" "$scratch/reference.losses" | awk '
  { d = $2 - $4; if (d < 0) d = -d; m = ($2 < 0 ? -$2 : $2); r = (d == 0 ? 0 : d / m)
    if (r > worst) worst = r
    if ($1 != $3 || !(r <= 1e-6)) {
      printf "step %s: loss %s resharded, %s reference\n", $1, $2, $4; bad = 1 } }
  END { printf "losses of steps 7-12: largest relative difference %.3g\n", worst; exit bad }' ||
  fail "the losses differ"
"$compare" "$scratch/run" "$scratch/reference" 12 1e-6 || fail "the final parameters differ"
echo "reshard $pair: steps 7-12 and the final parameters within 1e-6 of B's own run from A's state"
