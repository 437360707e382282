#!/usr/bin/env bash
# The parallel-netCDF stack for the `parallel` and `quilt_parallel` write strategies, in a venv of its own
# (.venv-parallel): netCDF4-python built from source against the system's MPI netCDF-C (parallel HDF5,
# Open MPI on Debian), mpi4py and the rest as wheels. Run by `make setup MPI=system` (or
# `make setup-parallel`), and by the tests that need it. Safe to run again: it only redoes what changed,
# and the built netCDF4 wheel is cached, so a second venv takes seconds.
#
# Why its own venv: a netCDF4 built for MPI imports mpi4py, which picks MPICH when the mpich wheel of
# .venv is beside it, and `import netCDF4` then fails. The forecast's launcher starts the rank program
# with this venv's python under this MPI's launcher (config key parallel_stack).
#
# Debian 12 (as root it installs them): libnetcdf-mpi-dev libhdf5-openmpi-dev openmpi-bin libopenmpi-dev.
# Elsewhere (a cluster's modules), point it at the site's build:
#   NETCDF4_DIR (netCDF-C with parallel HDF5: include/ and lib/), HDF5_INCDIR, HDF5_LIBDIR, MPICC.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV_PARALLEL:-.venv-parallel}
PYTHON=${PYTHON:-python3}
LOCK=requirements-parallel.lock
site_build=${NETCDF4_DIR:+yes}  # a site's build named by the caller: no Debian packages wanted
SYSTEM_PACKAGES=(libnetcdf-mpi-dev libhdf5-openmpi-dev openmpi-bin libopenmpi-dev)
export NETCDF4_DIR=${NETCDF4_DIR:-/usr/lib/x86_64-linux-gnu/netcdf/mpi}
export HDF5_INCDIR=${HDF5_INCDIR:-/usr/include/hdf5/openmpi}
export HDF5_LIBDIR=${HDF5_LIBDIR:-/usr/lib/x86_64-linux-gnu/hdf5/openmpi}
export CC=${MPICC:-mpicc.openmpi}
# Debian's netCDF-C 4.9.0 headers lack these two feature macros, which netCDF4-python reads (in CPPFLAGS:
# the preprocessor's, so they reach every compile).
export CPPFLAGS="${CPPFLAGS:+$CPPFLAGS }-DNC_HAS_BZ2=0 -DNC_HAS_BLOSC=0"
WHEEL_CACHE=${CYCLEIO_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cycleio/wheels}

# One bootstrap at a time (parallel test workers each ask for the stack): the others wait, then find it built.
exec 9>"$VENV.lock"
flock 9

say() { echo "bootstrap-parallel: $*"; }
fail() { echo "bootstrap-parallel: $*" >&2; exit 1; }

source scripts/debian-packages.sh
missing=()
if [ -z "$site_build" ] && command -v dpkg-query >/dev/null; then
  mapfile -t missing < <(missing_packages "${SYSTEM_PACKAGES[@]}")
