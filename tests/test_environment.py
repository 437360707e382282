"""workflow.environment: the Python the jobs will run, its launcher and the parallel stack are checked once,
before any job."""

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO, with_changes
from cycleio.config.settings import build_study, validate_config
from cycleio.workflow.environment import job_python_problem, launcher_problem, parallel_stack_problem


def test_the_projects_python_can_run_the_jobs(monkeypatch):
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    assert job_python_problem() is None


def test_a_python_without_the_packages_is_named_with_what_it_lacks(tmp_path, monkeypatch):
    bare = tmp_path / "bin"
    bare.mkdir()
    (bare / "python").symlink_to(sys.executable)
    monkeypatch.setenv("PATH", str(bare))
    problem = job_python_problem(modules=("json", "cycleio_no_such_module"))
    assert problem is not None and "lacks cycleio_no_such_module" in problem and str(bare / "python") in problem
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    assert "no 'python' on PATH" in job_python_problem()


def test_the_launcher_starts_ranks_of_mpi4pys_mpi(monkeypatch):
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    assert launcher_problem("mpiexec -n {ntasks}") is None


def test_another_mpis_launcher_first_on_path_is_refused_naming_both(tmp_path, monkeypatch):
    # A stand-in for a foreign MPI's mpiexec (none can be installed beside the mpich wheel's here
    # without changing the machine): it starts each command once, outside any MPI job, so every
    # rank is a world of its own, as under a launcher of another MPI.
    foreign = tmp_path / "foreign-mpi" / "mpiexec"
    foreign.parent.mkdir()
    foreign.write_text('#!/bin/sh\nshift 2\nexec "$@"\n')
    foreign.chmod(0o755)
    monkeypatch.setenv("PATH", f"{foreign.parent}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    problem = launcher_problem("mpiexec -n {ntasks}")
    assert problem is not None
    assert f"({foreign})" in problem and "started worlds of sizes [1] instead of 2 ranks" in problem
    assert "MPICH" in problem  # the MPI mpi4py uses, named


def test_a_study_asking_for_parallel_without_the_stack_is_refused_before_any_job(default_config, tmp_path):
    config = with_changes(default_config, write_strategies=["serial", "parallel"],
                          parallel_stack={"python": str(tmp_path / "no-venv" / "bin" / "python")})
    study = build_study(validate_config(config))
    problem = parallel_stack_problem(study)
    assert "write strategy 'parallel' (config key write_strategies) needs the parallel-netCDF stack" in problem
    assert "parallel_stack.python" in problem and "make setup MPI=system" in problem
    assert "libnetcdf-mpi-dev" in problem
    # the serial arm's jobs do not carry the parallel stack (a change to it reruns no serial forecast)
    assert {arm.strategy: bool(arm.parallel_stack) for arm in study.arms.values()} == {"serial": False,
                                                                                        "parallel": True}
    # the command `make study` runs first refuses it too
    (tmp_path / "study.yaml").write_text(json.dumps({"write_strategies": ["quilt_parallel"], "parallel_stack": {
        "python": str(tmp_path / "none")}}))
    result = subprocess.run([sys.executable, "-m", "cycleio", "check-config", str(REPO / "config" / "config.yaml"),
                             str(tmp_path / "study.yaml")], capture_output=True, text=True, cwd=REPO,
                            env={**os.environ, "PYTHONPATH": str(REPO / "scripts")})
    assert result.returncode == 1 and "write strategy 'quilt_parallel'" in result.stderr + result.stdout
    # a Python without parallel netCDF4 (the project's own) is refused with what it lacks
    no_parallel = build_study(validate_config(with_changes(config, parallel_stack={"python": sys.executable})))
    assert "has no parallel support" in parallel_stack_problem(no_parallel)
    assert parallel_stack_problem(build_study(validate_config(default_config))) is None  # serial alone: no stack
