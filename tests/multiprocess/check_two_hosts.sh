#!/usr/bin/env bash
# Two "hosts": two network namespaces joined by a veth pair, one rank in each, UCX over tcp. The
# seed example trains across them with the losses of its embedded run. Reports itself skipped
# (exit 77, with the reason) where namespaces cannot be made. Usage: check_two_hosts.sh <seed_mlp>
set -uo pipefail
seed=$1
tag=tp$$
ns_a=${tag}a ns_b=${tag}b
addr_a=10.213.$(( $$ % 200 )).1 addr_b=10.213.$(( $$ % 200 )).2
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  ip netns del "$ns_a" 2>/dev/null
  ip netns del "$ns_b" 2>/dev/null
}
trap cleanup EXIT

skip() { echo "SKIPPED: $*"; exit 77; }
command -v ip >/dev/null || skip "the ip command (iproute2) is not installed"
ip netns add "$ns_a" 2>/dev/null || skip "cannot create network namespaces here (needs root)"
ip netns add "$ns_b" || skip "cannot create a second network namespace"
ip link add "${tag}va" type veth peer name "${tag}vb" || skip "cannot create a veth pair"
ip link set "${tag}va" netns "$ns_a" && ip link set "${tag}vb" netns "$ns_b" || exit 1
ip -n "$ns_a" addr add "$addr_a/24" dev "${tag}va" && ip -n "$ns_b" addr add "$addr_b/24" dev "${tag}vb"
for ns in "$ns_a" "$ns_b"; do ip -n "$ns" link set lo up; done
ip -n "$ns_a" link set "${tag}va" up && ip -n "$ns_b" link set "${tag}vb" up || exit 1

embedded=$(timeout 120 "$seed" 50 | grep '^step')
out=$(mktemp -d)
run_rank() {  # rank namespace
  ip netns exec "$2" env RANK="$1" WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 \
    MASTER_ADDR="$addr_a" MASTER_PORT=29613 UCX_TLS=tcp OPENBLAS_NUM_THREADS=1 \
    timeout 120 "$seed" 50 > "$out/rank$1.txt" 2>&1
}
run_rank 0 "$ns_a" & pids+=($!)
run_rank 1 "$ns_b" & pids+=($!)
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
pids=()
echo "rank 0 (host $addr_a):"; tail -3 "$out/rank0.txt"
echo "rank 1 (host $addr_b):"; cat "$out/rank1.txt"
distributed=$(grep '^step' "$out/rank1.txt")
rm -rf "$out"
[ $status -eq 0 ] || { echo "FAIL: a rank failed"; exit 1; }
[ -n "$embedded" ] && [ "$embedded" = "$distributed" ] || { echo "FAIL: losses differ from the embedded run"; exit 1; }
echo "PASS: two namespaces over a veth pair (UCX over tcp) train as one process does"