fi
if [ ${#missing[@]} -gt 0 ]; then
  if can_apt; then
    say "installing system packages: ${missing[*]}"
    apt_install "${missing[@]}"
  else
    fail "please install ${missing[*]} (Debian), or point NETCDF4_DIR, HDF5_INCDIR, HDF5_LIBDIR and MPICC at your" \
         "site's parallel netCDF-C, HDF5 and MPI compiler wrapper"
  fi
fi
[ -f "$NETCDF4_DIR/include/netcdf_par.h" ] || fail "no parallel netCDF-C in NETCDF4_DIR=$NETCDF4_DIR (no include/netcdf_par.h)"
grep -q "NC_HAS_PARALLEL4 *1" "$NETCDF4_DIR/include/netcdf_meta.h" \
  || fail "the netCDF-C in $NETCDF4_DIR was built without parallel HDF5 (NC_HAS_PARALLEL4 is not 1)"
command -v "$CC" >/dev/null || fail "no MPI compiler wrapper $CC (set MPICC)"

netcdf4_version=$(sed -n 's/^netCDF4==//p' "$LOCK")
libversion=$(sed -n 's/^#define NC_VERSION *"\(.*\)"/\1/p' "$NETCDF4_DIR/include/netcdf_meta.h")
stamp="$VENV/.cycleio-installed"
want=$( (cat "$LOCK" "$0"; echo "$NETCDF4_DIR $HDF5_INCDIR $HDF5_LIBDIR $CC $CPPFLAGS $libversion") | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$VENV/bin/python" ]; then
  exit 0
fi

[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
say "installing pinned packages into $VENV"
grep -v '^netCDF4==' "$LOCK" > "$VENV/.requirements-wheels.txt"
# The wheels by the uv of .venv (scripts/bootstrap.sh) where it has one: the venv in 11 s here, 22 s with pip.
uv=$(pwd)/.venv/bin/uv
install_wheels() {  # not `install`: that is coreutils' command
  if [ -x "$uv" ]; then
    UV_LINK_MODE=copy "$uv" pip install -q --python "$VENV/bin/python" --compile-bytecode "$@"
  else
    "$VENV/bin/python" -m pip install -q "$@"
  fi
}
[ -x "$uv" ] || "$VENV/bin/python" -m pip install -q --upgrade pip
install_wheels -r "$VENV/.requirements-wheels.txt"
if "$VENV/bin/python" -m pip show -q mpich >/dev/null 2>&1; then
  fail "$VENV has the mpich wheel: mpi4py would pick MPICH there; remove $VENV and run again"
fi

# The built wheel, cached by everything it depends on.
pyversion=$("$VENV/bin/python" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
key=$( (echo "netCDF4==$netcdf4_version $pyversion $libversion"; echo "$NETCDF4_DIR $HDF5_INCDIR $HDF5_LIBDIR $CC $CPPFLAGS";
        sed -n '/^# ---- build/,$p' "$0") | sha256sum | cut -c1-16)
cached="$WHEEL_CACHE/netCDF4-$netcdf4_version-$pyversion-mpi-$key"
if ! ls "$cached"/*.whl >/dev/null 2>&1; then
  # ---- build (what follows is part of the cache key)
  say "building netCDF4 $netcdf4_version from source against netCDF-C $libversion in $NETCDF4_DIR (about a minute)"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  "$VENV/bin/python" -m pip download -q --no-deps --no-binary netCDF4 --no-build-isolation -d "$work" \
    "netCDF4==$netcdf4_version"
  tar -xzf "$work"/*.tar.gz -C "$work"
  source_dir=$(find "$work" -mindepth 1 -maxdepth 1 -type d | head -n 1)
  # netCDF4 1.7.x expects nc_rc_get/nc_rc_set from netCDF-C 4.9.0 on, but they came with 4.9.1 (as its own
  # comment on them says; Debian's 4.9.0 has neither, and `import netCDF4` fails on the missing symbol):
  # the guard in its compatibility header moves to 4.9.1, nothing else changes.
  "$VENV/bin/python" - "$source_dir/include/netcdf-compat.h" <<'PATCH'
import sys
from pathlib import Path

path = Path(sys.argv[1])
text = path.read_text()
old = "#if NC_VERSION_GE(4, 9, 0)\n#define HAS_NCRCSET 1"
if old in text:
    path.write_text(text.replace(old, "#if NC_VERSION_GE(4, 9, 1)\n#define HAS_NCRCSET 1"))
    print("bootstrap-parallel: nc_rc_get/nc_rc_set guarded at netCDF-C 4.9.1 in", path.name)
PATCH
  "$VENV/bin/python" -m pip wheel -q --no-deps --no-build-isolation --no-cache-dir -w "$work/wheel" "$source_dir" \
    > "$work/build.log" 2>&1 || { tail -n 40 "$work/build.log" >&2; fail "building netCDF4 failed (log above)"; }
  mkdir -p "$cached"
  mv "$work"/wheel/*.whl "$cached"/
fi
if [ -x "$uv" ]; then
  install_wheels --no-deps --reinstall "$cached"/*.whl
else
  install_wheels --no-deps --force-reinstall "$cached"/*.whl
fi
"$VENV/bin/python" -c '
import netCDF4, mpi4py
assert netCDF4.__has_parallel4_support__, "netCDF4 was built without parallel support"
print("bootstrap-parallel: netCDF4", netCDF4.__version__, "on netCDF-C", netCDF4.__netcdf4libversion__,
      "and HDF5", netCDF4.__hdf5libversion__, "with parallel I/O")
' || fail "the built netCDF4 does not import in $VENV"
echo "$want" > "$stamp"
