"""The shared-file write strategies (parallel, quilt_parallel) for real: netCDF-4 on parallel HDF5 through MPI-IO.

They run on the parallel-netCDF stack (.venv-parallel: netCDF4 built against Debian's MPI netCDF, Open
MPI), under mpirun.openmpi with 2 to 4 ranks on the machine's 2 cores. The stack is built here when it
is missing (scripts/bootstrap-parallel.sh, about a minute and a half the first time; as root on Debian
it installs the system packages); in CI (CI=true) a stack that cannot be built fails the tests, never
skips them. Every file must hold what the in-process writer writes (compared with xarray), compressed
history included (zlib, BitRound: the collective filtered writes).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import REPO, assert_same_files, cannot_run_here, forecast_arm, run_forecast, sampled_writes, with_changes

from cycleio.config.keys import ConfigError
from cycleio.config.settings import build_study, validate_config
from cycleio.surrogates.forecast.layout import ForecastError, RankLayout
from cycleio.surrogates.forecast.launcher import program_stack
from cycleio.workflow.environment import parallel_launcher_problem, parallel_stack_problem

# the forecast under real MPI, its reference files (fixture forecast_reference) and the folder the ranks write to
# (fixture forecast_dir) are conftest's, as for the other strategies (test_launcher)

BUILD_TIMEOUT_S = 1200  # apt and the netCDF4 build: about a minute and a half on the 2-core machine


@pytest.fixture(scope="session")
def parallel_python() -> str:
    """The parallel stack's Python, built by the project's own script when missing (or out of date)."""
    python = REPO / ".venv-parallel" / "bin" / "python"
    try:
        result = subprocess.run(["bash", str(REPO / "scripts" / "bootstrap-parallel.sh")], capture_output=True,
                                text=True, timeout=BUILD_TIMEOUT_S, stdin=subprocess.DEVNULL)
        problem = None if result.returncode == 0 else (result.stdout + result.stderr).strip()[-2000:]
    except (OSError, subprocess.TimeoutExpired) as err:
        problem = str(err)
    if problem is None and not python.is_file():
        problem = f"{python} is missing after the bootstrap"
    if problem:
        cannot_run_here(f"the parallel-netCDF stack could not be built (scripts/bootstrap-parallel.sh): {problem}")
    return str(python)


def parallel_settings(strategy: str, ranks: int, **write_component):
    arm = forecast_arm(strategy, ranks, **write_component)
    return replace(arm, parallel_stack={"python": ".venv-parallel/bin/python",
                                        "launcher": "mpirun.openmpi --oversubscribe -n {ntasks}"})


def by_op(records: list[dict]) -> dict[str, list[dict]]:
    out = defaultdict(list)
    for r in records:
        out[r["op"]].append(r)
    return out


# ---------------------------------------------------------------- without MPI


def test_config_names_the_key_of_a_bad_value(default_config):
    with pytest.raises(ConfigError, match="write_component.mpiio"):
        validate_config(with_changes(default_config, write_component__mpiio="sometimes"))
    with pytest.raises(ConfigError, match="parallel_stack"):
        validate_config(with_changes(default_config, parallel_stack={"python": ""}))


# ---------------------------------------------------------------- under mpirun.openmpi


def test_the_stack_is_built_for_parallel_io(parallel_python):
    probe = "import netCDF4, mpi4py; print(bool(netCDF4.__has_parallel4_support__), netCDF4.__netcdf4libversion__)"
    out = subprocess.run([parallel_python, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.split()[0] == "True"
    study = build_study(validate_config({"write_strategies": ["parallel"]}))
    assert parallel_stack_problem(study) is None
    assert parallel_launcher_problem(study) is None  # mpirun.openmpi starts one world of its ranks


@pytest.mark.tool
@pytest.mark.timeout(400)
@pytest.mark.parametrize("strategy, ranks, extra", [
    ("parallel", 2, {}),  # collective
    ("parallel", 4, {"mpiio": "independent"}),  # 4 ranks on 2 cores; compressed history collective regardless
    ("quilt_parallel", 2, {"write_tasks_per_group": 2}),  # 2 compute + a write group of 2: 4 ranks
    ("quilt_parallel", 3, {"write_groups": 1}),  # 3 compute + 1 writer (the write group of one)
])
def test_shared_file_strategies_write_the_same_data_and_their_records(parallel_python, forecast_reference, forecast_dir,
                                                                      strategy, ranks, extra):
    arm = parallel_settings(strategy, ranks, **extra)
    info: dict = {}
    records = run_info(arm, forecast_dir, info)
    assert_same_files(forecast_reference, forecast_dir)  # same names and data; no temporaries left

    layout = RankLayout.from_settings(strategy, arm.write_component)
    ops = by_op(records)
    assert {r["nranks"] for r in records} == {layout.ntasks}
    assert {r.get("mpiio") for r in ops["write"] + ops["write_effective"]} == {layout.mpiio}
    hours = ["f000", "f003", "f006"]
    assert {(r["file"], r["rank"]) for r in ops["write_effective"]} == {(h, rank) for h in hours
                                                                         for rank in range(ranks)}
    assert len(ops["write_final"]) == 1
    writers = set(range(ranks)) if strategy == "parallel" else set(range(ranks, layout.ntasks))
    shared = defaultdict(list)
    for r in ops["write"]:
        shared[r["file"]].append(r)
    atm = next(name for name in shared if "atmf" in name)
    assert {r["rank"] for r in shared[atm]} == writers, "every writer rank writes its rows of the shared file"
    for name, parts in shared.items():  # the ranks' shares of a file add up to its size on storage
        assert sum(r["bytes"] for r in parts) == (forecast_dir / name).stat().st_size, name
    assert info["parallel4"] is True and info["mpi_library"].startswith("Open MPI")
    assert Path(info["argv"][0]).name == "mpirun.openmpi" and info["argv"][-1] == arm_python(arm)


def arm_python(arm) -> str:
    return program_stack(arm)[2]


def run_info(arm, root: Path, info: dict) -> list[dict]:
    return run_forecast(arm, root, sampled_writes(), info=info)


@pytest.mark.tool
@pytest.mark.timeout(120)
def test_a_launcher_of_another_mpi_is_refused_by_the_ranks(parallel_python, forecast_dir, tmp_path):
    """The parallel stack's ranks started by a launcher that is not their MPI's: each is a world of one, and
    refuses to write every file whole."""
    alone = tmp_path / "foreign-mpiexec"
    alone.write_text('#!/bin/sh\nshift 2\nexec "$@"\n')  # starts the command once, outside any MPI job
    alone.chmod(0o755)
    arm = replace(parallel_settings("parallel", 2), parallel_stack={"launcher": f"{alone} -n {{ntasks}}"})
    with pytest.raises(ForecastError, match=r"a world of 1 ranks, but parallel, 2 compute ranks.*needs 2"):
        run_forecast(arm, forecast_dir)
    assert not any(p.suffix == ".nc" for p in forecast_dir.rglob("*"))


@pytest.mark.tool
@pytest.mark.timeout(120)
def test_a_failing_writer_fails_the_step_with_its_error(parallel_python, forecast_dir):
    with pytest.raises(ForecastError, match=r"rank 1 of 4 failed: .*rank 1 fails at its first output hour"):
        run_forecast(parallel_settings("quilt_parallel", 2, write_tasks_per_group=2), forecast_dir, fail_rank=1)


# ---------------------------------------------------------------- through the workflow


@pytest.mark.e2e
@pytest.mark.tool
@pytest.mark.timeout(600)
def test_a_study_of_serial_and_the_shared_file_strategies_end_to_end(parallel_python, tmp_path):
    """Snakemake runs serial, parallel and quilt_parallel arms side by side (C12, one half cycle, unstaged):
    the shared-file arms' history holds the serial arm's data, their manifests name Open MPI and the parallel
    stack's launcher, io_events carries the MPI-IO mode, and the write-strategy figure shows every arm."""
    import pandas as pd
    import xarray as xr
    import yaml

    bin_dir = Path(sys.executable).parent
    study = {"study": "par", "cycles": {"start": "2026123112", "end": "2026123112"},
             "scratch_tiers": ["lustre"], "write_strategies": ["serial", "parallel", "quilt_parallel"],
             "write_component": {"ranks": 2, "write_groups": 1, "write_tasks_per_group": 2},
             "parallel_stack": {"python": parallel_python}, "benchmarks": {"enabled": False}}
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(study))
    targets = ["results/par/tables/io_events.parquet", "results/par/figures/write_strategies.png"]
    cmd = [str(bin_dir / "snakemake"), *targets, "-s", str(REPO / "Snakefile"), "--cores", "2", "--configfile",
           str(REPO / "config" / "studies" / "smoke.yaml"), str(tmp_path / "study.yaml")]
    result = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=540,
                            env={**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-5000:]}"

    arms = tmp_path / "results" / "tiers" / "lustre" / "par"
    history = sorted((arms / "lustre_serial").rglob("*atmf00*.nc"))
    assert history
    for path in history:
        for other in ("lustre_parallel", "lustre_quilt_parallel"):
            with xr.open_dataset(path, decode_times=False) as a, \
                    xr.open_dataset(arms / other / path.relative_to(arms / "lustre_serial"), decode_times=False) as b:
                xr.testing.assert_identical(a, b)
    for arm, launcher in (("lustre_parallel", "mpirun.openmpi"), ("lustre_quilt_parallel", "mpirun.openmpi"),
                          ("lustre_serial", "mpiexec")):
        manifest = json.loads((tmp_path / "results/par/arms" / arm / "2026123112/fcst.manifest.json").read_text())
        mpi = manifest["provenance"]["mpi"]
        assert Path(mpi["argv"][0]).name == launcher, mpi
        assert mpi["mpi_library"].startswith("Open MPI" if launcher == "mpirun.openmpi" else "MPICH"), mpi
        post = json.loads((tmp_path / "results/par/arms" / arm / "2026123112/post.manifest.json").read_text())
        assert post["provenance"]["mpi"]["note"] == "this job starts no MPI program"
    events = pd.read_parquet(tmp_path / "results/par/tables/io_events.parquet")
    writes = events[(events["step"] == "fcst") & (events["op"] == "write")]
    assert set(writes.groupby("strategy")["mpiio"].first()) == {"", "collective"}
    assert set(writes[writes["strategy"] != "serial"]["mpiio"]) == {"collective"}
    assert (tmp_path / "results/par/figures/write_strategies.png").stat().st_size > 0
