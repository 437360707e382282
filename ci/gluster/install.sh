#!/bin/bash
# Install GlusterFS (server + FUSE client) from Debian packages: a real distributed file system on
# one machine, used as a network "persistent tier" (per-operation latency like a parallel filesystem).
# Usage: bash ci/gluster/install.sh      (root + apt-get; otherwise prints what to install, exit 1)
set -euo pipefail
PKGS=(glusterfs-server glusterfs-client)
if command -v glusterd >/dev/null && command -v gluster >/dev/null && command -v mount.glusterfs >/dev/null; then
  echo "glusterfs already installed: $(glusterd --version | head -1)"
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "GlusterFS is not installed; as root: apt-get install -y --no-install-recommends ${PKGS[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# The postinst complains that systemd is not running; harmless.
apt-get install -y -qq --no-install-recommends "${PKGS[@]}" 2>&1 | grep -v -i systemd || true
command -v glusterd >/dev/null || { echo "glusterd still missing after install" >&2; exit 1; }
echo "installed: $(glusterd --version | head -1)"
