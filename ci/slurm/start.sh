#!/bin/bash
# Start a Slurm cluster (munged, slurmctld, slurmd) on localhost, without systemd: one node named
# after this host, or with --nodes N the nodes n1..nN, each a slurmd in its own UTS and mount
# namespace (its own hostname, its own tmpfs /tmp and /dev/shm), all on 127.0.0.1.
# Run as root after install.sh. Idempotent: if the cluster is already up with the same
# configuration, it says so and exits 0; if the configuration changed it restarts the daemons.
#
# Usage: bash ci/slurm/start.sh [--burst-buffer] [--keep-state] [--nodes N]
#   --burst-buffer  enable burst_buffer/lua (installs burst_buffer.conf/.lua beside slurm.conf);
#                   also enabled when SLURM_EXTRA_CONF contains "burst_buffer/lua".
#                   Root cannot use burst buffers: submit BB jobs as an unprivileged user.
#   --keep-state    keep slurmctld/slurmd state and logs of an earlier run (default: wiped)
#   --nodes N       N nodes n1..nN (partition debug); adds "127.0.0.1 n1 .. nN" to /etc/hosts
#                   (stop.sh removes it). A node sees the host's mounts as they were at its start.
# Env: SLURM_EXTRA_CONF  extra slurm.conf lines (inserted before the node/partition lines)
#      SLURM_START_TIMEOUT seconds to wait for the node to become idle (default 60)
#      SLURM_CPUS          CPUs the node offers (default: nproc, at least 4, so the smoke study's
#                          2-rank forecasts with two copy streams each fit; with --nodes, nproc per
#                          node). More than the machine has lets more small jobs run at once
#                          (slurmd then trusts the configuration)
#      SLURM_NODE_TMPFS    size of each node's /tmp and of its /dev/shm with --nodes (default 2g)
#      SLURM_NODE_SHARED   with --nodes: folders under /tmp or /dev/shm (':'-separated) that every node
#                          sees as the host does, as a cluster's shared file system (a checkout and its
#                          venv made under /tmp); everything else there is the node's own
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
CONF_DIR=/etc/slurm
RUN_DIR=/run/slurm
STATE_DIR=/var/spool/slurmctld
SPOOL_DIR=/var/spool/slurmd
LOG_DIR=/var/log/slurm
# marks that munged was started by us, so stop.sh leaves a munged it did not start alone
MUNGE_MARK=$RUN_DIR/munged.started-by-start-sh

# the line --nodes adds to /etc/hosts ends with this mark; stop.sh removes it
HOSTS_MARK="# cycleio ci/slurm/start.sh --nodes"
FIRST_PORT=6931  # with --nodes, node i's slurmd listens on FIRST_PORT + i - 1

