#!/bin/bash
# Install Slurm (slurmctld, slurmd, client) and munge from Debian packages.
# Usage: bash ci/slurm/install.sh      (root + apt-get; otherwise prints what to install, exit 1)
set -euo pipefail

PKGS_MIN=(slurmctld slurmd slurm-client munge)
PKGS_FALLBACK=(slurm-wlm munge)

have_all() {
  command -v slurmctld >/dev/null && command -v slurmd >/dev/null \
    && command -v sbatch >/dev/null && command -v munged >/dev/null
}

if have_all; then
  echo "slurm and munge already installed: $(slurmd -V)"
  exit 0
fi

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  cat >&2 <<MSG
Slurm/munge are not installed and this script can only install them as root with apt-get.
Install them with your package manager, e.g. on Debian/Ubuntu:
  apt-get install -y --no-install-recommends ${PKGS_MIN[*]}
  (or: apt-get install -y ${PKGS_FALLBACK[*]})
MSG
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
if ! apt-get install -y -qq --no-install-recommends "${PKGS_MIN[@]}"; then
  echo "reduced package set failed; falling back to ${PKGS_FALLBACK[*]}" >&2
  apt-get install -y -qq "${PKGS_FALLBACK[@]}"
fi
have_all || { echo "slurm/munge binaries still missing after install" >&2; exit 1; }
echo "installed: $(slurmd -V), munge $(munged -V 2>&1 | head -1)"
