#!/usr/bin/env bash
# A one-node Slurm cluster on loopback for the cluster tests: munged, slurmctld and slurmd started
# by hand (no systemd) with a config, keys, sockets and state of their own under <dir>, stopped by
# the PIDs they wrote there. Installs nothing: setup (scripts/setup.sh) installs the packages.
# Usage: slurm_cluster.sh start <dir>   (writes <dir>/env, to be sourced: SLURM_CONF and friends;
#                                        exit 77 with the reason where a daemon cannot run here)
#        slurm_cluster.sh stop <dir>    (stops every daemon it started, by PID; idempotent)
set -uo pipefail
action=${1:?usage: slurm_cluster.sh start|stop <dir>} dir=${2:?usage: slurm_cluster.sh start|stop <dir>}

stop() {
  for name in slurmd slurmctld munged; do
    [ -s "$dir/$name.pid" ] || continue
    pid=$(cat "$dir/$name.pid")
    kill "$pid" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null
    rm -f "$dir/$name.pid"
  done
  # Steps of jobs still running when slurmd stopped.
  for pid in $(cat "$dir"/stepd.pids 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
  return 0
}

skip() { echo "SKIPPED: $*"; stop; exit 77; }

if [ "$action" = stop ]; then stop; exit 0; fi
[ "$action" = start ] || { echo "unknown action '$action' (start or stop)"; exit 2; }

for tool in munged mungekey slurmctld slurmd srun sbatch scontrol; do
  command -v "$tool" >/dev/null ||
    skip "$tool is not installed (scripts/setup.sh installs munge, slurmctld, slurmd, slurm-client)"
done
[ "$(id -u)" -eq 0 ] || skip "slurmd must run as root to start jobs as their user"

rm -rf "$dir" && mkdir -p "$dir"/{munge,state,spool,log} || exit 1
chmod 700 "$dir/munge"
dir=$(cd "$dir" && pwd)
# Ports of this cluster's own, from the folder's name (two clusters at once do not share them).
base=$(( 17000 + $(echo -n "$dir" | cksum | cut -d' ' -f1) % 2000 * 2 ))
ctld_port=$base slurmd_port=$((base + 1))
node=$(hostname -s)

mungekey --create --keyfile "$dir/munge/munge.key" >/dev/null 2>&1 ||
  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 2>/dev/null
chmod 600 "$dir/munge/munge.key"
munged --key-file "$dir/munge/munge.key" --socket "$dir/munge/munge.socket" \
  --pid-file "$dir/munged.pid" --log-file "$dir/log/munged.log" --seed-file "$dir/munge/seed" \
  --force 2>"$dir/log/munged.err" || skip "munged does not start: $(cat "$dir/log/munged.err")"

# More CPUs than the machine has (config_overrides): jobs of 4 ranks and two jobs at once fit on a
# 2-core machine; the ranks share its cores.
cpus=16
cat > "$dir/slurm.conf" <<CONF
ClusterName=tptest
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
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
ReturnToService=2
KillWait=2
MinJobAge=10
InactiveLimit=0
SlurmdTimeout=30
SlurmdParameters=config_overrides
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=test Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:8
CONF
export SLURM_CONF=$dir/slurm.conf
slurmctld -i 2>"$dir/log/slurmctld.err" ||
  skip "slurmctld does not start: $(tail -3 "$dir/log/slurmctld.err" "$dir/log/slurmctld.log")"
slurmd 2>"$dir/log/slurmd.err" ||
  skip "slurmd does not start: $(tail -3 "$dir/log/slurmd.err" "$dir/log/slurmd.log")"
for _ in $(seq 150); do
  sinfo -h -o %t 2>/dev/null | grep -qE '^(idle|mix|alloc)' && break
  sleep 0.2
done
sinfo -h -o %t 2>/dev/null | grep -qE '^(idle|mix|alloc)' ||
  skip "the node did not become idle in 30 s: $(sinfo 2>&1 | tail -2); $(tail -3 "$dir/log/slurmd.log")"
echo "export SLURM_CONF=$dir/slurm.conf" > "$dir/env"
echo "slurm cluster up: node $node, slurmctld on 127.0.0.1:$ctld_port, state in $dir"
