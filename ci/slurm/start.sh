#!/bin/bash
# Start a single-node Slurm cluster (munged, slurmctld, slurmd) on localhost, without systemd.
# Run as root after install.sh. Idempotent: if the cluster is already up with the same
# configuration, it says so and exits 0; if the configuration changed it restarts the daemons.
#
# Usage: bash ci/slurm/start.sh [--burst-buffer] [--keep-state]
#   --burst-buffer  enable burst_buffer/lua (installs burst_buffer.conf/.lua beside slurm.conf);
#                   also enabled when SLURM_EXTRA_CONF contains "burst_buffer/lua".
#                   Root cannot use burst buffers: submit BB jobs as an unprivileged user.
#   --keep-state    keep slurmctld/slurmd state and logs of an earlier run (default: wiped)
# Env: SLURM_EXTRA_CONF  extra slurm.conf lines (inserted before the node/partition lines)
#      SLURM_START_TIMEOUT seconds to wait for the node to become idle (default 60)
#      SLURM_CPUS          CPUs the node offers (default: nproc, at least 4, so the smoke study's
#                          2-rank forecasts with two copy streams each fit). More than the machine
#                          has lets more small jobs run at once (slurmd then trusts the configuration)
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
CONF_DIR=/etc/slurm
RUN_DIR=/run/slurm
STATE_DIR=/var/spool/slurmctld
SPOOL_DIR=/var/spool/slurmd
LOG_DIR=/var/log/slurm
# marks that munged was started by us, so stop.sh leaves a munged it did not start alone
MUNGE_MARK=$RUN_DIR/munged.started-by-start-sh

BB=0
KEEP_STATE=0
for arg in "$@"; do
  case "$arg" in
    --burst-buffer) BB=1 ;;
    --keep-state) KEEP_STATE=1 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "unknown option: $arg" >&2; exit 2 ;;
  esac
done
EXTRA=${SLURM_EXTRA_CONF:-}
case "$EXTRA" in *burst_buffer/lua*) BB=1 ;; esac
if [ "$BB" = 1 ] && ! grep -q 'burst_buffer/lua' <<<"$EXTRA"; then
  EXTRA="${EXTRA:+$EXTRA$'\n'}BurstBufferType=burst_buffer/lua"
fi

if [ "$(id -u)" != 0 ]; then
  echo "start.sh must run as root" >&2; exit 1
fi
for b in slurmctld slurmd munged sinfo; do
  command -v "$b" >/dev/null || { echo "$b not found: run $HERE/install.sh first" >&2; exit 1; }
done

