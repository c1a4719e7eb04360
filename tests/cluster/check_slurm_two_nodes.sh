#!/usr/bin/env bash
# srun -N2 -n4 across two Slurm nodes in two network namespaces (slurm_two_nodes.sh), UCX over
# tcp between them: train_gpt (1F1B, 4 stages) with tp-launch's losses. Rank 0 listens on every
# interface of node tpa, which the ranks of tpb reach by its name. The cluster is stopped by PID
# and the namespaces deleted at the end, also on failure.
# Usage: check_slurm_two_nodes.sh <train_gpt> <tp-launch> <scratch>
set -uo pipefail
gpt=$1 launch=$2 scratch=$3
source "$(dirname "$0")/cluster_lib.sh"
cluster=$scratch/cluster
trap 'bash "$here/slurm_two_nodes.sh" stop "$cluster"' EXIT
rm -rf "$scratch" && mkdir -p "$scratch" || exit 1
bash "$here/slurm_two_nodes.sh" start "$cluster"
status=$?
[ $status -eq 77 ] && exit 77
[ $status -eq 0 ] || fail "the two-node cluster did not start"
source "$cluster/env"
export OPENBLAS_NUM_THREADS=1
small=(--schedule 1F1B --stages 4 --layers 4 --width 32 --heads 2 --context 16 --batch 16
       --microbatches 8 --steps 4 --sample-chars 10 --val-interval 4 --val-batches 1)
timeout 180 "$launch" --nproc-per-node 4 --grace-seconds 2 -- "$gpt" "${small[@]}" \
  --checkpoint-dir "$scratch/ref_ckpt" > "$scratch/ref.out" 2>&1 ||
  { tail -n 20 "$scratch/ref.out"; fail "train_gpt under tp-launch failed"; }
hosts=$(timeout 60 "$cluster/on_node" a srun -N2 -n4 --ntasks-per-node=2 hostname | sort | uniq -c | xargs)
[ "$hosts" = "2 tpa 2 tpb" ] || fail "srun -N2 -n4 did not place two tasks on each node: $hosts"
mkdir -p "$scratch/job"
UCX_TLS=tcp timeout 180 "$cluster/on_node" a srun -N2 -n4 --ntasks-per-node=2 -K \
  "$rank_output" "$scratch/job" "$gpt" "${small[@]}" --checkpoint-dir "$scratch/job/ckpt" \
  > "$scratch/job/srun.out" 2>&1 ||
  { tail -n 5 "$scratch"/job/*.out; fail "srun -N2 -n4 train_gpt across two nodes failed"; }
cat "$scratch"/job/rank*.out > "$scratch/job/all.txt"
gpt_losses "$scratch/ref.out" > "$scratch/ref.txt"
[ -s "$scratch/ref.txt" ] && diff <(gpt_losses "$scratch/job/all.txt") "$scratch/ref.txt" ||
  fail "srun -N2 -n4: the losses differ from tp-launch's"
echo "PASS: srun -N2 -n4 across two Slurm nodes in two namespaces (UCX over tcp): tp-launch's losses ($(wc -l < "$scratch/ref.txt") steps)"
