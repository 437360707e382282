#!/usr/bin/env bash
# make test: the unit tests and the end-to-end tests at once, each a pytest session of its own.
#
# The end-to-end tests (real jobs, Snakemake, Slurm, GlusterFS, MPI, fio) mostly wait: for Slurm to start a job, for a
# job's fsync, for a daemon. On 2 cores about a third of the CPU stays idle while they run. The unit tests run beside
# them at the lowest CPU priority (nice 19), so they take that idle share rather than the end-to-end tests' cores;
# their output goes to a log that is shown when both sessions are done.
#
# Usage: scripts/test.sh UNIT_MARKERS E2E_MARKERS [pytest arguments for both sessions]
# Exit 0 when both pass; a session none of whose tests the arguments select (pytest's exit 5) counts as passed.
set -uo pipefail
cd "$(dirname "$0")/.."
unit_markers=$1
e2e_markers=$2
shift 2
pytest=(python -m pytest)

unit_log=$(mktemp "${TMPDIR:-/tmp}/cycleio-unit-tests.XXXXXX")
trap 'rm -f "$unit_log"' EXIT
nice -n 19 "${pytest[@]}" -m "$unit_markers" -n auto "$@" > "$unit_log" 2>&1 &
unit_pid=$!
echo "test.sh: the unit tests run beside the end-to-end tests (nice 19); their output follows these"

# Under --dist loadgroup a group's tests share its studies and clusters (tests/conftest.py groups them and starts the
# longest first): two workers take the busy groups, a third the Slurm tests, which mostly wait on Slurm (a third busy
# worker from the start slowed every test by a third), then what is left of the others'.
"${pytest[@]}" -m "$e2e_markers" -n 3 --dist loadgroup "$@"
e2e_status=$?
wait "$unit_pid"
unit_status=$?

echo
echo "test.sh: the unit tests' session"
cat "$unit_log"
passed() { [ "$1" -eq 0 ] || [ "$1" -eq 5 ]; }
if passed "$unit_status" && passed "$e2e_status"; then
  exit 0
fi
echo "test.sh: failed: unit tests exit $unit_status, end-to-end tests exit $e2e_status" >&2
exit 1
