"""`make study` hands its ARGS on intact, quotes included, to check-config, `make report` and the study-name lookup.
Checked with make's own dry run (`make -n`), which prints the recipes, runs the sub-make with -n too and
runs no job."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration  # every test runs make, which starts Python and Snakemake's config parser

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


def quoted(args: str) -> str:
    """ARGS as the Makefile hands it on: one single-quoted shell word (QUOTED_ARGS)."""
    return "'" + args.replace("'", "'\\''") + "'"


# (ARGS, the study name make study takes from them over config/studies/smoke.yaml)
CASES = [
    (QUOTED, "smoke"),
    (f"{QUOTED} study=quoted_name", "quoted_name"),
    ("--config scratch_tiers=[lustre,shm] resolution=C96", "smoke"),
    ("--config 'tiers={shm: {path: /mnt/nvme/cycleio}}' --cores 2", "smoke"),
    ("--config study=resume_probe", "resume_probe"),
    ("", "smoke"),
]


@pytest.mark.parametrize("args,name", CASES)
def test_make_study_hands_args_with_quotes_to_check_config_the_study_name_lookup_and_make_report(args, name):
    """One dry run per ARGS: check-config gets them as one word, the study-name lookup reads the study they name,
    make report gets them intact; no cluster-check without PROFILE."""
    run = make_dry_run("study", "STUDY=config/studies/smoke.yaml", f"ARGS={args}")
    line = report_line(run)
    after = " ".join(line.split("snakemake", 1)[1].split())
    assert after.startswith(" ".join(f"--configfile config/studies/smoke.yaml {args} --report".split())), line
    assert f"--report results/{name}/report.html" in line and f"results/{name}/summary.md" in run.stdout
    check, = recipe_lines(run, "cycleio check-config")
    assert check.endswith(f"--snakemake-args={quoted(args)}"), check
    assert not recipe_lines(run, "cluster-check")


def make_run(*words: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    return subprocess.run(["make", "--no-print-directory", *words], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)


def recipe_lines(run: subprocess.CompletedProcess, word: str) -> list[str]:
    assert run.returncode == 0, f"exit {run.returncode}:\n{run.stdout[-1500:]}\n{run.stderr[-1500:]}"
    return [line for line in run.stdout.splitlines() if word in line]


def test_study_takes_several_files_later_ones_overriding(tmp_path):
    mine = tmp_path / "my-tiers.yaml"
    run = make_dry_run("study", f"STUDY=config/studies/smoke.yaml {mine}")
    check, = recipe_lines(run, "cycleio check-config")
    assert f"check-config config/config.yaml config/studies/smoke.yaml {mine} " in check
    study, = [line for line in recipe_lines(run, "snakemake") if "--report" not in line and "cycleio" not in line]
    assert study.endswith(f"snakemake  --configfile config/studies/smoke.yaml {mine} ")
    assert f"--configfile config/studies/smoke.yaml {mine} " in report_line(run)  # and make report gets both


def test_a_profile_is_checked_before_snakemake_runs_with_it():
    run = make_dry_run("study", "PROFILE=profiles/slurm-localhost", "STUDY=config/studies/smoke.yaml")
    lines = run.stdout.splitlines()
    check = next(i for i, line in enumerate(lines) if "cycleio cluster-check --profile profiles/slurm-localhost "
                 "config/config.yaml config/studies/smoke.yaml" in line)
    study = next(i for i, line in enumerate(lines) if "snakemake --workflow-profile profiles/slurm-localhost "
                 "--configfile config/studies/smoke.yaml" in line)
    assert check < study
    assert "--report results/smoke/report.html" in report_line(run)
    # a dry run submits nothing: no check (without PROFILE neither: test_make_study_hands_args...)
    assert not recipe_lines(make_dry_run("study", "PROFILE=profiles/slurm-localhost", "ARGS=-n"), "cluster-check")


def test_the_first_line_names_the_study_the_args_run():
    """check-config as make study runs it (its ARGS: test_make_study_hands_args...) names the study ARGS set."""
    shown = subprocess.run(["python", "-m", "cycleio", "check-config", "config/config.yaml", "config/studies/smoke.yaml",
                            "--snakemake-args", "--config study=resume_probe"], cwd=REPO, capture_output=True,
                           text=True, timeout=120)
    assert shown.stdout.startswith("study resume_probe: 3 cycles"), shown.stdout + shown.stderr


def test_a_config_error_from_make_study_is_one_line_naming_its_file(tmp_path):
    bad = tmp_path / "mine.yaml"
    bad.write_text("study: mine\nrepetitons: 2\n")
    run = make_run("study", f"STUDY=config/studies/smoke.yaml {bad}")
    assert run.returncode != 0
    errors = [line for line in run.stderr.splitlines() if not line.startswith("make:")]
    assert errors == [f"cycleio: cannot start the study: in {bad}: unknown key 'repetitons' (did you mean "
                      f"'resolution'?) at the top level; expected keys: {errors[0].split('expected keys: ')[-1]}"]
    assert "snakemake" not in run.stdout
