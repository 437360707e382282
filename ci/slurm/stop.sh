#!/bin/bash
# Stop the daemons started by start.sh, each by the PID in its pid file (never by name): every
# node's slurmd (the one node, or n1..nN of --nodes, whose namespaces and tmpfs go with them).
# Jobs still queued or running are cancelled first, so no slurmstepd outlives slurmd.
# munged is stopped only if start.sh started it (a munged that was already running is left).
# The slurm.conf that start.sh wrote goes too: with it and no controller, every Slurm client call
# waits for the controller (~10 s), and so does every `snakemake` start, since the Slurm executor
# plugin runs `scontrol show config` when it is loaded; without it they fail at once. So does the
# line `start.sh --nodes` added to /etc/hosts.
#
# Usage: bash ci/slurm/stop.sh [--clean]
#   --clean  also wipe slurmctld/slurmd state and logs
# Env: SKIP_MUNGE=1 leaves munged running (start.sh uses this when restarting)
set -euo pipefail

RUN_DIR=/run/slurm
MUNGE_MARK=$RUN_DIR/munged.started-by-start-sh
CLEAN=0
for arg in "$@"; do
  case "$arg" in
    --clean) CLEAN=1 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "unknown option: $arg" >&2; exit 2 ;;
  esac
done

stop_pid() {  # $1 = pid file, $2 = name
  [ -s "$1" ] || return 0
  local p
  p=$(cat "$1")
  if ! kill -0 "$p" 2>/dev/null; then
    rm -f "$1"
    return 0
  fi
  kill "$p" 2>/dev/null || true
  for _ in $(seq 1 40); do
    kill -0 "$p" 2>/dev/null || break
    sleep 0.25
  done
  if kill -0 "$p" 2>/dev/null; then
    echo "$2 (pid $p) ignored SIGTERM; sending SIGKILL" >&2
    kill -9 "$p" 2>/dev/null || true
  fi
  rm -f "$1"
  echo "stopped $2 (pid $p)"
}

if [ -s "$RUN_DIR/slurmctld.pid" ] && kill -0 "$(cat "$RUN_DIR/slurmctld.pid")" 2>/dev/null \
   && command -v squeue >/dev/null; then
  jobs=$(squeue -h -o %i 2>/dev/null || true)
  if [ -n "$jobs" ]; then
    echo "cancelling jobs: $(tr '\n' ' ' <<<"$jobs")"
    # shellcheck disable=SC2086
    scancel $jobs 2>/dev/null || true
    for _ in $(seq 1 60); do
      [ -z "$(squeue -h -o %i 2>/dev/null || true)" ] && break
      sleep 0.25
    done
  fi
fi

stop_pid "$RUN_DIR/slurmd.pid" slurmd
for pidfile in "$RUN_DIR"/slurmd-*.pid; do
  [ -e "$pidfile" ] || continue
  node=${pidfile##*/slurmd-}
  stop_pid "$pidfile" "slurmd ${node%.pid}"
done
stop_pid "$RUN_DIR/slurmctld.pid" slurmctld
if [ "${SKIP_MUNGE:-0}" != 1 ] && [ -e "$MUNGE_MARK" ]; then
  stop_pid /run/munge/munged.pid munged
  rm -f "$MUNGE_MARK"
fi
if head -n 1 /etc/slurm/slurm.conf 2>/dev/null | grep -q '^# written by cycleio ci/slurm/start.sh'; then
  rm -f /etc/slurm/slurm.conf
fi

HOSTS_MARK="# cycleio ci/slurm/start.sh --nodes"
if grep -qF "$HOSTS_MARK" /etc/hosts 2>/dev/null; then
  trim=$(grep -qF "$HOSTS_MARK (newline added)" /etc/hosts && echo 1 || echo 0)
  hosts=$(mktemp)
  grep -vF "$HOSTS_MARK" /etc/hosts > "$hosts" || true
  cat "$hosts" > /etc/hosts  # in place: /etc/hosts may be a bind mount
  rm -f "$hosts"
  if [ "$trim" = 1 ]; then truncate -s -1 /etc/hosts; fi
fi

if [ "$CLEAN" = 1 ]; then
  rm -rf /var/spool/slurmctld/* /var/spool/slurmd/* /var/log/slurm/*
  echo "cleaned slurm state and logs"
fi
