"""Every bad input is refused before any job, in one line that names the key or file and what is expected.
docs/failures.md's "Inputs refused before any job" lists these cases; keep the two in step.

`make study` checks the config files first (`cycleio check-config`) and stops there when they are refused: one case
goes through `make study` to hold it to that, the others through that check in this process (every case through
`make study` took 48 CPU-s, this way 31). The cases the check lets through are refused by the workflow as it
starts (a tier path known only where the jobs run, a study larger than the disk): they go through `make study`."""

from __future__ import annotations

import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import cycleio_in_process

REPO = Path(__file__).resolve().parents[1]

# (name, the study file's text, the line expected); the study file is laid over config/config.yaml
CASES = [
    ("a misspelt top-level key", "scrach_tiers: [shm]\n",
     "unknown key 'scrach_tiers' (did you mean 'scratch_tiers'?) at the top level"),
    ("a misspelt nested key", "cycles: {strat: '2026010100'}\n", "unknown key 'strat' (did you mean 'start'?) in 'cycles'"),
    ("a word for a number", "levels: many\n", "config key 'levels': expected integer, got 'many'"),
    ("a fraction for an integer", "seed: 1.5\n", "config key 'seed': expected integer, got 1.5"),
    ("a resolution that does not exist", "resolution: C50\n", "config key 'resolution': 'C50' is not allowed"),
    ("a study name with a space", "study: 'my study'\n", "config key 'study': 'my study' does not match"),
    ("a scratch tier that is not defined", "scratch_tiers: [nvme]\n", "config key 'scratch_tiers[0]': 'nvme' is not a tier"),
    ("a non-persistent tier in the persistent role", "persistent_tier: shm\n",
     "config key 'persistent_tier': tier 'shm' has persistent: false"),
    ("cycles that end before they start", "cycles: {end: '2025123118'}\n",
     "config key 'cycles.end': 2025123118 is before cycles.start 2026010100"),
    ("a cycle that is not a date", "cycles: {end: '2026013200'}\n", "config key 'cycles.end': cycle '2026013200' is not a valid date"),
    ("a cycle without its hour", "cycles: {start: '20260101'}\n", "config key 'cycles.start': '20260101' does not match"),
    ("a misspelt tier key", "tiers: {shm: {pth: /x}}\n", "unknown key 'pth' (did you mean 'path'?) in 'tiers.shm'"),
    ("a tier path with a variable that is not set", "tiers: {bb: {kind: burst_buffer, path: '$NO_SUCH_VAR_X/bb'}}\n",
     "config key 'tiers.bb.path': tier 'bb': path '$NO_SUCH_VAR_X/bb' uses $NO_SUCH_VAR_X, which is not set"),
    ("restart hours without the cycle interval", "forecast: {restart_hours: [3, 9]}\n",
     "config key 'forecast.restart_hours': [3, 9] must include cycles.interval_hours (6)"),
    ("restart hours off the output cadence", "cycles: {interval_hours: 5}\nforecast: {restart_hours: [3, 5, 6, 9]}\n",
     "config key 'forecast.restart_hours': [5] are not output hours"),
    ("a launcher without {ntasks}", "launcher: mpiexec -n 4\n",
     "config key 'launcher': 'mpiexec -n 4' does not say how many tasks to start"),
    ("a launcher template with an unknown field", "launcher: 'mpiexec -n {tasks}'\n",
     "config key 'launcher': 'mpiexec -n {tasks}' is not a valid template"),
    ("IOR asked for but not installed", "benchmarks: {tool: ior}\n", "config key 'benchmarks.ior_path': benchmarks.tool is 'ior' but ior was not found"),
    ("an IOR path that is not a program", "benchmarks: {ior_path: /nonexistent/ior}\n",
     "config key 'benchmarks.ior_path': '/nonexistent/ior' is not an executable file"),
    ("a transfer size IOR refuses", "benchmarks: {patterns: {easy: {transfer_size: 47001}}}\n",
     "config key 'benchmarks.patterns.easy.transfer_size': 47001 bytes is not a multiple of 8 bytes"),
    ("a block size that is not whole transfers", "benchmarks: {patterns: {easy: {transfer_size: 1m, block_size: 1536k}}}\n",
     "config key 'benchmarks.patterns.easy.block_size': 1572864 bytes is not a multiple of transfer_size"),
    ("a benchmark pattern that is not defined", "benchmarks: {io_patterns: [nosuch]}\n",
     "config key 'benchmarks.io_patterns[0]': 'nosuch' is not a pattern in benchmarks.patterns"),
    ("a staging granularity that does not exist", "staging: {granularity: [hour]}\n",
     "config key 'staging.granularity[0]': 'hour' is not allowed; expected one of: step, cycle"),
    ("no copy streams", "staging: {streams: 0}\n", "config key 'staging.streams': 0 is less than the minimum of 1"),
    ("a negative ensemble", "ensemble: {members: -2}\n", "config key 'ensemble.members': -2 is less than the minimum of 0"),
    ("a batch-system variable in a local run", "tiers: {node_local: {path: '${SLURM_TMPDIR}/x'}}\n",
     "uses $SLURM_TMPDIR, which is not set; set it, or give a default as ${SLURM_TMPDIR:-/some/path}; this run executes its jobs here"),
    ("a tier under a file", "tiers: {node_local: {path: '{tmp}/a-file/scratch'}}\n",
     "tier 'node_local': path '{tmp}/a-file/scratch' cannot be written"),
    ("a study larger than the disk", "resolution: C1152\n",
     "the study needs about"),
    ("a study file that is not YAML", "cycles:\n  start: \"2026010100\n", "line 3, column 1: not valid YAML"),
    ("an empty study file", "", "is empty; expected config keys (key: value)"),
    ("a list instead of keys", "- a\n- b\n", "holds a list at the top level; expected config keys"),
    ("a fault aimed at a cycle the study does not run", "faults: {fail_step: [{cycle: 2030010100, step: fcst}]}\n",
     "config key 'faults.fail_step[0].cycle': 2030010100 is not a cycle of the study"),
    ("a fault aimed at a rank the forecast does not have", "faults: {fail_rank: [{cycle: 2026010106, rank: 7}]}\n",
     "config key 'faults.fail_rank[0].rank': 7 is not a rank of arm lustre's forecast"),
    ("a slow-tier fault without its delay", "faults: {slow_tier: [{cycle: 2026010106, step: anal}]}\n",
     "config key 'faults.slow_tier[0]': 'delay_ms' is a required property"),
    ("capacity units for a tier the study does not have", "plan: {units: {lustr: {name: OSTs, measured: 4}}}\n",
     "config key 'plan.units.lustr': 'lustr' is not a tier; expected one of: lustre, node_local, shm"),
    ("capacity units without how many were measured", "plan: {units: {lustre: {name: OSTs}}}\n",
     "config key 'plan.units.lustre': 'measured' is a required property"),
    ("a full-tier fault without the bytes to leave", "faults: {fill_tier: [{cycle: 2026010106, step: anal}]}\n",
     "config key 'faults.fill_tier[0]': 'leave' is a required property"),
    ("a replay log that is not a Darshan log", "darshan: {jobs: {mine: {log: '{tmp}/a-file'}}}\n",
     "config key 'darshan.jobs.mine.log': {tmp}/a-file: not a Darshan log"),
    ("a replay log pydarshan does not ship", "darshan: {jobs: {mine: {log: 'example:nope.darshan'}}}\n",
     "config key 'darshan.jobs.mine.log': example:nope.darshan: pydarshan ships no log 'nope.darshan'"),
    ("more replay ranks than the log had", "darshan: {jobs: {ior: {log: 'example:ior_hdf5_example.darshan', ranks: 8}}}\n",
     "config key 'darshan.jobs.ior.ranks': 8: the log's job ran 4 ranks"),
    ("replay files larger than the tier", "darshan: {jobs: {vpic: {log: 'example:example.darshan'}}}\n",
     "config key 'darshan.jobs.vpic': the replay's files take 2.0 TiB at scale 1"),
    ("more replay ranks than can start here",
     "darshan: {jobs: {vpic: {log: 'example:example.darshan', ranks: 2048, scale: 0.000001}}}\n",
     "config key 'darshan.jobs.vpic.ranks': 2048: only "),
    ("replay jobs only, with none", "darshan: {only: true}\n",
     "config key 'darshan.only': true, but darshan.jobs is empty"),
]


