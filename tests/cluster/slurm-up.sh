#!/usr/bin/env bash
# A one-machine Slurm cluster for the scheduler tests (and for trying `bench run --launcher slurm` on a laptop):
# installs what is missing (Debian's slurm-wlm, munge, Open MPI; as root, apt), writes a slurm.conf with two
# node names, n1 and n2, on this one host (two slurmd, each with its own port), and starts munged, slurmctld
# and both slurmd. Idempotent: a cluster that answers is left as it is. Not root: says why and exits 0, and
# the tests that need the cluster skip with that reason. Stop it with `tests/cluster/slurm-up.sh --down`.
#
# Where it lives: config in /etc/slurm (Debian's default, so srun and sbatch find it without SLURM_CONF),
# state, logs and pid files under /var/lib/bench-slurm. No accounting database: `sacct` answers that
# accounting is disabled, and bench reads a job's end from `scontrol show job` and its batch script's trap.
set -euo pipefail
STATE=/var/lib/bench-slurm
CONF=/etc/slurm/slurm.conf

if [ "$(id -u)" != 0 ]; then
    echo "slurm-up: not root: the one-machine Slurm cluster is not started (the cluster tests skip)"
    exit 0
fi
running() {  # running PIDFILE: the daemon of that pid file is alive (not gone, not a zombie)
    local pid
    pid=$(cat "$1" 2>/dev/null) || return 1
    [ -n "$pid" ] && [ -r "/proc/$pid/stat" ] && [ "$(awk '{print $3}' "/proc/$pid/stat")" != Z ]
}
if [ "${1:-}" = --down ]; then
    for f in "$STATE"/run/*.pid; do [ -e "$f" ] && kill "$(cat "$f")" 2>/dev/null || true; done
    for _ in $(seq 1 50); do
        alive=0; for f in "$STATE"/run/*.pid; do running "$f" && alive=1; done
        [ $alive = 0 ] && exit 0
        sleep 0.2
    done
    echo "slurm-up: the daemons did not stop" >&2; exit 1
fi
if scontrol ping 2>/dev/null | grep -q ' is UP' && sinfo -h -o %T 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then
    echo "slurm-up: the cluster is up: $(sinfo -h -o '%P %D %T %N' | tr '\n' ' ')"
    exit 0
fi
need=()
command -v slurmctld >/dev/null || need+=(slurm-wlm)
command -v munged >/dev/null || need+=(munge)
command -v mpirun >/dev/null || need+=(openmpi-bin)
if [ ${#need[@]} -gt 0 ]; then
    echo "slurm-up: installing ${need[*]}"
    apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >/dev/null
fi

host=$(hostname -s)
cpus=$(nproc)
mkdir -p "$STATE"/run "$STATE"/log "$STATE"/ctld "$STATE"/tmp-n1 "$STATE"/tmp-n2 /etc/slurm /run/munge /var/lib/munge /var/log/munge
cat > "$CONF" <<CONF
# Written by dlbench's tests/cluster/slurm-up.sh: a one-machine cluster, two node names on one host.
ClusterName=bench
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/spool-%n
SlurmctldPidFile=$STATE/run/slurmctld.pid
SlurmdPidFile=$STATE/run/slurmd-%n.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd-%n.log
# each node name its own temporary directory: PMIx (srun --mpi=pmix) makes its step directories there
TmpFS=$STATE/tmp-%n
SlurmctldPort=6817
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MinJobAge=3600
KillWait=5
InactiveLimit=0
SlurmdTimeout=30
NodeName=n1 NodeHostname=$host NodeAddr=127.0.0.1 Port=17001 CPUs=$cpus State=UNKNOWN
NodeName=n2 NodeHostname=$host NodeAddr=127.0.0.1 Port=17002 CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF

if ! pgrep -x munged >/dev/null; then
    chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge 2>/dev/null || true
    [ -s /etc/munge/munge.key ] || mungekey --create 2>/dev/null || /usr/sbin/create-munge-key -f
    runuser -u munge -- /usr/sbin/munged 2>/dev/null || /usr/sbin/munged --force
fi
running "$STATE"/run/slurmctld.pid || slurmctld -c -i
for n in n1 n2; do
    running "$STATE/run/slurmd-$n.pid" || slurmd -N "$n"
done
for _ in $(seq 1 60); do
    if [ "$(sinfo -h -o %T 2>/dev/null | grep -cE '^(idle|mixed|allocated)')" -gt 0 ] && \
       [ "$(sinfo -h -N -o '%N %T' 2>/dev/null | grep -cE ' (idle|mixed|allocated)$')" = 2 ]; then
        echo "slurm-up: the cluster is up: $(sinfo -h -N -o '%N %T' | tr '\n' ' ')"
        exit 0
    fi
    scontrol update nodename=n1,n2 state=resume >/dev/null 2>&1 || true
    sleep 0.5
done
echo "slurm-up: the cluster did not come up in 30 s; logs in $STATE/log:" >&2
tail -n 5 "$STATE"/log/*.log >&2 || true
exit 1