BB=0
KEEP_STATE=0
NODES=
while [ $# -gt 0 ]; do
  case "$1" in
    --burst-buffer) BB=1 ;;
    --keep-state) KEEP_STATE=1 ;;
    --nodes) [ $# -ge 2 ] || { echo "--nodes needs a number" >&2; exit 2; }; NODES=$2; shift ;;
    --nodes=*) NODES=${1#--nodes=} ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "unknown option: $1" >&2; exit 2 ;;
  esac
  shift
done
if [ -n "$NODES" ] && ! [[ "$NODES" =~ ^[1-9][0-9]*$ ]]; then
  echo "--nodes must be a positive integer, got '$NODES'" >&2; exit 2
fi
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
if [ -n "$NODES" ]; then
  command -v unshare >/dev/null || { echo "unshare not found (util-linux): --nodes needs it" >&2; exit 1; }
fi

pid_alive() {  # $1 = pid file
  [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null
}

node_state() {
  if [ -z "$NODES" ]; then
    sinfo -h -N -o %T 2>/dev/null | head -1 || true
    return
  fi
  # several nodes: the state all of them are in, else the first node that differs, as name:state
  local states
  states=$(sinfo -h -N -o '%N:%T' 2>/dev/null || true)
  if [ "$(grep -c . <<<"$states")" = "$NODES" ] && [ "$(cut -d: -f2 <<<"$states" | sort -u | wc -l)" = 1 ]; then
    cut -d: -f2 <<<"$states" | head -1
  else
    grep -v ':idle$' <<<"$states" | head -1 || true
  fi
}

H=$(hostname -s)
if [ -z "$NODES" ]; then
  CPUS=${SLURM_CPUS:-$(( $(nproc) > 4 ? $(nproc) : 4 ))}
else
  CPUS=${SLURM_CPUS:-$(nproc)}
fi
if ! [[ "$CPUS" =~ ^[1-9][0-9]*$ ]]; then
  echo "SLURM_CPUS must be a positive integer, got '$CPUS'" >&2; exit 2
fi
if [ "$(( CPUS * ${NODES:-1} ))" -gt "$(nproc)" ]; then
  # slurmd would drain a node that claims more CPUs than it finds, unless told to trust the config
  EXTRA="${EXTRA:+$EXTRA$'\n'}SlurmdParameters=config_overrides"
fi
# 90% of what slurmd sees: RealMemory must not exceed it or the node is drained
MEM=$(( $(slurmd -C | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p') * 9 / 10 ))

# One node or several: the node and partition lines, and the slurmd paths, per node with several
# (%n: the node's name), all outside /tmp and /dev/shm, which are each node's own.
NODE_NAMES=()
if [ -z "$NODES" ]; then
  SLURMD_SPOOL=${SPOOL_DIR}
  SLURMD_PID=${RUN_DIR}/slurmd.pid
  SLURMD_LOG=${LOG_DIR}/slurmd.log
  NODE_LINES="NodeName=${H} NodeAddr=127.0.0.1 CPUs=${CPUS} RealMemory=${MEM} State=UNKNOWN"
  PARTITION_NODES=${H}
else
  SLURMD_SPOOL=${SPOOL_DIR}/%n
  SLURMD_PID=${RUN_DIR}/slurmd-%n.pid
  SLURMD_LOG=${LOG_DIR}/slurmd-%n.log
  NODE_LINES=
  for i in $(seq 1 "$NODES"); do
    NODE_NAMES+=("n$i")
    line="NodeName=n$i NodeHostname=n$i NodeAddr=127.0.0.1 Port=$(( FIRST_PORT + i - 1 ))"
    line+=" CPUs=${CPUS} RealMemory=$(( MEM / NODES )) State=UNKNOWN"
    NODE_LINES="${NODE_LINES:+$NODE_LINES$'\n'}$line"
  done
  PARTITION_NODES="n[1-${NODES}]"
fi

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
SlurmdSpoolDir=${SLURMD_SPOOL}
SlurmctldPidFile=${RUN_DIR}/slurmctld.pid
SlurmdPidFile=${SLURMD_PID}
SlurmctldLogFile=${LOG_DIR}/slurmctld.log
SlurmdLogFile=${SLURMD_LOG}
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=300
KillWait=5
Waittime=0
${EXTRA}
${NODE_LINES}
PartitionName=debug Nodes=${PARTITION_NODES} Default=YES MaxTime=INFINITE State=UP
EOF

bb_files_same() {
  [ "$BB" = 0 ] && return 0
  cmp -s "$HERE/burst_buffer.conf" "$CONF_DIR/burst_buffer.conf" \
    && cmp -s "$HERE/burst_buffer.lua" "$CONF_DIR/burst_buffer.lua"
}

slurmds_alive() {
  if [ -z "$NODES" ]; then
    pid_alive "$RUN_DIR/slurmd.pid"
    return
  fi
  local n
  for n in "${NODE_NAMES[@]}"; do
    pid_alive "$RUN_DIR/slurmd-$n.pid" || return 1
  done
}

HOSTS_LINE="127.0.0.1 ${NODE_NAMES[*]} $HOSTS_MARK"
hosts_listed() {
  [ -z "$NODES" ] || grep -qF "$HOSTS_LINE" /etc/hosts
}

if pid_alive "$RUN_DIR/slurmctld.pid" && slurmds_alive && hosts_listed; then
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
if [ -n "$NODES" ]; then
  # The nodes' line replaces an earlier one. A file whose last line had no newline gets one, and the
  # line says so, for stop.sh to give the file back as it was. Rewritten in place, never replaced:
  # /etc/hosts may be a bind mount (containers).
  if grep -qF "$HOSTS_MARK" /etc/hosts; then
    added=$(grep -qF "$HOSTS_MARK (newline added)" /etc/hosts && echo " (newline added)" || true)
  else
    added=$([ -s /etc/hosts ] && [ -n "$(tail -c 1 /etc/hosts)" ] && echo " (newline added)" || true)
  fi
  hosts=$(mktemp)
  grep -vF "$HOSTS_MARK" /etc/hosts > "$hosts" || true
  echo "$HOSTS_LINE$added" >> "$hosts"
  cat "$hosts" > /etc/hosts
  rm -f "$hosts"
fi
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
if [ -z "$NODES" ]; then
  slurmd        # daemonizes
else
  TMPFS_SIZE=${SLURM_NODE_TMPFS:-2g}
  for n in "${NODE_NAMES[@]}"; do
    mkdir -p "$SPOOL_DIR/$n"
    # Debian's slurmd has no multiple-slurmd build: each node is a slurmd in namespaces of its own,
    # which its job steps inherit; they and the node's tmpfs go with its last process
    # a shared folder under /tmp or /dev/shm: held at a bind mount while the node's tmpfs covers it, then put back
    keep=""; put_back=""; i=0
    IFS=: read -r -a shared <<< "${SLURM_NODE_SHARED:-}"
    for path in "${shared[@]}"; do
      case "$path" in
        /tmp/?*|/dev/shm/?*)
          hold="$RUN_DIR/shared-$n-$i"; mkdir -p "$hold"; i=$((i + 1))
          keep+=" && mount --bind $(printf %q "$path") $(printf %q "$hold")"
          put_back+=" && mkdir -p $(printf %q "$path") && mount --bind $(printf %q "$hold") $(printf %q "$path")" ;;
      esac
    done
    unshare --uts --mount --propagation private -- sh -c "hostname $n $keep \
      && mount -t tmpfs -o size=$TMPFS_SIZE,mode=1777 tmpfs /tmp \
      && mount -t tmpfs -o size=$TMPFS_SIZE,mode=1777 tmpfs /dev/shm $put_back \
      && exec slurmd"  # daemonizes
  done
fi

timeout=${SLURM_START_TIMEOUT:-60}
for _ in $(seq 1 $((timeout * 4))); do
  [ "$(node_state)" = idle ] && break
  sleep 0.25
done
if [ "$(node_state)" != idle ]; then
  echo "slurm node not idle after ${timeout}s" >&2
  sinfo -N -l >&2 || true
  tail -n 30 "$LOG_DIR/slurmctld.log" "$LOG_DIR"/slurmd*.log >&2 || true
  exit 1
fi
echo "slurm ready: $(sinfo -h -o '%P %a %D %T %N')${EXTRA:+ (extra: $(tr '\n' ' ' <<<"$EXTRA"))}"
