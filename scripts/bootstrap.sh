#!/usr/bin/env bash
# Set up what cycleio needs on a fresh Debian machine: system packages (with apt, when root) and a
# Python venv with the pinned packages. Safe to run again: it only redoes what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
SYSTEM_PACKAGES=(fio netcdf-bin rsync fuse3 chromium strace)   # fio: benchmarks where IOR is absent; ncdump; rsync staging; fuse3: faults.slow_tier; chromium: the report's rendering test; strace: make bench's write profile
python_ok() { "$PYTHON" -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; }

stamp="$VENV/.cycleio-installed"
want=$(cat requirements.lock pyproject.toml | sha256sum | cut -d' ' -f1)
venv_current() { [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; }

source scripts/debian-packages.sh
mapfile -t missing < <(missing_packages "${SYSTEM_PACKAGES[@]}")
# Python itself matters only for making the venv (its check starts a Python: 0.2 s of every make command)
venv_current || python_ok || missing+=(python3 python3-venv)
if [ ${#missing[@]} -gt 0 ]; then
  if can_apt; then
    echo "bootstrap: installing system packages: ${missing[*]}"
    apt_install "${missing[@]}"
  else
    echo "bootstrap: not root (or no apt-get): please install ${missing[*]} yourself;" \
         "tests that need them skip outside CI" >&2
  fi
fi

if ! venv_current; then
  python_ok || { echo "bootstrap: $PYTHON is not Python >= 3.11 with venv; set PYTHON=/path/to/python3.11" >&2; exit 1; }
  [ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
  echo "bootstrap: installing pinned Python packages into $VENV (first time: about a minute)"
  # uv (pinned in the lock, installed by the venv's own pip) installs the lock: 48 s with pip and a warm cache here,
  # 28 s with uv; --compile-bytecode as pip does, for environments that set PYTHONDONTWRITEBYTECODE
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check "$(grep -m1 '^uv==' requirements.lock)"
  uv_install() { UV_LINK_MODE=copy "$VENV/bin/uv" pip install -q --python "$VENV/bin/python" "$@"; }
  uv_install --compile-bytecode -r requirements.lock
  uv_install --no-deps -e .
  echo "$want" > "$stamp"
fi
# The checkout's package compiled (pip compiles what it installs, not an editable install's source), also where
# PYTHONDONTWRITEBYTECODE keeps Python from writing it: every job of a study is a Python that imports the package,
# and compiling it again cost each 0.2 s here (the smoke study: 105-114 CPU-s with it, 120-121 without).
# Up to date in 0.05 s.
"$VENV/bin/python" -m compileall -q scripts/cycleio >/dev/null
