"""`make study` hands its ARGS on intact, quotes included, to `make report` and to the study-name lookup.
Checked with make's own dry run (`make -n`), which prints the recipes, runs the sub-make with -n too and
runs no job."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

QUOTED = "--config 'staging={streams: 2, drop_caches: true}'"


def make_dry_run(*words: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    return subprocess.run(["make", "-n", "--no-print-directory", *words], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)


def report_line(run: subprocess.CompletedProcess) -> str:
    lines = [line for line in run.stdout.splitlines() if "snakemake" in line and "--report" in line]
    assert run.returncode == 0 and len(lines) == 1, f"exit {run.returncode}:\n{run.stdout[-1500:]}\n{run.stderr[-1500:]}"
    return lines[0]


@pytest.mark.parametrize("args", [
    QUOTED,
    f"{QUOTED} study=quoted_name",
    "--config scratch_tiers=[lustre,shm] resolution=C96",
    "--config 'tiers={shm: {path: /mnt/nvme/cycleio}}' --cores 2",
    "",
])
def test_make_study_hands_args_with_quotes_to_make_report(args):
    line = report_line(make_dry_run("study", f"ARGS={args}"))
    assert line.split("snakemake", 1)[1].strip().startswith(f"{args} --report".strip()), line


def test_the_study_name_lookup_reads_a_study_given_with_quoted_args():
    run = make_dry_run("study", "STUDY=config/studies/smoke.yaml", f"ARGS={QUOTED} study=quoted_name")
    assert "--report results/quoted_name/report.html" in report_line(run)
    assert "results/quoted_name/summary.md" in run.stdout
    run = make_dry_run("study", "STUDY=config/studies/smoke.yaml", f"ARGS={QUOTED}")
    assert "--report results/smoke/report.html" in report_line(run)