# refused once the workflow starts (where its jobs run is known only then), so not by a dry run
STARTED = {"a batch-system variable in a local run", "more replay ranks than can start here"}
# refused as a real run parses the Snakefile; a dry run only notes it and still lists the jobs (preflight.check_study)
REAL_RUN = STARTED | {"a study larger than the disk"}


def study_file(case, tmp_path: Path) -> tuple[Path, str]:
    """The case's study file in a folder of its own (with a file in it, ``{tmp}/a-file``), and its expected line."""
    name, text, expected = case
    folder = tmp_path / name.replace(" ", "-").replace("{", "").replace("}", "")
    folder.mkdir(parents=True)
    (folder / "a-file").write_text("x")
    study = folder / "study.yaml"
    study.write_text(text.replace("{tmp}", str(folder)))
    return study, expected.replace("{tmp}", str(folder))


def refuse(case, tmp_path: Path) -> tuple[str, subprocess.CompletedProcess, str]:
    """The case through `make study` (a dry run, or a real one for a case refused only as the workflow starts)."""
    name = case[0]
    study, expected = study_file(case, tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("SLURM_TMPDIR", "MAKEFLAGS", "MAKELEVEL")}
    args = "--cores 1" if name in REAL_RUN else "-n"
    run = subprocess.run(["make", "-s", "--no-print-directory", "study", f"STUDY={study}", f"ARGS={args}"], cwd=REPO,
                         env=env, capture_output=True, text=True, timeout=300)
    return name, run, expected