pid_alive() {  # $1 = pid file
  [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null
}

node_state() {
  sinfo -h -N -o %T 2>/dev/null | head -1 || true
}

H=$(hostname -s)
CPUS=${SLURM_CPUS:-$(( $(nproc) > 4 ? $(nproc) : 4 ))}
if ! [[ "$CPUS" =~ ^[1-9][0-9]*$ ]]; then
  echo "SLURM_CPUS must be a positive integer, got '$CPUS'" >&2; exit 2
fi
if [ "$CPUS" -gt "$(nproc)" ]; then
  # slurmd would drain a node that claims more CPUs than it finds, unless told to trust the config
  EXTRA="${EXTRA:+$EXTRA$'\n'}SlurmdParameters=config_overrides"
fi
# 90% of what slurmd sees: RealMemory must not exceed it or the node is drained
MEM=$(( $(slurmd -C | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p') * 9 / 10 ))

NEW_CONF=$(mktemp)
trap 'rm -f "$NEW_CONF"' EXIT
cat > "$NEW_CONF" <<EOF
# written by cycleio ci/slurm/start.sh
ClusterName=localci
SlurmctldHost=${H}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MailProg=/bin/true
MpiDefault=pmi2
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1000
SchedulerType=sched/backfill
ReturnToService=2
StateSaveLocation=${STATE_DIR}
SlurmdSpoolDir=${SPOOL_DIR}
SlurmctldPidFile=${RUN_DIR}/slurmctld.pid
SlurmdPidFile=${RUN_DIR}/slurmd.pid
SlurmctldLogFile=${LOG_DIR}/slurmctld.log
SlurmdLogFile=${LOG_DIR}/slurmd.log
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=300
KillWait=5
Waittime=0
${EXTRA}
NodeName=${H} NodeAddr=127.0.0.1 CPUs=${CPUS} RealMemory=${MEM} State=UNKNOWN
PartitionName=debug Nodes=${H} Default=YES MaxTime=INFINITE State=UP
EOF

bb_files_same() {
  [ "$BB" = 0 ] && return 0
  cmp -s "$HERE/burst_buffer.conf" "$CONF_DIR/burst_buffer.conf" \
    && cmp -s "$HERE/burst_buffer.lua" "$CONF_DIR/burst_buffer.lua"
}

if pid_alive "$RUN_DIR/slurmctld.pid" && pid_alive "$RUN_DIR/slurmd.pid"; then
  state=$(node_state)
  if cmp -s "$NEW_CONF" "$CONF_DIR/slurm.conf" && bb_files_same; then
    case "$state" in
      idle|mixed|allocated|completing)
        echo "slurm already up ($state): $(sinfo -h -o '%P %a %D %T %N')"
        exit 0 ;;
    esac
    echo "slurm daemons running but node is '${state:-unreachable}'; restarting" >&2
  else
    echo "slurm running with a different configuration; restarting" >&2
  fi
fi
# Stop whatever is left of an earlier run (munged is kept: it is stateless and may be shared).
SKIP_MUNGE=1 bash "$HERE/stop.sh"

mkdir -p "$CONF_DIR" "$STATE_DIR" "$SPOOL_DIR" "$LOG_DIR" "$RUN_DIR"
if [ "$KEEP_STATE" = 0 ]; then
  # stale job/node state from an earlier cluster confuses a fresh start; job ids restart at 1, so
  # the burst buffers an earlier cluster staged out (burst_buffer.lua) would be taken for new ones
  rm -rf "${STATE_DIR:?}"/* "${SPOOL_DIR:?}"/* "${LOG_DIR:?}"/* /tmp/bb_stage
fi
cp "$NEW_CONF" "$CONF_DIR/slurm.conf"
chmod 644 "$CONF_DIR/slurm.conf"
if [ "$BB" = 1 ]; then
  install -m 644 "$HERE/burst_buffer.conf" "$CONF_DIR/burst_buffer.conf"
  install -m 644 "$HERE/burst_buffer.lua" "$CONF_DIR/burst_buffer.lua"
fi

# munge: the Debian postinst creates /etc/munge/munge.key; make one if it is missing
if [ ! -s /etc/munge/munge.key ]; then
  mungekey --create --force
  chown munge:munge /etc/munge/munge.key
  chmod 400 /etc/munge/munge.key
fi
mkdir -p /run/munge
chown munge:munge /run/munge
if ! (munge -n | unmunge) >/dev/null 2>&1; then
  runuser -u munge -- /usr/sbin/munged  # daemonizes; pid in /run/munge/munged.pid
  touch "$MUNGE_MARK"
  for _ in $(seq 1 40); do
    (munge -n | unmunge) >/dev/null 2>&1 && break
    sleep 0.25
  done
fi

slurmctld -i  # daemonizes; -i ignores unreadable old state
slurmd        # daemonizes

timeout=${SLURM_START_TIMEOUT:-60}
for _ in $(seq 1 $((timeout * 4))); do
  [ "$(node_state)" = idle ] && break
  sleep 0.25
done
if [ "$(node_state)" != idle ]; then
  echo "slurm node not idle after ${timeout}s" >&2
  sinfo -N -l >&2 || true
  tail -n 30 "$LOG_DIR/slurmctld.log" "$LOG_DIR/slurmd.log" >&2 || true
  exit 1
fi
echo "slurm ready: $(sinfo -h -o '%P %a %D %T %N')${EXTRA:+ (extra: $(tr '\n' ' ' <<<"$EXTRA"))}"
