#!/bin/bash
# Undo up.sh: unmount MOUNTPOINT, stop and delete the volume, remove its bricks, and stop glusterd
# if up.sh started it (by PID file only, never by name).
# Usage: bash ci/gluster/down.sh MOUNTPOINT   (env VOL=cycleio, BRICK_ROOT=/srv/cycleio-gluster)
set -uo pipefail
MNT=${1:?usage: down.sh MOUNTPOINT}
VOL=${VOL:-cycleio}; ROOT=${BRICK_ROOT:-/srv/cycleio-gluster}
if grep -q " $MNT fuse.glusterfs " /proc/mounts; then umount "$MNT" || umount -l "$MNT"; fi
if gluster --mode=script volume info "$VOL" >/dev/null 2>&1; then
  gluster --mode=script volume stop "$VOL" force >/dev/null
  gluster --mode=script volume delete "$VOL" >/dev/null
fi
if [ -f "$ROOT/.started-glusterd" ] && [ -f /run/glusterd.pid ]; then
  kill "$(cat /run/glusterd.pid)" 2>/dev/null
  rm -f /run/glusterd.pid
fi
rm -rf "${ROOT:?}/$VOL" "$ROOT/.started-glusterd"
rmdir "$ROOT" 2>/dev/null
exit 0
