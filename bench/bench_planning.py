"""(3) Dry-run planning: seconds of `snakemake -n --quiet` for the default study over 124 cycles.

A month of 6-hourly cycles must plan in seconds, or every `make study` of a long study starts
with a wait. This times the dry run from the repository for the default study's three arms (its three
scratch tiers) with cycles.start 2026010100 and cycles.end 2026013118 (124 cycles; the cycle count
comes from cycleio.config.calendar), under `study=benchplan` so no real study's results are touched (a
dry run writes only .snakemake metadata). Three repeats (--quick: one). The baseline is the
absolute goal of 10 s: ratio = seconds / 10, lower is better.

The study stays at its default C48 L127: the preflight checks that the cycles held at once (with
the default cycles.keep, three per arm) fit on the tiers. One untimed run without --quiet checks the
job counts against the calendar.

Run alone: .venv/bin/python bench/bench_planning.py [--quick]
"""

from __future__ import annotations

import re
import subprocess
import sys
import time

from common import REPO, row, standalone

sys.path.insert(0, str(REPO / "scripts"))
from cycleio.config.calendar import cycles, shift_cycle, steps_of_cycle  # noqa: E402

BENCHMARK = "dry-run planning"
GOAL_S = 10.0
START, N_CYCLES, ARMS = "2026010100", 124, 3
END = shift_cycle(START, 6 * (N_CYCLES - 1))
SNAKEMAKE = [str(REPO / ".venv" / "bin" / "snakemake"), "-n"]
CONFIG = ["--config", "study=benchplan", f'cycles={{start: "{START}", end: "{END}"}}']


def job_counts() -> dict[str, int]:
    """The job-count table that a dry run without --quiet prints."""
    result = subprocess.run(SNAKEMAKE + ["--quiet", "rules"] + CONFIG, cwd=REPO, capture_output=True, text=True)
    if result.returncode:
        raise RuntimeError(f"dry run failed: {(result.stdout + result.stderr)[-1500:]}")
    table = result.stdout.split("Job stats:")[1].split("\n\n")[0]
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M)}


def run(args) -> list[dict]:
    listed = cycles(START, END, 6)
    assert len(listed) == N_CYCLES, f"{START}..{END} is {len(listed)} cycles, not {N_CYCLES}"
    counts = job_counts()
    want = ARMS * sum(len(steps_of_cycle(c, START)) for c in listed)
    if counts.get("cycle_step") != want:
        raise RuntimeError(f"the DAG has {counts.get('cycle_step')} cycle_step jobs, expected {want}: {counts}")
    seconds = []
    for _ in range(1 if args.quick else 3):
        t0 = time.perf_counter()
        result = subprocess.run(SNAKEMAKE + ["--quiet"] + CONFIG, cwd=REPO, capture_output=True, text=True)
        seconds.append(time.perf_counter() - t0)
        if result.returncode:
            raise RuntimeError(f"dry run failed: {result.stderr[-1500:]}")
    return [row(BENCHMARK, f"default study, {N_CYCLES} cycles x {ARMS} arms", "wall time", "s", seconds,
                [GOAL_S] * len(seconds), [s / GOAL_S for s in seconds], 1.0, higher_is_better=False,
                notes=f"baseline = the 10 s goal (lower is better); DAG {counts['total']} jobs "
                      f"({counts['cycle_step']} cycle steps)")]


if __name__ == "__main__":
    sys.exit(standalone(run, __doc__))
