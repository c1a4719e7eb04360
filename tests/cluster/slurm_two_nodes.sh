#!/usr/bin/env bash
# Two Slurm nodes on one machine: two network namespaces joined by a veth pair (as
# tests/multiprocess/check_two_hosts.sh makes them), each with its own host name and /etc/hosts
# (UTS and mount namespaces), slurmctld and slurmd "tpa" in the first, slurmd "tpb" in the second,
# munged shared. Stopped by PID, the namespaces deleted.
# Usage: slurm_two_nodes.sh start <dir>   (writes <dir>/env: `on_node a|b CMD...` runs CMD there;
#                                          exit 77 with the reason where this cannot run)
#        slurm_two_nodes.sh stop <dir>
set -uo pipefail
action=${1:?usage: slurm_two_nodes.sh start|stop <dir>} dir=${2:?usage: slurm_two_nodes.sh start|stop <dir>}

stop() {
  for name in slurmd_tpb slurmd_tpa slurmctld munged; do
    [ -s "$dir/$name.pid" ] || continue
    pid=$(cat "$dir/$name.pid")
    kill "$pid" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null
    rm -f "$dir/$name.pid"
  done
  [ -s "$dir/netns" ] && for ns in $(cat "$dir/netns"); do ip netns del "$ns" 2>/dev/null; done
  rm -f "$dir/netns"
  return 0
}
skip() { echo "SKIPPED: $*"; stop; exit 77; }
if [ "$action" = stop ]; then stop; exit 0; fi

for tool in munged slurmctld slurmd srun ip unshare nsenter; do
  command -v "$tool" >/dev/null || skip "$tool is not installed"
done
[ "$(id -u)" -eq 0 ] || skip "needs root (network namespaces, slurmd)"
rm -rf "$dir" && mkdir -p "$dir"/{munge,state,spool/tpa,spool/tpb,log,cgroup} || exit 1
chmod 700 "$dir/munge"
dir=$(cd "$dir" && pwd)
tag=tps$(( $(echo -n "$dir" | cksum | cut -d' ' -f1) % 10000 ))
net=10.214.$(( $(echo -n "$dir" | cksum | cut -d' ' -f1) % 200 ))
ns_a=${tag}a ns_b=${tag}b
ip netns add "$ns_a" 2>/dev/null || skip "cannot create network namespaces here"
echo "$ns_a" > "$dir/netns"
ip netns add "$ns_b" || skip "cannot create a second network namespace"
echo "$ns_a $ns_b" > "$dir/netns"
ip link add "${tag}va" type veth peer name "${tag}vb" || skip "cannot create a veth pair"
ip link set "${tag}va" netns "$ns_a" && ip link set "${tag}vb" netns "$ns_b" || exit 1
ip -n "$ns_a" addr add "$net.1/24" dev "${tag}va" && ip -n "$ns_b" addr add "$net.2/24" dev "${tag}vb"
for ns in "$ns_a" "$ns_b"; do ip -n "$ns" link set lo up; done
ip -n "$ns_a" link set "${tag}va" up && ip -n "$ns_b" link set "${tag}vb" up || exit 1
printf '127.0.0.1 localhost\n%s tpa\n%s tpb\n' "$net.1" "$net.2" > "$dir/hosts"

# on_node a|b CMD...: CMD in that node's network namespace, with its host name and /etc/hosts.
cat > "$dir/on_node" <<SCRIPT
#!/usr/bin/env bash
node=\$1; shift
ns=$tag\$node
# The namespace's own /sys (UCX finds its network devices there) with the cgroup file system that
# slurmd looks for.
exec nsenter --net=/run/netns/"\$ns" unshare --uts --mount bash -c \
  'hostname "tp\$0" && mount --bind "$dir/hosts" /etc/hosts &&
   mount --rbind /sys/fs/cgroup "$dir/cgroup" && mount -t sysfs none /sys &&
   mount --rbind "$dir/cgroup" /sys/fs/cgroup && exec "\$@"' "\$node" "\$@"
SCRIPT
chmod +x "$dir/on_node"

mungekey --create --keyfile "$dir/munge/munge.key" >/dev/null 2>&1 ||
  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 2>/dev/null
chmod 600 "$dir/munge/munge.key"
munged --key-file "$dir/munge/munge.key" --socket "$dir/munge/munge.socket" \
  --pid-file "$dir/munged.pid" --log-file "$dir/log/munged.log" --seed-file "$dir/munge/seed" \
  --force 2>"$dir/log/munged.err" || skip "munged does not start: $(cat "$dir/log/munged.err")"
cat > "$dir/slurm.conf" <<CONF
ClusterName=tptwo
SlurmctldHost=tpa($net.1)
SlurmctldPort=6817
SlurmdPort=6818
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd_%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd_%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=2
MinJobAge=10
NodeName=tpa NodeAddr=$net.1 CPUs=8 State=UNKNOWN
NodeName=tpb NodeAddr=$net.2 CPUs=8 State=UNKNOWN
PartitionName=two Nodes=tpa,tpb Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:8
CONF
export SLURM_CONF=$dir/slurm.conf
"$dir/on_node" a slurmctld -i 2>"$dir/log/slurmctld.err" ||
  skip "slurmctld does not start: $(tail -3 "$dir/log/slurmctld.err" "$dir/log/slurmctld.log")"
for n in a b; do
  "$dir/on_node" $n slurmd -N tp$n 2>"$dir/log/slurmd_tp$n.err" ||
    skip "slurmd tp$n does not start: $(tail -3 "$dir/log/slurmd_tp$n.err")"
done
for _ in $(seq 150); do
  [ "$("$dir/on_node" a sinfo -h -N -o %t 2>/dev/null | grep -cE '^(idle|mix|alloc)')" = 2 ] && break
  sleep 0.2
done
[ "$("$dir/on_node" a sinfo -h -N -o %t 2>/dev/null | grep -cE '^(idle|mix|alloc)')" = 2 ] ||
  skip "the two nodes did not become idle in 30 s: $("$dir/on_node" a sinfo -N 2>&1 | tail -3)"
echo "export SLURM_CONF=$dir/slurm.conf" > "$dir/env"
echo "two slurm nodes up: tpa ($net.1) and tpb ($net.2), state in $dir"
