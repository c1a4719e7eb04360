#!/usr/bin/env bash
# The examples under a one-node Slurm cluster (slurm_cluster.sh): srun -n2 (seed_mlp) and srun -n4
# (train_gpt) with tp-launch's losses; an sbatch script as docs/launching.md writes it; a program
# run in a batch script outside srun (a group of one, or an error at once with several tasks);
# kill -9 of a rank; two jobs at once; a rank of another job refused by name.
# Usage: check_slurm.sh <seed_mlp> <train_gpt> <tp-launch> <cluster dir> <scratch> [part...]
set -uo pipefail
seed=$1 gpt=$2 launch=$3 cluster=$4 scratch=$5
shift 5
parts=${*:-train batch kill together refused}
source "$(dirname "$0")/cluster_lib.sh"
[ -s "$cluster/env" ] || skip "no Slurm cluster is running (its setup, slurm_cluster.sh, skipped or failed)"
source "$cluster/env"
rm -rf "$scratch" && mkdir -p "$scratch" || exit 1
export OPENBLAS_NUM_THREADS=1
small=(--schedule 1F1B --stages 4 --layers 4 --width 32 --heads 2 --context 16 --batch 16 --microbatches 8 --steps 4
       --sample-chars 10 --val-interval 4 --val-batches 1)

seed_reference() {
  timeout 120 "$launch" --nproc-per-node 2 --grace-seconds 2 -- "$seed" 30 > "$scratch/seed_ref.out" 2>&1 ||
    { cat "$scratch/seed_ref.out"; fail "seed_mlp under tp-launch failed"; }
  sed -n 's/^\[rank 1\] //p' "$scratch/seed_ref.out" | grep '^step' > "$scratch/seed_ref.txt"
  [ -s "$scratch/seed_ref.txt" ] || fail "seed_mlp under tp-launch printed no loss"
}

# srun -n<ranks> of a command, each rank's output in $scratch/<name>/.
srun_job() {
  local name=$1 ranks=$2
  shift 2
  mkdir -p "$scratch/$name"
  timeout 180 srun -n "$ranks" -K "$rank_output" "$scratch/$name" "$@" > "$scratch/$name/srun.out" 2>&1
}

same_seed_losses() {  # <rank 1's output> <what>
  diff <(seed_losses "$1") "$scratch/seed_ref.txt" > /dev/null ||
    fail "$2: the losses differ from tp-launch's (or rank 1 printed none): $(tail -n 3 "$1")"
}

seed_reference

