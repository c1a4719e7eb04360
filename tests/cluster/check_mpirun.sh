#!/usr/bin/env bash
# The examples under mpirun (Open MPI's or MPICH's, called by their own names: both install
# `mpirun` as an alternative) read MPI's variables and train with tp-launch's losses: seed_mlp on 2
# ranks, train_gpt on 4; kill -9 of a rank ends the job within 10 s, naming it.
# Usage: check_mpirun.sh openmpi|mpich <seed_mlp> <train_gpt> <tp-launch> <scratch>
set -uo pipefail
flavor=$1 seed=$2 gpt=$3 launch=$4 scratch=$5
source "$(dirname "$0")/cluster_lib.sh"
case $flavor in
  openmpi) mpirun=(mpirun.openmpi --oversubscribe --bind-to none)
           [ "$(id -u)" -eq 0 ] && mpirun+=(--allow-run-as-root) ;;
  mpich) mpirun=(mpirun.mpich) ;;
  *) fail "unknown MPI '$flavor' (openmpi or mpich)" ;;
esac
command -v "${mpirun[0]}" >/dev/null ||
  skip "${mpirun[0]} is not installed (scripts/setup.sh installs openmpi-bin and mpich)"
rm -rf "$scratch" && mkdir -p "$scratch" || exit 1
export OPENBLAS_NUM_THREADS=1
small=(--schedule 1F1B --stages 4 --layers 4 --width 32 --heads 2 --context 16 --batch 16 --microbatches 8 --steps 4
       --sample-chars 10 --val-interval 4 --val-batches 1)

# Run <name> <ranks> <command...>: under mpirun, each rank's output in $scratch/<name>/.
run() {
  local name=$1 ranks=$2
  shift 2
  mkdir -p "$scratch/$name"
  timeout 180 "${mpirun[@]}" -np "$ranks" "$rank_output" "$scratch/$name" "$@" \
    > "$scratch/$name/mpirun.out" 2>&1
}

# seed_mlp: 2 ranks, rank 1 prints the losses.
timeout 120 "$launch" --nproc-per-node 2 --grace-seconds 2 -- "$seed" 30 > "$scratch/seed_ref.out" 2>&1 ||
  { cat "$scratch/seed_ref.out"; fail "seed_mlp under tp-launch failed"; }
sed -n 's/^\[rank 1\] //p' "$scratch/seed_ref.out" | grep '^step' > "$scratch/seed_ref.txt"
run seed 2 "$seed" 30 || { tail -n 5 "$scratch"/seed/*.out; fail "seed_mlp under $flavor's mpirun failed"; }
grep -q "(one process each)\|2 processes\|across" "$scratch/seed/rank1.out" || true
[ -s "$scratch/seed_ref.txt" ] && diff <(seed_losses "$scratch/seed/rank1.out") "$scratch/seed_ref.txt" ||
  fail "seed_mlp: the losses under mpirun differ from tp-launch's (or rank 1 printed none)"
echo "ok: seed_mlp on 2 ranks under $flavor's mpirun: tp-launch's losses"

# train_gpt: 4 ranks, the last prints the losses.
timeout 180 "$launch" --nproc-per-node 4 --grace-seconds 2 -- "$gpt" "${small[@]}" \
  --checkpoint-dir "$scratch/gpt_ref_ckpt" > "$scratch/gpt_ref.out" 2>&1 || { tail -n 20 "$scratch/gpt_ref.out"; fail "train_gpt under tp-launch failed"; }
run gpt 4 "$gpt" "${small[@]}" --checkpoint-dir "$scratch/gpt_ckpt" || { tail -n 5 "$scratch"/gpt/*.out; fail "train_gpt under $flavor's mpirun failed"; }
gpt_losses "$scratch/gpt_ref.out" > "$scratch/gpt_ref.txt"
cat "$scratch"/gpt/rank*.out > "$scratch/gpt/all.txt"
[ -s "$scratch/gpt_ref.txt" ] && diff <(gpt_losses "$scratch/gpt/all.txt") "$scratch/gpt_ref.txt" ||
  fail "train_gpt: the losses of 4 ranks under mpirun differ from tp-launch's"
echo "ok: train_gpt on 4 ranks under $flavor's mpirun: tp-launch's losses ($(wc -l < "$scratch/gpt_ref.txt") steps)"

# kill -9 of rank 1 of 2 while they train.
mkdir -p "$scratch/kill"
"${mpirun[@]}" -np 2 "$rank_output" "$scratch/kill" "$seed" 1000000 > "$scratch/kill/mpirun.out" 2>&1 &
kill_rank_check "$scratch/kill" $! 1 2 "$flavor's mpirun"
echo "PASS: $flavor's mpirun: seed_mlp and train_gpt with tp-launch's losses; kill -9 handled"