def check_config(case, tmp_path: Path) -> tuple[str, subprocess.CompletedProcess, str]:
    """The case through what `make study` runs first, `cycleio check-config config/config.yaml STUDY`, here."""
    study, expected = study_file(case, tmp_path)
    return case[0], cycleio_in_process(["check-config", "config/config.yaml", str(study), "--snakemake-args=-n"]), expected


@pytest.mark.e2e
def test_every_bad_input_is_refused_before_any_job_in_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    monkeypatch.delenv("SLURM_TMPDIR", raising=False)
    checked = [check_config(case, tmp_path / "checked") for case in CASES[1:]]
    refused = [result for result in checked if result[1].returncode != 0]
    # the first case (make study stops where the check refuses it) and those the workflow refuses as it starts
    passed = {name for name, run, _ in checked if run.returncode == 0}
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = refused + list(pool.map(lambda case: refuse(case, tmp_path),
                                          [case for case in CASES if case is CASES[0] or case[0] in passed]))
    assert {name for name, _, _ in results} == {name for name, _, _ in CASES}
    failures = []
    for name, run, expected in results:
        output = run.stdout + run.stderr
        if run.returncode == 0 or not any(expected in line for line in output.splitlines()):
            failures.append(f"{name}: exit {run.returncode}, expected {expected!r} in:\n{output[-800:]}")
        if "Finished job" in output or "rule " in output and name not in STARTED:
            failures.append(f"{name}: jobs were planned or run before the refusal:\n{output[-800:]}")
    assert not failures, "\n\n".join(failures)
    assert len(CASES) >= 25


def test_the_docs_list_every_refused_input():
    page = (REPO / "docs" / "failures.md").read_text()
    missing = [name for name, _, _ in CASES if f"- {name}" not in page]
    assert not missing, f"docs/failures.md's 'Inputs refused before any job' lacks: {missing}"


@pytest.mark.e2e
def test_a_dry_run_of_a_study_larger_than_the_disk_lists_its_jobs_and_says_what_a_real_run_would_meet(tmp_path):
    _, run, _ = refuse(("a dry run too large", "resolution: C1152\n", ""), tmp_path)
    assert run.returncode == 0, run.stdout[-800:] + run.stderr[-800:]
    output = run.stdout + run.stderr
    assert "cycleio: a real run would not start: " in output and "the study needs about" in output
    assert "rule " in output or "Job stats" in output  # the jobs are listed