if [[ " $parts " == *" train "* ]]; then
  srun_job seed 2 "$seed" 30 || { tail -n 5 "$scratch"/seed/*.out; fail "srun -n2 seed_mlp failed"; }
  same_seed_losses "$scratch/seed/rank1.out" "srun -n2 seed_mlp"
  # No token: rank 0 alone says once how to set one.
  [ "$(cat "$scratch"/seed/rank*.out | grep -c 'export TENSORPLAY_CLUSTER_TOKEN=')" = 1 ] &&
    grep -q 'export TENSORPLAY_CLUSTER_TOKEN=' "$scratch/seed/rank0.out" ||
    fail "srun -n2 without a token: rank 0 did not say once how to set one"
  echo "ok: srun -n2 seed_mlp: tp-launch's losses; without a token rank 0 said once how to set one"
  timeout 180 "$launch" --nproc-per-node 4 --grace-seconds 2 -- "$gpt" "${small[@]}" \
    --checkpoint-dir "$scratch/gpt_ref_ckpt" > "$scratch/gpt_ref.out" 2>&1 || { tail -n 20 "$scratch/gpt_ref.out"; fail "train_gpt under tp-launch failed"; }
  gpt_losses "$scratch/gpt_ref.out" > "$scratch/gpt_ref.txt"
  srun_job gpt 4 "$gpt" "${small[@]}" --checkpoint-dir "$scratch/gpt_ckpt" || { tail -n 5 "$scratch"/gpt/*.out; fail "srun -n4 train_gpt failed"; }
  cat "$scratch"/gpt/rank*.out > "$scratch/gpt/all.txt"
  [ -s "$scratch/gpt_ref.txt" ] && diff <(gpt_losses "$scratch/gpt/all.txt") "$scratch/gpt_ref.txt" ||
    fail "srun -n4 train_gpt: the losses differ from tp-launch's"
  echo "ok: srun -n4 train_gpt: tp-launch's losses ($(wc -l < "$scratch/gpt_ref.txt") steps)"
fi

if [[ " $parts " == *" batch "* ]]; then
  # The template of docs/launching.md: a token per job, the message logs, srun for the ranks.
  mkdir -p "$scratch/batch/logs"
  cat > "$scratch/batch/job.sh" <<SCRIPT
#!/bin/bash
#SBATCH --ntasks=2
#SBATCH --output=$scratch/batch/slurm.out
export TENSORPLAY_CLUSTER_TOKEN=\$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
export TENSORPLAY_LOG_DIR=$scratch/batch/logs
# Outside srun the script's shell is no task of the job: an error at once, not a wait.
start=\$SECONDS
"$seed" 30 > $scratch/batch/direct.out 2>&1 && echo "direct: succeeded" || echo "direct: failed after \$((SECONDS - start)) s"
srun --kill-on-bad-exit=1 "$rank_output" $scratch/batch "$seed" 30
SCRIPT
  timeout 180 sbatch --wait "$scratch/batch/job.sh" > /dev/null 2>&1 ||
    { cat "$scratch/batch/slurm.out" "$scratch"/batch/*.out; fail "the sbatch script failed"; }
  same_seed_losses "$scratch/batch/rank1.out" "sbatch --ntasks=2 with srun"
  [ -s "$scratch/batch/logs/messages_rank_1.log" ] || fail "sbatch: no message log in TENSORPLAY_LOG_DIR"
  grep -q "cluster token" "$scratch/batch/rank0.out" && fail "sbatch: rank 0 warned of a token that is set"
  grep -qE "direct: failed after [01] s" "$scratch/batch/slurm.out" &&
    grep -q "start it with srun" "$scratch/batch/direct.out" ||
    fail "a program run in an sbatch -n2 script outside srun did not fail at once saying to use srun: $(cat "$scratch/batch/slurm.out" "$scratch/batch/direct.out")"
  echo "ok: sbatch --ntasks=2 script with srun: tp-launch's losses, message logs; outside srun: $(head -c 160 "$scratch/batch/direct.out")..."
  # One task and no srun: a group of one, which trains alone.
  timeout 120 sbatch --wait --ntasks=1 --output="$scratch/batch/alone.out" \
    --wrap="$seed 30" > /dev/null 2>&1 || { cat "$scratch/batch/alone.out"; fail "sbatch -n1 without srun failed"; }
  diff <(seed_losses "$scratch/batch/alone.out") <(timeout 60 "$seed" 30 | grep '^step') > /dev/null ||
    fail "sbatch -n1 without srun did not train as one process"
  echo "ok: sbatch --ntasks=1 without srun: a group of one"
fi

if [[ " $parts " == *" kill "* ]]; then
  mkdir -p "$scratch/kill"
  srun -n 2 "$rank_output" "$scratch/kill" "$seed" 1000000 > "$scratch/kill/srun.out" 2>&1 &
  kill_rank_check "$scratch/kill" $! 1 2 "srun -n2"
fi

if [[ " $parts " == *" together "* ]]; then
  # Two jobs at once on one node, without MASTER_PORT or token: each its own port and rendezvous.
  for job in a b; do srun_job "together_$job" 2 "$seed" 30 & done
  status=0
  for p in $(jobs -p); do wait "$p" || status=1; done
  for job in a b; do
    [ $status -eq 0 ] || { tail -n 5 "$scratch"/together_$job/*.out; fail "two jobs at once: one failed"; }
    same_seed_losses "$scratch/together_$job/rank1.out" "job $job of two at once"
  done
  echo "ok: two srun -n2 jobs started together on one node both train with tp-launch's losses"
fi

if [[ " $parts " == *" refused "* ]]; then
  # Two jobs told one MASTER_PORT: the second's rank 1 reaches the first's rank 0 (whose rank 1
  # comes late) and is refused, naming both jobs; the first job trains on.
  port=$((23000 + $$ % 4000))
  mkdir -p "$scratch/first" "$scratch/second"
  MASTER_PORT=$port timeout 120 srun -n 2 "$rank_output" "$scratch/first" bash -c \
    '[ "$SLURM_PROCID" = 1 ] && sleep 5; exec "$0" "$@"' "$seed" 30 > "$scratch/first/srun.out" 2>&1 &
  first=$!
  # Rank 0 warns of the missing token as it starts its rendezvous, then listens.
  wait_for_line "$scratch/first/rank0.out" 'cluster token' 30; sleep 1
  MASTER_PORT=$port timeout 60 srun -n 2 "$rank_output" "$scratch/second" "$seed" 30 \
    > "$scratch/second/srun.out" 2>&1 && fail "a job sharing another's MASTER_PORT succeeded"
  wait "$first" || { tail -n 5 "$scratch"/first/*.out; fail "the first job failed when a second one met it"; }
  same_seed_losses "$scratch/first/rank1.out" "the first job of two on one port"
  grep -hE "rank 0 of job slurm-[0-9]+\.[0-9]+ refused rank 1 .* of job slurm-[0-9]+\.[0-9]+" \
    "$scratch/second/rank1.out" > "$scratch/second/named.txt" ||
    fail "the second job's rank 1 was not refused naming both jobs: $(tail -n 3 "$scratch"/second/*.out)"
  grep -hE "rank 0 could not listen on .*:$port; rank 0 of job slurm-[0-9]+\.[0-9]+ listens there" \
    "$scratch/second/rank0.out" >> "$scratch/second/named.txt" ||
    fail "the second job's rank 0 did not name the job on its port: $(tail -n 3 "$scratch/second/rank0.out")"
  echo "ok: a rank of another job is refused by name, and a port another job holds is named:"
  cut -c1-300 "$scratch/second/named.txt"
fi
echo "PASS: Slurm ($parts)"
