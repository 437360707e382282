"""(3) Dry-run planning: `snakemake -n --quiet` for a study over 124 cycles, against a bare Snakemake workflow.

A month of 6-hourly cycles must plan in about the time Snakemake itself needs for that many jobs, or every
`make study` of a long study starts with a wait that grows with it. Two shapes, each over 124 cycles
(cycles.start 2026010100, cycles.end 2026013118; the count comes from cycleio.config.calendar) under
`study=benchplan`, so no real study's results are touched (a dry run writes only .snakemake metadata):

- the default study: three arms (its three scratch tiers) at C48 L127;
- what operations run: the same with an 80-member ensemble and the archive (an archive tier under results/).

The baseline is a bare Snakemake workflow of the same job count and shape, written to a temporary folder:
arms x cycles x steps, one rule whose input function names the job before (each step after the one before,
each cycle after the last), every job's file asked for by `rule all`. Each repeat times the bare workflow and
then cycleio, back to back; ratio = cycleio / bare, goal 1.5 or below. Three repeats (--quick: one). One untimed
run without --quiet per shape gives the job counts and checks the cycle steps against the calendar.

Run alone: PYTHONPATH=scripts .venv/bin/python bench/bench_planning.py [--quick] [--shape default|ensemble]
"""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import REPO, row, standalone

sys.path.insert(0, str(REPO / "scripts"))
from cycleio.config.calendar import cycles, shift_cycle, steps_of_cycle  # noqa: E402

BENCHMARK = "dry-run planning"
GOAL_RATIO = 1.5
START, N_CYCLES, ARMS = "2026010100", 124, 3
END = shift_cycle(START, 6 * (N_CYCLES - 1))
SNAKEMAKE = [str(REPO / ".venv" / "bin" / "snakemake"), "-n"]
# the jobs' python is checked at parse time: the project's environment first, as make puts it
ENV = {**os.environ, "PATH": f"{REPO / '.venv' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}
CONFIG = ["--config", "study=benchplan", f'cycles={{start: "{START}", end: "{END}"}}']
ENSEMBLE = """\
tiers:
  archive: {kind: archive, path: results/tiers/archive, persistent: true, shared: true}
archive:
  enabled: true
ensemble:
  members: 80
"""
# (case, configuration files beyond the default, members): the shapes timed
SHAPES = {
    "default": ("default study", [], 0),
    "ensemble": ("80-member ensemble and the archive", ["ensemble.yaml"], 80),
}

BARE_SNAKEFILE = """\
# A bare workflow of {jobs} jobs: {arms} arms x {cycles} cycles, each step after the one before, each cycle
# after the last (written by bench/bench_planning.py).
STEPS = {steps!r}  # steps of each arm's cycles


def before(wildcards):
    arm, cycle, step = int(wildcards.arm), int(wildcards.cycle), int(wildcards.step)
    if step:
        return f"out/{{arm}}/{{cycle}}/{{step - 1}}.done"
    if cycle:
        return f"out/{{arm}}/{{cycle - 1}}/{{STEPS[arm][cycle - 1] - 1}}.done"
    return []


rule all:
    input:
        [f"out/{{a}}/{{c}}/{{s}}.done" for a, arm in enumerate(STEPS) for c, n in enumerate(arm) for s in range(n)],


rule step:
    input:
        before,
    output:
        "out/{{arm}}/{{cycle}}/{{step}}.done",
    shell:
        "touch {{output}}"
"""


def bare_workflow(folder: Path, jobs: int, arms: int, n_cycles: int) -> Path:
    """A bare Snakefile of ``jobs`` jobs (``rule all`` included) in ``folder``, its steps spread over the cycles."""
    base, more = divmod(jobs - 1, arms * n_cycles)  # rule all is a job too
    steps = [[base + (a * n_cycles + c < more) for c in range(n_cycles)] for a in range(arms)]
    snakefile = folder / "Snakefile"
    snakefile.write_text(BARE_SNAKEFILE.format(jobs=jobs, arms=arms, cycles=n_cycles, steps=steps))
    return snakefile


def job_counts(extra: list[str]) -> dict[str, int]:
    """The job-count table that a dry run without --quiet prints."""
    result = subprocess.run(SNAKEMAKE + ["--quiet", "rules"] + extra + CONFIG, cwd=REPO, env=ENV,
                            capture_output=True, text=True)
    if result.returncode:
        raise RuntimeError(f"dry run failed: {(result.stdout + result.stderr)[-1500:]}")
    table = result.stdout.split("Job stats:")[1].split("\n\n")[0]
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M)}


def timed(argv: list[str], cwd: Path) -> tuple[float, float]:
    """Wall and CPU seconds (user and system) of a dry run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    result = subprocess.run(argv, cwd=cwd, env=ENV, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode:
        raise RuntimeError(f"dry run failed: {result.stderr[-1500:]}")
    return seconds, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def run_shape(name: str, repeats: int, folder: Path) -> dict:
    case, files, members = SHAPES[name]
    extra = []
    for file in files:
        (folder / file).write_text(ENSEMBLE)
        extra += ["--configfile", str(REPO / "config" / "config.yaml"), str(folder / file)]
    counts = job_counts(extra)
    listed = cycles(START, END, 6)
    members_per_job = 8
    ensemble = -(-members // members_per_job) if members else 0
    want = ARMS * sum(len(steps_of_cycle(c, START)) + (ensemble if c != START else 0) for c in listed)
    if counts.get("cycle_step") != want:
        raise RuntimeError(f"the DAG has {counts.get('cycle_step')} cycle_step jobs, expected {want}: {counts}")
    bare = folder / name
    bare.mkdir()
    bare_workflow(bare, counts["total"], ARMS, N_CYCLES)
    bare_argv = SNAKEMAKE + ["--quiet", "--cores", "1"]
    ours, theirs = [], []
    for _ in range(repeats):
        theirs.append(timed(bare_argv, bare))
        ours.append(timed(SNAKEMAKE + ["--quiet"] + extra + CONFIG, REPO))
    cpu = ", ".join(f"{o[1]:.1f}/{t[1]:.1f}" for o, t in zip(ours, theirs))
    return row(BENCHMARK, f"{case}, {N_CYCLES} cycles x {ARMS} arms", "wall time", "s", [o[0] for o in ours],
               [t[0] for t in theirs], [o[0] / t[0] for o, t in zip(ours, theirs)], GOAL_RATIO,
               higher_is_better=False,
               notes=f"baseline = a bare Snakemake workflow of the same job count and shape (lower is better); "
                     f"DAG {counts['total']} jobs ({counts['cycle_step']} cycle steps); CPU s cycleio/bare: {cpu}")


def run(args) -> list[dict]:
    listed = cycles(START, END, 6)
    assert len(listed) == N_CYCLES, f"{START}..{END} is {len(listed)} cycles, not {N_CYCLES}"
    names = [args.shape] if getattr(args, "shape", None) else list(SHAPES)
    with tempfile.TemporaryDirectory(prefix="bench-planning-") as tmp:
        return [run_shape(name, 1 if args.quick else 3, Path(tmp)) for name in names]


def options(parser) -> None:
    parser.add_argument("--shape", choices=list(SHAPES), help="time one shape only")


if __name__ == "__main__":
    sys.exit(standalone(run, __doc__, options))
