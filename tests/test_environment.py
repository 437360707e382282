"""The Python the jobs will run is checked once, before any job."""

import os
import sys
from pathlib import Path

from cycleio.workflow.environment import job_python_problem


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
