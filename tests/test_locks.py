"""A run killed hard leaves Snakemake's lock: the next run removes it, never a live run's."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from cycleio.workflow.locks import live_processes, lock_files, orphaned_tools, remove_stale_lock

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


def test_benchmark_tools_a_killed_run_left_behind_are_stopped_before_a_rerun(tmp_path):
    """fio's job processes are session leaders: a kill of the run's process group leaves them waiting."""
    raw = tmp_path / "results" / "s" / "bench" / "disk" / "replay.raw"
    raw.mkdir(parents=True)
    # a "fio" whose parent exits at once: an orphan, as a killed run leaves it
    wait = f"{sys.executable} -c 'import time; time.sleep(300)'"
    subprocess.run(["bash", "-c", f"(exec -a fio {wait} --output={raw}/x.json &)"], cwd=tmp_path, check=True)
    by_hand = subprocess.Popen(["bash", "-c", f"exec -a fio {wait}"], cwd=tmp_path)  # a user's own fio stays
    try:
        deadline = time.time() + 10
        while not orphaned_tools(tmp_path) and time.time() < deadline:
            time.sleep(0.1)
        orphans = orphaned_tools(tmp_path)
        assert [p.cmdline()[0] for p in orphans] == ["fio"] and by_hand.pid not in {p.pid for p in orphans}
        assert remove_stale_lock(tmp_path, []) == "no lock"
        psutil.wait_procs(orphans, timeout=10)
        assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in orphans)
        assert by_hand.poll() is None
    finally:
        by_hand.kill()
        by_hand.wait()
