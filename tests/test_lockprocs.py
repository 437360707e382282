"""Which processes keep Snakemake's lock live, told from psutil's process table (no Snakemake run: fast)."""

import os
import subprocess
import sys
import time

from cycleio.workflow.locks import _ancestors, live_processes


def test_this_process_and_its_parents_are_its_ancestors():
    own = _ancestors(os.getpid())
    assert {os.getpid(), os.getppid()} <= own
    assert 999_999_999 in _ancestors(999_999_999)  # a process gone: itself only, no error


def test_a_workflow_process_working_in_the_folder_is_live(tmp_path):
    inside = tmp_path / "sub"
    inside.mkdir()
    sleep = ["-c", "import time; time.sleep(60)"]
    # argv[0] "snakemake", as the workflow's own processes are named; a plain python working there is not one
    workflow = subprocess.Popen(["snakemake", *sleep], executable=sys.executable, cwd=inside)
    other = subprocess.Popen([sys.executable, *sleep], cwd=tmp_path)
    elsewhere = subprocess.Popen(["snakemake", *sleep], executable=sys.executable, cwd=tmp_path.parent)
    try:
        deadline = time.monotonic() + 10
        while not live_processes(tmp_path) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert live_processes(tmp_path) == [(workflow.pid, f"snakemake {' '.join(sleep)}")]
    finally:
        for proc in (workflow, other, elsewhere):
            proc.kill()
            proc.wait()
    assert live_processes(tmp_path) == []
