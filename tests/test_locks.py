"""A run killed hard leaves Snakemake's lock: the next run removes it, never a live run's."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cycleio.workflow.locks import live_processes, lock_files, remove_stale_lock

# Starts real Snakemake runs (a few seconds each): with the end-to-end tests, in `make test`, not `make test-fast`.
pytestmark = pytest.mark.e2e

SNAKEFILE = """
rule all:
    input: "slow.txt"

rule slow:
    output: "slow.txt"
    shell: "sleep 60; touch {output}"
"""


def start_run(workdir: Path) -> subprocess.Popen:
    snakemake = Path(sys.executable).parent / "snakemake"
    run = subprocess.Popen([str(snakemake), "--cores", "1", "--quiet"], cwd=workdir, start_new_session=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not lock_files(workdir):
        if run.poll() is not None or time.monotonic() > deadline:
            run.kill()
            pytest.fail("Snakemake did not start and lock its working directory")
        time.sleep(0.2)
    return run


def test_a_killed_runs_lock_is_removed_and_a_live_runs_is_kept(tmp_path):
    (tmp_path / "Snakefile").write_text(SNAKEFILE)
    run = start_run(tmp_path)
    try:
        assert any(pid == run.pid for pid, _ in live_processes(tmp_path))
        with pytest.raises(RuntimeError, match=rf"still going \(pid {run.pid}"):
            remove_stale_lock(tmp_path, [])
        assert lock_files(tmp_path)
    finally:
        os.killpg(run.pid, signal.SIGKILL)  # as a lost node or `kill -9` would: no cleanup
        run.wait()
    assert lock_files(tmp_path), "a hard kill leaves the lock (else this test proves nothing)"
    assert "removed the lock" in remove_stale_lock(tmp_path, [])
    assert not lock_files(tmp_path)
    assert remove_stale_lock(tmp_path, []) == "no lock"
    dry = subprocess.run([str(Path(sys.executable).parent / "snakemake"), "-n", "--quiet"], cwd=tmp_path,
                         capture_output=True, text=True)
    assert dry.returncode == 0, dry.stderr
