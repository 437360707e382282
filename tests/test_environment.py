"""The Python the jobs will run is checked once, before any job."""

import os
import sys
from pathlib import Path

from cycleio.workflow.environment import job_python_problem, launcher_problem


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
