#!/bin/bash
# Start glusterd (unless running), create and start a volume of N bricks on local folders, and
# FUSE-mount it: a real network filesystem on one machine. Distributed (each file on one brick), or
# with REDUNDANCY=R dispersed (erasure coded: any R of the N bricks may fail).
# Usage: bash ci/gluster/up.sh MOUNTPOINT [NBRICKS]   (env VOL=cycleio, BRICK_ROOT=/srv/cycleio-gluster, REDUNDANCY)
# Needs root and /dev/fuse. Prints the mount point when it is usable. Undo with down.sh.
set -euo pipefail
MNT=${1:?usage: up.sh MOUNTPOINT [NBRICKS]}; N=${2:-2}
VOL=${VOL:-cycleio}; ROOT=${BRICK_ROOT:-/srv/cycleio-gluster}; REDUNDANCY=${REDUNDANCY:-}
HOST=$(hostname)  # the CLI refuses the literals localhost/127.0.0.1; a name resolving to them is fine
[ -e /dev/fuse ] || { echo "no /dev/fuse: GlusterFS needs FUSE" >&2; exit 1; }
mkdir -p /var/log/glusterfs /run "$MNT" "$ROOT"
# A killed daemon stays a zombie for a while here, so "alive" reads the process state.
alive() { [ -f "$1" ] && [ -r "/proc/$(cat "$1")/stat" ] && ! awk '{exit ($3=="Z")?0:1}' "/proc/$(cat "$1")/stat"; }
if ! alive /run/glusterd.pid; then
  /usr/sbin/glusterd -p /run/glusterd.pid --log-level WARNING
  touch "$ROOT/.started-glusterd"  # down.sh stops glusterd only if we started it
fi
for _ in $(seq 1 150); do gluster --mode=script volume list >/dev/null 2>&1 && break; sleep 0.1; done
gluster --mode=script volume list >/dev/null 2>&1 || { echo "glusterd is not answering (see /var/log/glusterfs)" >&2; exit 1; }
if ! gluster --mode=script volume info "$VOL" >/dev/null 2>&1; then
  BRICKS=()
  for i in $(seq 1 "$N"); do mkdir -p "$ROOT/$VOL/b$i"; BRICKS+=("$HOST:$ROOT/$VOL/b$i"); done
  # force: bricks on the root filesystem, several bricks on one server
  KIND=(); [ -n "$REDUNDANCY" ] && KIND=(disperse "$N" redundancy "$REDUNDANCY")
  gluster --mode=script volume create "$VOL" "${KIND[@]}" "${BRICKS[@]}" force >/dev/null
fi
gluster --mode=script volume start "$VOL" force >/dev/null
grep -q " $MNT fuse.glusterfs " /proc/mounts || mount -t glusterfs "$HOST:/$VOL" "$MNT"
grep -q " $MNT fuse.glusterfs " /proc/mounts || { echo "mounting $HOST:/$VOL on $MNT failed (see /var/log/glusterfs)" >&2; exit 1; }
# Usable once the mount's client reaches every brick (each brick's connection as the FUSE mount's .meta shows it):
# a mount still connecting to one brick of a dispersed volume fails with "Transport endpoint is not connected"
# when another is killed, though the volume can lose one.
all_bricks_connected() {
  local seen=0 private
  for private in "$MNT/.meta/graphs/active/$VOL"-client-*/private; do
    grep -qx "connected = 1" "$private" 2>/dev/null || return 1
    seen=$((seen + 1))
  done
  [ "$seen" -gt 0 ]
}
for _ in $(seq 1 600); do all_bricks_connected && break; sleep 0.1; done
all_bricks_connected || { echo "the mount of $VOL on $MNT did not reach every brick in 60 s (see /var/log/glusterfs)" >&2; exit 1; }
chmod 1777 "$MNT"
echo "$MNT"
